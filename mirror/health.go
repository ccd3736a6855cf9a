package mirror

import (
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/reconcile"
)

// describeHealth fills the lag and source-health fields of pd from reconciler r
// (SourceOffset and DestinationOffset already set when lags were requested).
func describeHealth(pd *PartitionDescription, r *reconcile.Partition, lags bool, now time.Time) {
	h := r.Health(pd.Lag(), now)
	if lags {
		pd.TimeLag, pd.LastFetch = h.TimeLag, h.LastFetch
	}
	pd.SourceErrorCode, pd.SourceErrorMessage, pd.SourceUnreachableSince = h.SourceErrorCode, h.SourceErrorMessage, h.SourceUnreachableSince
}

// healthFromWire reads the lag and source-health fields of a partition described over
// the wire (as mirror/adminhandler encodes them: -1 and null when unknown) into pd.
func healthFromWire(pd *PartitionDescription, rp admin.DescribeClusterMirrorsResponseMirrorTopicPartition) {
	pd.TimeLag = -1
	if rp.TimeLagMs >= 0 {
		pd.TimeLag = time.Duration(rp.TimeLagMs) * time.Millisecond
	}
	pd.LastFetch = timeOrZero(rp.LastFetchTimestamp)
	pd.SourceErrorCode = admin.Code(rp.SourceErrorCode)
	if rp.SourceErrorMessage != nil {
		pd.SourceErrorMessage = *rp.SourceErrorMessage
	}
	pd.SourceUnreachableSince = timeOrZero(rp.SourceUnreachableSince)
}

func timeOrZero(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
