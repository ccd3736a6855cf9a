package mirror

import (
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/internal/reconcile"
	"github.com/kmirror/kmirror/statemachine"
)

// describeHealth fills the offsets (when lags were requested), lag, source-health and
// fidelity fields of pd from reconciler r. While fetching, the source offset is the
// fetcher's latest; in PAUSING, PAUSED and FAILED the last one read, by the fetcher or
// the fidelity check, with its time; otherwise unknown (a restarted fetcher has not
// answered yet: the old value would show a false catch-up).
func describeHealth(pd *PartitionDescription, r *reconcile.Partition, lags bool, now time.Time) {
	st, _ := r.Current()
	if lags {
		var hw int64
		hw, pd.DestinationOffset = r.Offsets()
		end, at := r.SourceEnd()
		switch {
		case hw >= 0:
			pd.SourceOffset, pd.SourceOffsetTime = hw, at
		case st == statemachine.Paused || st == statemachine.Pausing || st == statemachine.Failed:
			pd.SourceOffset, pd.SourceOffsetTime = end, at
		}
	}
	h := r.Health(pd.Lag(), now)
	if lags {
		pd.TimeLag, pd.LastFetch = h.TimeLag, h.LastFetch
	}
	pd.SourceErrorCode, pd.SourceErrorMessage, pd.SourceUnreachableSince = h.SourceErrorCode, h.SourceErrorMessage, h.SourceUnreachableSince
	pd.VerifiedOffset, pd.VerifiedTime = r.Fidelity()
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
	pd.SourceOffsetTime = timeOrZero(rp.SourceOffsetTimestamp)
	pd.VerifiedOffset, pd.VerifiedTime = rp.VerifiedOffset, timeOrZero(rp.VerifiedTimestamp)
}

func timeOrZero(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
