package dataplane

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// fetch serves Fetch: it reads every partition with a leader's rules and, if
// nothing forces an immediate answer and fewer than MinBytes are ready,
// long-polls until an append, MaxWait or the server's close.
func (dp *DataPlane) fetch(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return dp.fetchWith(ctx, req.(*kmsg.FetchRequest), fetchBuffers(ctx))
}

// fetchWith is fetch with its reads going into buffers of rb (nil: fresh
// memory).
func (dp *DataPlane) fetchWith(ctx context.Context, r *kmsg.FetchRequest, rb *readBuffers) (kmsg.Response, error) {
	if r.Version >= 4 && r.IsolationLevel != fetcher.ReadUncommitted && r.IsolationLevel != fetcher.ReadCommitted {
		return nil, fmt.Errorf("dataplane: fetch isolation level %d", r.IsolationLevel)
	}
	askSession := false
	var inc *incremental
	if r.Version >= 7 {
		switch r.SessionEpoch {
		case sessionFinal, sessionInitial:
			if r.SessionID != 0 {
				dp.sessions.remove(r.SessionID) // closed by a full fetch
			}
			askSession = r.SessionEpoch == sessionInitial
		default:
			var code int16
			if inc, code = dp.sessions.begin(ctx, r); code != 0 {
				resp := r.ResponseKind().(*kmsg.FetchResponse)
				resp.ErrorCode = code
				return resp, nil
			}
			if inc != nil {
				defer inc.done()
			}
		}
	}
	// read reads what the fetch needs now: every partition of r, or those
	// of the session that may answer something new.
	read := func() (*kmsg.FetchResponse, int, bool, *logWatch) {
		if inc == nil {
			seen := newLogWatch()
			resp, ready, immediate := dp.readFetch(ctx, r, r.Topics, nil, rb, seen)
			return resp, ready, immediate, seen
		}
		seen := inc.plan(ctx, dp, r)
		resp, ready, immediate := dp.readFetch(ctx, r, inc.topics, inc.denied, rb, seen)
		return resp, ready, immediate, seen
	}
	finish := func(resp *kmsg.FetchResponse, seen *logWatch) (kmsg.Response, error) {
		switch {
		case inc != nil:
			inc.filter(r.Version, resp, seen)
			resp.SessionID = inc.s.id
		case askSession:
			resp.SessionID = dp.sessions.create(r, fetchReplica(r) >= 0, resp)
		}
		return resp, nil
	}
	wait := min(time.Duration(max(r.MaxWaitMillis, 0))*time.Millisecond, dp.cfg.MaxWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var poll *time.Ticker
	for {
		woken := dp.waitChan() // before reading, so an append during the read wakes us
		resp, ready, immediate, seen := read()
		if immediate || ready >= int(r.MinBytes) || wait <= 0 {
			return finish(resp, seen)
		}
		if poll == nil {
			poll = time.NewTicker(dp.cfg.PollInterval)
			defer poll.Stop()
		}
		// Wait for a change to a log read (each poll compares the offsets
		// the read saw, far cheaper than reading again), an append through
		// Produce, MaxWait or the end of ctx.
		changed := false
		for !changed {
			select {
			case <-ctx.Done():
				return finish(resp, seen)
			case <-deadline.C:
				if !seen.changed() {
					return finish(resp, seen)
				}
				rb.recycle() // resp is replaced, never sent
				resp, _, _, seen = read()
				return finish(resp, seen)
			case <-woken:
				changed = true
			case <-poll.C:
				changed = seen.changed()
			}
		}
		rb.recycle() // the next read replaces resp, never sent
	}
}

// fetchReplica is the replica id of a Fetch (-1 for a consumer).
func fetchReplica(r *kmsg.FetchRequest) int32 {
	if r.Version >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// logWatch holds what a read saw of each log it read, to tell whether
// reading again could answer differently.
type logWatch struct {
	// gen is fetcher.LogChanges before the read; tracked is set while every
	// log read moves it (fetcher.TracksChanges).
	gen     uint64
	tracked bool
	logs    []watchedLog
	// sess, when set, adds the partitions of the session marked skip, with
	// what the session saw of them.
	sess *fetchSession
	// at[i][j] is the index in logs of what readFetch saw of partition j of
	// its topic i, -1 for a partition not read (an error before the read).
	at [][]int
}

func newLogWatch() *logWatch {
	return &logWatch{gen: fetcher.LogChanges(), tracked: true}
}

// add records a log read.
func (lw *logWatch) add(w watchedLog) {
	lw.tracked = lw.tracked && fetcher.TracksChanges(w.log)
	lw.logs = append(lw.logs, w)
}

// watchedLog is one log's offsets and epochs as a read saw them.
type watchedLog struct {
	log                    fetcher.Log
	hw, lso, start, end    int64
	leaderEpoch, lastEpoch int32
}

func watchLog(l fetcher.Log) watchedLog {
	// The leader epoch and the end first: a change meanwhile shows in them.
	w := watchedLog{log: l, leaderEpoch: l.LeaderEpoch(), end: l.LogEndOffset()}
	w.hw, w.lso, w.start, w.lastEpoch = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset(), l.LatestEpoch()
	return w
}

// changed reports whether a log watched moved since it was read.
func (lw *logWatch) changed() bool {
	if lw.tracked && fetcher.LogChanges() == lw.gen {
		return false // no log of this process changed at all
	}
	for _, w := range lw.logs {
		if watchLog(w.log) != w {
			return true
		}
	}
	if lw.sess != nil {
		for i := range lw.sess.list {
			if sp := &lw.sess.list[i]; sp.skip && watchLog(sp.seen.log) != sp.seen {
				return true
			}
		}
	}
	return false
}

// fetchBudget tracks the response's byte limit: the first partition with
// data gets at least one batch (Kafka's minOneMessage), later ones only what
// fits.
type fetchBudget struct {
	left     int
	gotFirst bool
}

// readFetch reads every partition of topics (r's, or its session's) once,
// into buffers of rb (nil: fresh memory); a topic denied[i] is answered
// TOPIC_AUTHORIZATION_FAILED unread. ready is the number of record bytes in the response;
// immediate is set when a partition carries an error or a diverging epoch
// (answered without waiting, as Kafka does).
//
// Each log read is added to seen (when not nil), with what the read saw.
func (dp *DataPlane) readFetch(ctx context.Context, r *kmsg.FetchRequest, topics []kmsg.FetchRequestTopic, denied []bool, rb *readBuffers, seen *logWatch) (resp *kmsg.FetchResponse, ready int, immediate bool) {
	resp = r.ResponseKind().(*kmsg.FetchResponse)
	total := dp.cfg.FetchMaxBytes
	if r.Version >= 3 {
		total = clampBytes(r.MaxBytes, dp.cfg.FetchMaxBytes)
	}
	budget := &fetchBudget{left: total}
	iso := fetcher.ReadUncommitted
	if r.Version >= 4 {
		iso = r.IsolationLevel
	}
	for i, rt := range topics {
		var at []int
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		spec, ok, missing := dp.fetchTopic(r.Version, rt)
		if ok {
			t.Topic = spec.Name
		}
		if i < len(denied) && denied[i] {
			ok, missing = false, codeTopicAuthorizationFailed
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			code := missing
			var part partition
			if ok {
				part, code = dp.resolve(spec, rp.Partition)
			}
			before := 0
			if seen != nil {
				before = len(seen.logs)
			}
			if code != fetcher.CodeNone {
				p.ErrorCode, immediate = code, true
			} else if dp.readPartition(ctx, r.Version, iso, part, rp, &p, budget, rb, seen) {
				immediate = true
			}
			if seen != nil {
				k := -1
				if len(seen.logs) > before {
					k = before
				}
				at = append(at, k)
			}
			ready += len(p.RecordBatches)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
		if seen != nil {
			seen.at = append(seen.at, at)
		}
	}
	return resp, ready, immediate
}

// fetchTopic finds a request topic by id (v13+) or name; missing is the
// code for every partition of a topic not found.
func (dp *DataPlane) fetchTopic(version int16, rt kmsg.FetchRequestTopic) (spec mirror.TopicSpec, ok bool, missing int16) {
	if version >= 13 {
		spec, ok = dp.topicByID(rt.TopicID)
		return spec, ok, fetcher.CodeUnknownTopicID
	}
	spec, ok = dp.dst.Topic(rt.Topic)
	return spec, ok, fetcher.CodeUnknownTopicOrPartition
}

// clampBytes bounds a requested byte limit to [0, limit].
func clampBytes(asked int32, limit int) int {
	return min(max(int(asked), 0), limit)
}

// readPartition fills p from one partition; it reports whether the answer
// must go out at once (an error or a diverging epoch).
func (dp *DataPlane) readPartition(ctx context.Context, version int16, iso int8, part partition, rp kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition, budget *fetchBudget, rb *readBuffers, seen *logWatch) bool {
	fp := requestPartition(version, rp)
	fp.Topic, fp.TopicID, fp.Partition = part.topic, part.topicID, part.index
	w := watchLog(part.log)
	if seen != nil {
		seen.add(w)
	}
	if caughtUp(w, fp) {
		// Nothing to read and nothing to check: a follower at the high
		// watermark, in the leader's epoch, with the log's latest epoch.
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = w.hw, w.lso, w.start
		return false
	}
	partMax := clampBytes(rp.PartitionMaxBytes, dp.cfg.FetchMaxBytes)
	fp.MaxBytes = int32(min(partMax, max(budget.left, 1)))
	res, err := localSource(iso, part.pooled(rb, !budget.gotFirst)).Fetch(ctx, []fetcher.FetchPartition{fp})
	if err != nil || len(res) != 1 {
		p.ErrorCode = codeKafkaStorageError
		return true
	}
	fr := res[0]
	p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = fr.ErrorCode, fr.HighWatermark, fr.LastStableOffset, fr.LogStartOffset
	if fr.ErrorCode != fetcher.CodeNone {
		return true
	}
	if fr.DivergingEpoch != nil {
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = fr.DivergingEpoch.Epoch, fr.DivergingEpoch.EndOffset
		return true
	}
	recs := fr.Records
	if partMax == 0 || (budget.gotFirst && len(recs) > budget.left) {
		recs = nil
	}
	if len(recs) == 0 {
		return false
	}
	budget.gotFirst = true
	budget.left -= len(recs)
	p.RecordBatches = recs
	if iso == fetcher.ReadCommitted {
		aborted, err := abortedTxns(part.log, recs)
		if err != nil {
			p.RecordBatches, p.ErrorCode = nil, codeKafkaStorageError
			return true
		}
		p.AbortedTransactions = aborted
	}
	return false
}

// requestPartition is what a request partition asks for at version: its
// offset and the epochs the version carries (-1 for those it does not).
func requestPartition(version int16, rp kmsg.FetchRequestTopicPartition) fetcher.FetchPartition {
	fp := fetcher.FetchPartition{Partition: rp.Partition, FetchOffset: rp.FetchOffset, LastFetchedEpoch: -1, CurrentLeaderEpoch: -1}
	if version >= 9 {
		fp.CurrentLeaderEpoch = rp.CurrentLeaderEpoch
	}
	if version >= 12 {
		fp.LastFetchedEpoch = rp.LastFetchedEpoch
	}
	return fp
}

// caughtUp reports whether fp, read from the log w saw, answers no records
// and no error by a leader's rules: it fetches at the high watermark (the
// bound of both isolation levels, LSO <= HW), its CurrentLeaderEpoch is the
// log's or not given, and its LastFetchedEpoch is the log's latest epoch or
// not given (no divergence is possible at or below the end of the latest
// epoch).
func caughtUp(w watchedLog, fp fetcher.FetchPartition) bool {
	return fp.FetchOffset == w.hw && w.hw <= w.end && w.start <= w.hw &&
		(fp.CurrentLeaderEpoch < 0 || fp.CurrentLeaderEpoch == w.leaderEpoch) &&
		(fp.LastFetchedEpoch < 0 || fp.LastFetchedEpoch == w.lastEpoch)
}

// abortedTxns lists the aborted transactions a read_committed consumer needs
// to drop the aborted batches of recs: every producer with a transactional
// batch in recs whose transaction ends with an ABORT marker (in recs or
// later in the log), with the offset of its first batch in recs. Kafka keeps
// a transaction index for this; here the markers are found by a header scan
// that stops once every open transaction of recs is resolved (recs ends
// below the LSO, so each has its marker in the log).
func abortedTxns(log fetcher.Log, recs []byte) ([]kmsg.FetchResponseTopicPartitionAbortedTransaction, error) {
	pending := map[int64]int64{} // producer -> first offset in recs of its open transaction
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	visit := func(b records.Batch, inRecs bool) {
		a := b.Attributes()
		if !a.IsTransactional() || b.ProducerID() < 0 {
			return
		}
		pid := b.ProducerID()
		if !a.IsControl() {
			if _, open := pending[pid]; !open && inRecs {
				pending[pid] = b.BaseOffset()
			}
			return
		}
		first, open := pending[pid]
		if !open {
			return
		}
		if ct, err := b.ControlType(); err == nil && (ct == records.ControlAbort || ct == records.ControlCommit) {
			if ct == records.ControlAbort {
				out = append(out, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: pid, FirstOffset: first})
			}
			delete(pending, pid)
		}
	}
	it := records.NewIterator(recs)
	end := int64(-1)
	for it.Next() {
		visit(it.Batch(), true)
		end = it.Batch().NextOffset()
	}
	if len(pending) > 0 && end >= 0 {
		err := scanBatches(log, end, func(b records.Batch) bool {
			visit(b, false)
			return len(pending) > 0
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out, nil
}
