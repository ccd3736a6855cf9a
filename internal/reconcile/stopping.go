package reconcile

import (
	"fmt"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// stopProgress is how far an interrupted STOPPING of this partition got (a crash, a
// restart or a leader change between its steps), read from the stored LME and the log
// itself, so that the re-run writes no second LME, marker or barrier (spec §8.1: every
// step is idempotent). A STOPPING entered from MIRRORING, PAUSED and the other live
// states starts from nothing; only a resumed one (the state read back is STOPPING, or the
// stop failed and is retried from FAILED) looks for progress.
//
// The steps leave a trace that tells them apart: PersistLME stores the LME with the log
// end offset at that moment (LastMirrorOffset); the bump raises the leader epoch above
// the LME, durably; every batch the stop appends after that (ABORT markers, the barrier)
// is a control batch written as leader at exactly the current leader epoch. A log whose
// batches from LastMirrorOffset on are all such control batches was stopped this far by
// this very STOPPING; any other batch after it (mirrored data, a mirrored barrier of
// another site at its own epoch, a client write) means the stored LME belongs to an
// earlier stop, and every step runs again.
type stopProgress struct {
	lmePersisted bool // the stored LME is this stop's: do not persist it again
	bumped       bool // a batch was written at the bumped epoch: do not bump again
	barrier      bool // the last batch is this stop's MIRROR_PID_RESET
}

// readStopProgress computes the stopProgress of the current log against the stored LME
// (r.lme, r.lmo, as last read or written).
func (r *Partition) readStopProgress() (stopProgress, error) {
	end := r.log.LogEndOffset()
	if r.lme < 0 || r.lmo < 0 || r.lmo > end || r.log.LeaderEpoch() <= r.lme {
		return stopProgress{}, nil
	}
	var p stopProgress
	for off := r.lmo; off < end; {
		buf, err := r.log.Read(off, 1<<20)
		if err != nil {
			return stopProgress{}, fmt.Errorf("read the log after the last mirror offset %d: %w", r.lmo, err)
		}
		if len(buf) == 0 {
			break
		}
		it := records.NewIterator(buf)
		for it.Next() {
			b := it.Batch()
			if !b.Attributes().IsControl() || b.PartitionLeaderEpoch() != r.log.LeaderEpoch() {
				return stopProgress{}, nil // written after an earlier stop
			}
			typ, err := b.ControlType()
			if err != nil {
				return stopProgress{}, fmt.Errorf("control batch at offset %d: %w", b.BaseOffset(), err)
			}
			p.bumped, p.barrier = true, typ == records.ControlMirrorPIDReset
			off = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			return stopProgress{}, fmt.Errorf("read the log after the last mirror offset %d: %w", r.lmo, err)
		}
	}
	p.lmePersisted = true
	return p, nil
}

// abortOpenTransactions is step 4 of spec §8.1: an ABORT marker for every transaction
// left open by the source, at the bumped leader epoch.
func (r *Partition) abortOpenTransactions() error {
	aborted, err := fetcher.AbortOpenTransactions(r.log, r.e.clock().UnixMilli())
	for _, t := range aborted {
		r.e.log.Info("mirror: open transaction aborted at stop", "mirror", r.mirror, "topic", r.topic,
			"partition", r.partition, "producerId", t.ProducerID, "producerEpoch", t.ProducerEpoch, "firstOffset", t.FirstOffset)
	}
	if err != nil {
		return err
	}
	if len(aborted) > 0 {
		return fetcher.SyncAppended(r.log)
	}
	return nil
}

// appendPIDReset is step 5 of spec §8.1: the MIRROR_PID_RESET barrier, once.
func (r *Partition) appendPIDReset() error {
	if r.stopProg.barrier {
		return nil
	}
	batch := records.BuildControlBatch(records.ControlBatchSpec{Type: records.ControlMirrorPIDReset,
		Timestamp: r.e.clock().UnixMilli()})
	if _, err := r.log.AppendAsLeader(batch); err != nil {
		return fmt.Errorf("append MIRROR_PID_RESET: %w", err)
	}
	// The barrier's batch durable, not the log's recovery point: that one
	// follows at the log's next periodic flush or its close (a failover of
	// 100,000 partitions otherwise replaces 100,000 recovery-point files).
	return fetcher.SyncAppended(r.log)
}
