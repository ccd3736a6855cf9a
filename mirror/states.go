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
	if err := m.checkRequest(ctx, req.MirrorName); err != nil {
		return nil, err
	}
	resp := admin.NewPtrReadMirrorStatesResponse()
	creq := coordinator.ReadRequest{MirrorName: req.MirrorName}
	slots := scatter(m, req.MirrorName, req.Topics, &resp.Topics, func(q admin.ReadMirrorStatesRequestTopic) (admin.ReadMirrorStatesResponseTopic, string, int) {
		return admin.ReadMirrorStatesResponseTopic{TopicName: q.TopicName}, q.TopicName, len(q.Partitions)
	}, func(t, p int, id records.UUID, known bool) bool {
		in := req.Topics[t].Partitions[p]
		rp := admin.NewReadMirrorStatesResponseTopicPartition()
		rp.PartitionIndex, rp.ErrorCode = in.PartitionIndex, unknownUnless(known)
		rp.State, rp.LeaderEpoch, rp.StateEpoch, rp.LastMirrorEpoch, rp.LastMirrorOffset = int8(statemachine.Unknown), -1, -1, -1, -1
		resp.Topics[t].Partitions = append(resp.Topics[t].Partitions, rp)
		if known {
			creq.Partitions = append(creq.Partitions, coordinator.ReadPartition{TopicID: id, Partition: in.PartitionIndex, LeaderEpoch: in.LeaderEpoch})
		}
		return known
	})
	err := m.readStates(ctx, creq, slots, func(s tpSlot, r coordinator.ReadPartitionResult) {
		rp := &resp.Topics[s.t].Partitions[s.p]
		rp.ErrorCode = int16(r.ErrorCode)
		if r.ErrorCode != admin.CodeNone {
			return
		}
		rp.State, rp.LeaderEpoch, rp.StateEpoch = int8(r.State), r.LeaderEpoch, r.StateEpoch
		rp.LastMirrorEpoch, rp.LastMirrorOffset, rp.ErrorMessage = r.LastMirrorEpoch, r.LastMirrorOffset, r.ErrorMessage
		rp.RetryAttempt, rp.PreviousState = r.RetryAttempt, int8(r.PreviousState)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// scatter walks the request topics in of an instance RPC in order: for each request
// topic q it appends the response topic of topic(q) (which also gives q's name and
// partition count) to *out, then calls part(t, p, id, known) for each of its partitions
// (t, p: their indexes; known: the topic is a topic of mirror, with topic id id), which
// builds the response partition and reports whether the coordinator is asked about it.
// It returns the slots of the asked partitions, in the order part asked them.
func scatter[Q, R any](m *Mirror, mirror string, in []Q, out *[]R, topic func(Q) (R, string, int),
	part func(t, p int, id records.UUID, known bool) bool) []tpSlot {
	var slots []tpSlot
	for t, q := range in {
		rt, name, n := topic(q)
		*out = append(*out, rt)
		id, known := m.topicID(mirror, name)
		for p := range n {
			if part(t, p, id, known) {
				slots = append(slots, tpSlot{t, p})
			}
		}
	}
	return slots
}

// tpSlot is where the coordinator's answer for one asked partition goes: topic index t
// and partition index p in the response (or description) being built.
type tpSlot struct{ t, p int }

// readStates asks the coordinator for the partitions of req (none: no call) and hands
// each answer to fill with its slot: slots[i] is the place of req.Partitions[i].
func (m *Mirror) readStates(ctx context.Context, req coordinator.ReadRequest, slots []tpSlot, fill func(tpSlot, coordinator.ReadPartitionResult)) error {
	if len(req.Partitions) == 0 {
		return nil
	}
	resp, err := m.coord.ReadMirrorStates(ctx, req)
	if err != nil {
		return err
	}
	for i, r := range resp.Partitions {
		fill(slots[i], r)
	}
	return nil
}

// unknownUnless is the error code of a request partition: none when its topic is a
// topic of the mirror, UNKNOWN_TOPIC_OR_PARTITION otherwise.
func unknownUnless(known bool) int16 {
	if known {
		return int16(admin.CodeNone)
	}
	return int16(admin.CodeUnknownTopicOrPartition)
}

// WriteMirrorStates writes actual partition states to this instance's coordinator with
// the fencing of spec §9.6 (per-partition FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
// INVALID_CLUSTER_MIRROR_STATES for an illegal move). State UNKNOWN only updates the LME.
func (m *Mirror) WriteMirrorStates(ctx context.Context, req *admin.WriteMirrorStatesRequest) (*admin.WriteMirrorStatesResponse, error) {
	if err := m.checkRequest(ctx, req.MirrorName); err != nil {
		return nil, err
	}
	resp := admin.NewPtrWriteMirrorStatesResponse()
	var parts []coordinator.WritePartition
	slots := scatter(m, req.MirrorName, req.Topics, &resp.Topics, func(q admin.WriteMirrorStatesRequestTopic) (admin.WriteMirrorStatesResponseTopic, string, int) {
		return admin.WriteMirrorStatesResponseTopic{TopicName: q.TopicName}, q.TopicName, len(q.Partitions)
	}, func(t, pi int, id records.UUID, known bool) bool {
		p := req.Topics[t].Partitions[pi]
		if known {
			parts = append(parts, coordinator.WritePartition{
				TopicID: id, Partition: p.PartitionIndex, State: statemachine.State(p.State),
				LeaderEpoch: p.LeaderEpoch, StateEpoch: p.StateEpoch, LastMirrorEpoch: p.LastMirrorEpoch,
				LastMirrorOffset: p.LastMirrorOffset, ErrorMessage: p.ErrorMessage, RetryAttempt: wireRetryAttempt(p.RetryAttempt, p.NonRetryable),
			})
		}
		rp := admin.NewWriteMirrorStatesResponseTopicPartition()
		rp.PartitionIndex, rp.StateEpoch, rp.ErrorCode = p.PartitionIndex, -1, unknownUnless(known)
		resp.Topics[t].Partitions = append(resp.Topics[t].Partitions, rp)
		return known
	})
	if len(parts) > 0 {
		cresp, err := m.coord.WriteMirrorStates(ctx, coordinator.WriteRequest{MirrorName: req.MirrorName, Partitions: parts})
		if err != nil {
			return nil, err
		}
		for i, r := range cresp.Partitions {
			rp := &resp.Topics[slots[i].t].Partitions[slots[i].p]
			rp.ErrorCode, rp.StateEpoch = int16(r.ErrorCode), r.StateEpoch
			if r.ErrorCode != admin.CodeNone && r.ErrorMessage != "" {
				msg := r.ErrorMessage
				rp.ErrorMessage = &msg
			}
		}
	}
	m.invalidateWritten(req)
	return resp, nil
}

// invalidateWritten wakes the reconcilers of the partitions of a WriteMirrorStates: a
// successful write may change what they must do.
func (m *Mirror) invalidateWritten(req *admin.WriteMirrorStatesRequest) {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if r := m.reconcilerOf(t.TopicName, p.PartitionIndex); r != nil && r.Mirror() == req.MirrorName {
				r.Invalidate()
			}
		}
	}
}

