package dataplane

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
)

// txnOffsetCommit serves TxnOffsetCommit (v0-v4, topics by name): the
// offsets are staged in the transaction of a group added with
// AddOffsetsToTxn and reach mirror.GroupOffsets only when the transaction
// commits (dropped on abort). From v3 a member's commit is validated as
// OffsetCommit's by the protocol owning the group (groupRegistry); a
// simple commit (generation -1, no member id) is accepted. A partition of a
// mirror topic that is not STOPPED is READ_ONLY_TOPIC (its group offsets are
// the source's, synced by the mirror) and the other partitions
// OPERATION_NOT_ATTEMPTED: nothing is staged.
func (dp *DataPlane) txnOffsetCommit(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := fetcher.CodeNone
	switch {
	case dp.groups() == nil:
		code = int16(admin.CodeCoordinatorNotAvailable)
	case r.Group == "":
		code = codeInvalidGroupID
	case r.Version >= 3:
		code = dp.groupReg.validateCommit(r.Group, memberCommit{MemberID: r.MemberID, InstanceID: r.InstanceID, Generation: r.Generation, Transactional: true})
	}
	staged := map[mirror.TopicPartition]int64{}
	refused := map[mirror.TopicPartition]int16{}
	for _, rt := range r.Topics {
		spec, ok := dp.dst.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			tp := mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			switch pc := dp.txnPartitionCode(spec, ok, tp); {
			case code != fetcher.CodeNone:
			case pc == int16(admin.CodeReadOnlyTopic):
				refused[tp] = pc
			case pc != fetcher.CodeNone:
				code = pc
			}
			staged[tp] = rp.Offset
		}
	}
	if code == fetcher.CodeNone && len(refused) == 0 {
		code = dp.stageOffsets(r, staged)
	}
	for _, rt := range r.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			if code == fetcher.CodeNone && len(refused) > 0 {
				p.ErrorCode = codeOperationNotAttempted
				if rc, ok := refused[mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok {
					p.ErrorCode = rc
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// staleIsInvalidEpoch, as lockTxn's fencedSince, answers every stale epoch
// INVALID_PRODUCER_EPOCH.
const staleIsInvalidEpoch = math.MaxInt16

// stageOffsets adds offsets to the transaction of r: the producer must be
// the id's current one (INVALID_PRODUCER_EPOCH otherwise, as the group
// coordinator answers a stale producer) and the group added to the Ongoing
// transaction (INVALID_TXN_STATE otherwise). The request is all or nothing.
func (dp *DataPlane) stageOffsets(r *kmsg.TxnOffsetCommitRequest, offsets map[mirror.TopicPartition]int64) int16 {
	e, code := dp.lockTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Version, staleIsInvalidEpoch)
	if code != fetcher.CodeNone {
		return code
	}
	defer e.op.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != txnOngoing || !e.groups[r.Group] {
		return codeInvalidTxnState
	}
	g := e.offsets[r.Group]
	if g == nil {
		g = map[mirror.TopicPartition]int64{}
		e.offsets[r.Group] = g
	}
	for tp, o := range offsets {
		g[tp] = o
	}
	return fetcher.CodeNone
}
