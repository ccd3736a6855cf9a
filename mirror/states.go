package mirror

import (
	"context"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// The instance-to-instance RPCs (spec §11.8-11.11) take and return the admin wire types,
// so an admin.Handler can dispatch to them directly. Topics are named on the wire and
// resolved to topic ids through the Controller; a topic that is not a topic of the
// mirror answers UNKNOWN_TOPIC_OR_PARTITION per partition. An unknown mirror is a
// top-level UNKNOWN_CLUSTER_MIRROR (*admin.Error).

// ReadMirrorStates reads actual partition states from this instance's coordinator
// (spec §11.8). A LeaderEpoch above the stored highest-seen epoch raises it (§9.6).
func (m *Mirror) ReadMirrorStates(ctx context.Context, req *admin.ReadMirrorStatesRequest) (*admin.ReadMirrorStatesResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	if _, ok := m.ctrl.Mirror(req.MirrorName); !ok {
		return nil, controller.UnknownMirror(req.MirrorName)
	}
	resp := admin.NewPtrReadMirrorStatesResponse()
	creq := coordinator.ReadRequest{MirrorName: req.MirrorName}
	type ref struct{ t, p int }
	var refs []ref
	for _, t := range req.Topics {
		rt := admin.NewReadMirrorStatesResponseTopic()
		rt.TopicName = t.TopicName
		id, ok := m.topicID(req.MirrorName, t.TopicName)
		for _, p := range t.Partitions {
			rp := admin.NewReadMirrorStatesResponseTopicPartition()
			rp.PartitionIndex = p.PartitionIndex
			rp.State, rp.LeaderEpoch, rp.StateEpoch, rp.LastMirrorEpoch, rp.LastMirrorOffset = int8(statemachine.Unknown), -1, -1, -1, -1
			if !ok {
				rp.ErrorCode = int16(admin.CodeUnknownTopicOrPartition)
			} else {
				creq.Partitions = append(creq.Partitions, coordinator.ReadPartition{TopicID: id, Partition: p.PartitionIndex, LeaderEpoch: p.LeaderEpoch})
				refs = append(refs, ref{len(resp.Topics), len(rt.Partitions)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(creq.Partitions) > 0 {
		cresp, err := m.coord.ReadMirrorStates(ctx, creq)
		if err != nil {
			return nil, err
		}
		for i, r := range cresp.Partitions {
			rp := &resp.Topics[refs[i].t].Partitions[refs[i].p]
			rp.ErrorCode = int16(r.ErrorCode)
			if r.ErrorCode != admin.CodeNone {
				continue
			}
			rp.State, rp.LeaderEpoch, rp.StateEpoch = int8(r.State), r.LeaderEpoch, r.StateEpoch
			rp.LastMirrorEpoch, rp.LastMirrorOffset, rp.ErrorMessage = r.LastMirrorEpoch, r.LastMirrorOffset, r.ErrorMessage
			rp.RetryAttempt, rp.PreviousState = r.RetryAttempt, int8(r.PreviousState)
		}
	}
	return resp, nil
}

// WriteMirrorStates writes actual partition states to this instance's coordinator with
// the fencing of spec §9.6 (per-partition FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
// INVALID_CLUSTER_MIRROR_STATES for an illegal move). State UNKNOWN only updates the LME.
func (m *Mirror) WriteMirrorStates(ctx context.Context, req *admin.WriteMirrorStatesRequest) (*admin.WriteMirrorStatesResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	if _, ok := m.ctrl.Mirror(req.MirrorName); !ok {
		return nil, controller.UnknownMirror(req.MirrorName)
	}
	resp := admin.NewPtrWriteMirrorStatesResponse()
	creq := coordinator.WriteRequest{MirrorName: req.MirrorName}
	type ref struct{ t, p int }
	var refs []ref
	for _, t := range req.Topics {
		rt := admin.NewWriteMirrorStatesResponseTopic()
		rt.TopicName = t.TopicName
		id, ok := m.topicID(req.MirrorName, t.TopicName)
		for _, p := range t.Partitions {
			rp := admin.NewWriteMirrorStatesResponseTopicPartition()
			rp.PartitionIndex, rp.StateEpoch = p.PartitionIndex, -1
			if !ok {
				rp.ErrorCode = int16(admin.CodeUnknownTopicOrPartition)
			} else {
				creq.Partitions = append(creq.Partitions, coordinator.WritePartition{
					TopicID: id, Partition: p.PartitionIndex, State: statemachine.State(p.State),
					LeaderEpoch: p.LeaderEpoch, StateEpoch: p.StateEpoch, LastMirrorEpoch: p.LastMirrorEpoch,
					LastMirrorOffset: p.LastMirrorOffset, ErrorMessage: p.ErrorMessage, RetryAttempt: wireRetryAttempt(p.RetryAttempt, p.NonRetryable),
				})
				refs = append(refs, ref{len(resp.Topics), len(rt.Partitions)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(creq.Partitions) > 0 {
		cresp, err := m.coord.WriteMirrorStates(ctx, creq)
		if err != nil {
			return nil, err
		}
		for i, r := range cresp.Partitions {
			rp := &resp.Topics[refs[i].t].Partitions[refs[i].p]
			rp.ErrorCode, rp.StateEpoch = int16(r.ErrorCode), r.StateEpoch
			if r.ErrorCode != admin.CodeNone && r.ErrorMessage != "" {
				msg := r.ErrorMessage
				rp.ErrorMessage = &msg
			}
		}
	}
	// A successful write may change what the reconcilers must do.
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if r := m.reconcilerOf(t.TopicName, p.PartitionIndex); r != nil && r.Mirror() == req.MirrorName {
				r.Invalidate()
			}
		}
	}
	return resp, nil
}

// ReadMirrorOffsets reports, per partition this instance leads, the source high
// watermark of the last fetch (-1 when not mirroring) and the destination log end
// offset (spec §11.10).
func (m *Mirror) ReadMirrorOffsets(ctx context.Context, req *admin.ReadMirrorOffsetsRequest) (*admin.ReadMirrorOffsetsResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	if _, ok := m.ctrl.Mirror(req.MirrorName); !ok {
		return nil, controller.UnknownMirror(req.MirrorName)
	}
	resp := admin.NewPtrReadMirrorOffsetsResponse()
	for _, t := range req.Topics {
		rt := admin.NewReadMirrorOffsetsResponseTopic()
		rt.TopicName = t.TopicName
		for _, p := range t.Partitions {
			rp := admin.NewReadMirrorOffsetsResponseTopicPartition()
			rp.PartitionIndex, rp.SourceOffset, rp.DestinationOffset = p, -1, -1
			r := m.reconcilerOf(t.TopicName, p)
			if r == nil || r.Mirror() != req.MirrorName {
				rp.ErrorCode = int16(admin.CodeUnknownTopicOrPartition)
			} else {
				rp.SourceOffset, rp.DestinationOffset = r.Offsets()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, ctx.Err()
}

// BumpLeaderEpochs raises the leader epoch of destination partitions above
// MinLeaderEpoch (spec §7.6): the new epoch is max(current+1, MinLeaderEpoch+1). In a
// single process the destination log holds the leader epoch, so this instance acts as
// the controller. The response carries the new epoch per partition.
func (m *Mirror) BumpLeaderEpochs(ctx context.Context, req *admin.BumpLeaderEpochsRequest) (*admin.BumpLeaderEpochsResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	resp := admin.NewPtrBumpLeaderEpochsResponse()
	for _, t := range req.Topics {
		rt := admin.NewBumpLeaderEpochsResponseTopic()
		rt.TopicName = t.TopicName
		for _, p := range t.Partitions {
			rp := admin.NewBumpLeaderEpochsResponseTopicPartition()
			rp.PartitionIndex, rp.LeaderEpoch = p.PartitionIndex, epoch.UndefinedEpoch
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var err error
			if spec, ok := m.dest.Topic(t.TopicName); !ok || p.PartitionIndex < 0 || p.PartitionIndex >= spec.Partitions {
				err = admin.Errorf(admin.CodeUnknownTopicOrPartition, "unknown partition %s-%d", t.TopicName, p.PartitionIndex)
			} else if log, lerr := m.dest.Log(t.TopicName, p.PartitionIndex); lerr != nil {
				err = lerr
			} else {
				rp.LeaderEpoch, err = log.BumpLeaderEpoch(p.MinLeaderEpoch)
			}
			if err != nil {
				rp.ErrorCode = int16(admin.CodeOf(err))
				msg := err.Error()
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// topicID returns the topic id of topic when it is a topic of mirror.
func (m *Mirror) topicID(mirror, topic string) (records.UUID, bool) {
	ts, ok := m.ctrl.Topic(topic)
	if !ok || ts.Mirror != mirror {
		return records.UUID{}, false
	}
	return ts.TopicID, true
}

// wireRetryAttempt converts the RetryAttempt and NonRetryable of a WriteMirrorStates
// partition to the stored RetryAttempt (-1 = non-retryable, clamped to int16).
func wireRetryAttempt(attempt int32, nonRetryable bool) int16 {
	if nonRetryable {
		return records.NonRetryable
	}
	return int16(min(max(attempt, 0), 32767))
}
