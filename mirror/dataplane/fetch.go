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
	topics, askSession := r.Topics, false
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
				topics = inc.topics
			}
		}
	}
	denied := dp.sessionDenied(ctx, r, inc)
	finish := func(resp *kmsg.FetchResponse) (kmsg.Response, error) {
		switch {
		case inc != nil:
			inc.filter(resp)
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
		resp, ready, immediate := dp.readFetch(ctx, r, topics, denied, rb)
		if immediate || ready >= int(r.MinBytes) || wait <= 0 {
			return finish(resp)
		}
		if poll == nil {
			poll = time.NewTicker(dp.cfg.PollInterval)
			defer poll.Stop()
		}
		select {
		case <-ctx.Done():
			return finish(resp)
		case <-deadline.C:
			rb.recycle() // resp is replaced, never sent
			resp, _, _ = dp.readFetch(ctx, r, topics, denied, rb)
			return finish(resp)
		case <-woken:
		case <-poll.C:
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
func (dp *DataPlane) readFetch(ctx context.Context, r *kmsg.FetchRequest, topics []kmsg.FetchRequestTopic, denied []bool, rb *readBuffers) (resp *kmsg.FetchResponse, ready int, immediate bool) {
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
			if code != fetcher.CodeNone {
				p.ErrorCode, immediate = code, true
			} else if dp.readPartition(ctx, r.Version, iso, part, rp, &p, budget, rb) {
				immediate = true
			}
			ready += len(p.RecordBatches)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
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
func (dp *DataPlane) readPartition(ctx context.Context, version int16, iso int8, part partition, rp kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition, budget *fetchBudget, rb *readBuffers) bool {
	fp := fetcher.FetchPartition{Topic: part.topic, TopicID: part.topicID, Partition: part.index,
		FetchOffset: rp.FetchOffset, LastFetchedEpoch: -1, CurrentLeaderEpoch: -1}
	if version >= 9 {
		fp.CurrentLeaderEpoch = rp.CurrentLeaderEpoch
	}
	if version >= 12 {
		fp.LastFetchedEpoch = rp.LastFetchedEpoch
	}
	partMax := clampBytes(rp.PartitionMaxBytes, dp.cfg.FetchMaxBytes)
	fp.MaxBytes = int32(min(partMax, max(budget.left, 1)))
	res, err := localSource(iso, part.pooled(rb, int(fp.MaxBytes))).Fetch(ctx, []fetcher.FetchPartition{fp})
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
