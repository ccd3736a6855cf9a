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

// isNop reports whether mt is the NopMetrics default.
func isNop(mt Metrics) bool {
	_, nop := mt.(NopMetrics)
	return nop
}

// describeHealthWire copies the lag and source-health fields of p to their tagged wire
// fields (absent when unknown).
func describeHealthWire(rp *admin.DescribeClusterMirrorsResponseMirrorTopicPartition, p PartitionDescription) {
	rp.TimeLagMs = -1
	if p.TimeLag >= 0 {
		rp.TimeLagMs = p.TimeLag.Milliseconds()
	}
	rp.LastFetchTimestamp = unixMilliOr(p.LastFetch)
	rp.SourceErrorCode = int16(p.SourceErrorCode)
	rp.SourceErrorMessage = strPtr(p.SourceErrorMessage)
	rp.SourceUnreachableSince = unixMilliOr(p.SourceUnreachableSince)
}

// healthFromWire is the inverse of describeHealthWire.
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

func unixMilliOr(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
