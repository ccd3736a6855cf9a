package adminhandler

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirror"
)

// The plan of the lifecycle RPCs (version 1: ValidateOnly, and the Partitions of each
// response topic) has one shape in every response; the generated types differ only by
// name. These are that shape, so that one conversion serves them all.
type (
	planTxn = struct {
		ProducerId    int64
		ProducerEpoch int16
		FirstOffset   int64
		UnknownTags   kmsg.Tags
	}
	planPartition[TX any] = struct {
		PartitionIndex       int32
		StateNow             int8
		StateAfter           int8
		LastMirrorEpoch      int32
		LmeClusterId         *string
		LmeMirrorName        *string
		LogStartOffset       int64
		LogEndOffset         int64
		TruncationOffset     int64
		FullTruncation       bool
		DivergenceOffset     int64
		RemovedFromOffset    int64
		RemovedToOffset      int64
		RemovedRecords       int64
		LocalFromOffset      int64
		LocalToOffset        int64
		LocalRecords         int64
		SourceLogStartOffset int64
		OpenTransactions     []TX
		UnknownTags          kmsg.Tags
	}
)

// wirePlan is plan in the wire form of one response's partitions.
func wirePlan[PP ~planPartition[TX], TX ~planTxn](plan []mirror.PartitionPlan) []PP {
	if plan == nil {
		return nil
	}
	out := make([]PP, 0, len(plan))
	for _, p := range plan {
		var txns []TX
		for _, t := range p.OpenTransactions {
			txns = append(txns, TX(planTxn{ProducerId: t.ProducerID, ProducerEpoch: t.ProducerEpoch, FirstOffset: t.FirstOffset}))
		}
		out = append(out, PP(planPartition[TX]{
			PartitionIndex: p.Partition, StateNow: int8(p.StateNow), StateAfter: int8(p.StateAfter),
			LastMirrorEpoch: p.LastMirrorEpoch, LmeClusterId: strPtr(p.LMECluster), LmeMirrorName: strPtr(p.LMEMirror),
			LogStartOffset: p.LogStart, LogEndOffset: p.LogEnd, TruncationOffset: p.TruncationOffset, FullTruncation: p.FullTruncation, DivergenceOffset: p.DivergenceOffset,
			RemovedFromOffset: p.Removed.From, RemovedToOffset: p.Removed.To, RemovedRecords: p.Removed.Records,
			LocalFromOffset: p.LocalWrites.From, LocalToOffset: p.LocalWrites.To, LocalRecords: p.LocalWrites.Records,
			SourceLogStartOffset: p.SourceLogStart, OpenTransactions: txns,
		}))
	}
	return out
}