// checkRequest is the prologue of a request naming mirror name: ctx not done, the
// Mirror not closed (ErrClosed), the mirror defined (UNKNOWN_CLUSTER_MIRROR).
func (m *Mirror) checkRequest(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.isClosed() {
		return ErrClosed
	}
	if _, ok := m.ctrl.Mirror(name); !ok {
		return controller.UnknownMirror(name)
	}
	return nil
}

// ReadMirrorOffsets reports, per partition this instance leads, the source high
// watermark of the last fetch (-1 when not mirroring) and the destination log end
// offset (spec §11.10).
func (m *Mirror) ReadMirrorOffsets(ctx context.Context, req *admin.ReadMirrorOffsetsRequest) (*admin.ReadMirrorOffsetsResponse, error) {
	if err := m.checkRequest(ctx, req.MirrorName); err != nil {
		return nil, err
	}
	resp := admin.NewPtrReadMirrorOffsetsResponse()
	// Answered by the reconcilers: the coordinator is not asked.
	scatter(m, req.MirrorName, req.Topics, &resp.Topics, func(q admin.ReadMirrorOffsetsRequestTopic) (admin.ReadMirrorOffsetsResponseTopic, string, int) {
		return admin.ReadMirrorOffsetsResponseTopic{TopicName: q.TopicName}, q.TopicName, len(q.Partitions)
	}, func(t, pi int, _ records.UUID, _ bool) bool {
		topic, p := req.Topics[t].TopicName, req.Topics[t].Partitions[pi]
		rp := admin.NewReadMirrorOffsetsResponseTopicPartition()
		rp.PartitionIndex, rp.SourceOffset, rp.DestinationOffset = p, -1, -1
		if r := m.reconcilerOf(topic, p); r == nil || r.Mirror() != req.MirrorName {
			rp.ErrorCode = int16(admin.CodeUnknownTopicOrPartition)
		} else {
			rp.SourceOffset, rp.DestinationOffset = r.Offsets()
		}
		resp.Topics[t].Partitions = append(resp.Topics[t].Partitions, rp)
		return false
	})
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
				msg := admin.MessageOf(err) // the code is named by ErrorCode
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
