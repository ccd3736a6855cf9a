package dataplane

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// codeTransactionalIDNotFound is Kafka's TRANSACTIONAL_ID_NOT_FOUND.
const codeTransactionalIDNotFound int16 = 105

// txnStateByName maps Kafka's state names to states (ListTransactions
// filters).
var txnStateByName = map[string]txnState{
	"Empty": txnEmpty, "Ongoing": txnOngoing, "PrepareCommit": txnPrepareCommit,
	"PrepareAbort": txnPrepareAbort, "CompleteCommit": txnCompleteCommit, "CompleteAbort": txnCompleteAbort,
}

// listTransactions serves ListTransactions v0-v1: every transactional id,
// filtered by state, producer id and (v1) how long the open transaction has
// run.
func (dp *DataPlane) listTransactions(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[txnState]bool{}
	for _, name := range r.StateFilters {
		st, ok := txnStateByName[name]
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states[st] = true
	}
	if len(r.StateFilters) > 0 && len(states) == 0 {
		return resp, nil // only unknown states: nothing matches
	}
	pids := map[int64]bool{}
	for _, p := range r.ProducerIDFilters {
		pids[p] = true
	}
	now := time.Now()
	for _, e := range dp.coord.all() {
		e.mu.Lock()
		st, pid, started := e.state, e.pid, e.started
		e.mu.Unlock()
		switch {
		case len(states) > 0 && !states[st],
			len(pids) > 0 && !pids[pid],
			r.Version >= 1 && r.DurationFilterMillis >= 0 && (st != txnOngoing || now.Sub(started).Milliseconds() < r.DurationFilterMillis):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = e.id, pid, st.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}

// describeTransactions serves DescribeTransactions: each id's state,
// producer, timeout, start and partitions; TRANSACTIONAL_ID_NOT_FOUND for
// an id the coordinator does not know.
func (dp *DataPlane) describeTransactions(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r := req.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = id, -1, -1, -1
		e := dp.coord.get(id)
		if e == nil {
			ts.ErrorCode = codeTransactionalIDNotFound
			resp.TransactionStates = append(resp.TransactionStates, ts)
			continue
		}
		e.mu.Lock()
		ts.State, ts.ProducerID, ts.ProducerEpoch = e.state.String(), e.pid, e.epoch
		ts.TimeoutMillis = int32(e.timeout.Milliseconds())
		if e.state == txnOngoing {
			ts.StartTimestamp = e.started.UnixMilli()
		}
		byTopic := map[string][]int32{}
		for tp := range e.parts {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		e.mu.Unlock()
		ts.Topics = sortedTopics(byTopic)
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}

func sortedTopics(byTopic map[string][]int32) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
	var out []kmsg.DescribeTransactionsResponseTransactionStateTopic
	for topic, parts := range byTopic {
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		t.Topic, t.Partitions = topic, parts
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}
