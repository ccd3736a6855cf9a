package adminhandler

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// ListClusterMirrors implements admin.Handler (spec §11.3). An unknown desired state
// in the filter is INVALID_REQUEST.
func (h *handler) ListClusterMirrors(ctx context.Context, rc *admin.RequestContext, req *admin.ListClusterMirrorsRequest) (*admin.ListClusterMirrorsResponse, error) {
	f := mirror.ListFilter{
		SourceClusterIDs:  req.SourceClusterIdFilter,
		MirrorNames:       req.MirrorNameFilter,
		IncludeTopicNames: req.IncludeTopicNames,
	}
	for _, s := range req.DesiredMirrorStateFilter {
		d, err := statemachine.ParseDesired(s)
		if err != nil {
			return nil, admin.Errorf(admin.CodeInvalidRequest, "desired state filter: %v", err)
		}
		f.DesiredStates = append(f.DesiredStates, d)
	}
	ls, err := h.m.ListClusterMirrors(ctx, f)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	resp := admin.NewPtrListClusterMirrorsResponse()
	for _, l := range ls {
		rm := admin.NewListClusterMirrorsResponseMirror()
		rm.MirrorName = l.Name
		rm.SourceBootstrap = l.SourceBootstrap
		rm.SourceClusterId = l.SourceClusterID
		rm.TopicCount = int32(l.TopicCount)
		if req.IncludeTopicNames {
			rm.TopicNames = append([]string{}, l.TopicNames...)
		}
		resp.Mirrors = append(resp.Mirrors, rm)
	}
	return resp, nil
}

// DescribeClusterMirrors implements admin.Handler (spec §11.4). A named mirror that
// does not exist is answered with a per-mirror UNKNOWN_CLUSTER_MIRROR; the others are
// still described. Partitions carry their RetryAttempt (-1 = non-retryable).
func (h *handler) DescribeClusterMirrors(ctx context.Context, rc *admin.RequestContext, req *admin.DescribeClusterMirrorsRequest) (*admin.DescribeClusterMirrorsResponse, error) {
	ctx, cancel := withTimeout(ctx, req.TimeoutMs)
	defer cancel()
	o := mirror.DescribeOptions{
		IncludeStates: req.IncludeMirrorStates,
		IncludeLags:   req.IncludeMirrorLags,
	}
	if req.ClusterId != nil {
		o.ClusterID = *req.ClusterId
	}
	if req.TopicPartitions != nil {
		o.TopicPartitions = make(map[string][]int32, len(req.TopicPartitions))
		for _, tp := range req.TopicPartitions {
			o.TopicPartitions[tp.Topic] = append(o.TopicPartitions[tp.Topic], tp.Partitions...)
		}
	}
	resp := admin.NewPtrDescribeClusterMirrorsResponse()
	var descs []mirror.MirrorDescription
	if req.MirrorNames == nil {
		ds, err := h.m.DescribeClusterMirrors(ctx, nil, o)
		if err != nil {
			return nil, h.wireError(rc, err)
		}
		descs = ds
	} else {
		// One call per name (repeats answered once), so that an unknown name fails alone.
		seen := make(map[string]bool, len(req.MirrorNames))
		for _, name := range req.MirrorNames {
			if seen[name] {
				continue
			}
			seen[name] = true
			ds, err := h.m.DescribeClusterMirrors(ctx, []string{name}, o)
			if err != nil {
				if admin.CodeOf(err) != admin.CodeUnknownClusterMirror {
					return nil, h.wireError(rc, err)
				}
				rm := admin.NewDescribeClusterMirrorsResponseMirror()
				rm.MirrorName = name
				rm.ErrorCode, rm.ErrorMessage = h.codeAndMessage(rc, err)
				resp.Mirrors = append(resp.Mirrors, rm)
				continue
			}
			descs = append(descs, ds...)
		}
	}
	for _, d := range descs {
		resp.Mirrors = append(resp.Mirrors, describeMirror(d))
	}
	return resp, nil
}

// describeMirror converts one mirror.MirrorDescription to its wire form.
func describeMirror(d mirror.MirrorDescription) admin.DescribeClusterMirrorsResponseMirror {
	rm := admin.NewDescribeClusterMirrorsResponseMirror()
	rm.MirrorName = d.Name
	rm.SourceBootstrap = strPtr(d.SourceBootstrap)
	rm.SourceClusterId = strPtr(d.SourceClusterID)
	for _, t := range d.Topics {
		rt := admin.NewDescribeClusterMirrorsResponseMirrorTopic()
		rt.TopicName = t.Topic
		for _, p := range t.Partitions {
			rp := admin.NewDescribeClusterMirrorsResponseMirrorTopicPartition()
			rp.PartitionIndex = p.Partition
			rp.ErrorCode = int16(p.ErrorCode)
			rp.State = int8(p.State)
			rp.ErrorMessage = strPtr(p.ErrorMessage)
			rp.SourceOffset = p.SourceOffset
			rp.DestinationOffset = p.DestinationOffset
			rp.LastMirrorEpoch = p.LastMirrorEpoch
			rp.LastMirrorOffset = p.LastMirrorOffset
			describeHealthWire(&rp, p)
			rp.RetryAttempt = p.RetryAttempt
			rt.Partitions = append(rt.Partitions, rp)
		}
		rm.Topics = append(rm.Topics, rt)
	}
	return rm
}

// describeHealthWire copies the lag, source-health and fidelity fields of p to their
// wire fields (-1 or null when unknown; mirror's AdminPeer reads them back; the
// version 1 fields are not encoded for a version 0 request).
func describeHealthWire(rp *admin.DescribeClusterMirrorsResponseMirrorTopicPartition, p mirror.PartitionDescription) {
	rp.TimeLagMs = -1
	if p.TimeLag >= 0 {
		rp.TimeLagMs = p.TimeLag.Milliseconds()
	}
	rp.LastFetchTimestamp = unixMilliOr(p.LastFetch)
	rp.SourceErrorCode = int16(p.SourceErrorCode)
	rp.SourceErrorMessage = strPtr(p.SourceErrorMessage)
	rp.SourceUnreachableSince = unixMilliOr(p.SourceUnreachableSince)
	rp.SourceOffsetTimestamp = unixMilliOr(p.SourceOffsetTime)
	rp.VerifiedOffset, rp.VerifiedTimestamp = p.VerifiedOffset, unixMilliOr(p.VerifiedTime)
}

// unixMilliOr is t in Unix milliseconds, -1 for the zero time.
func unixMilliOr(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
