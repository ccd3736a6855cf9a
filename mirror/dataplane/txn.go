package dataplane

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/mirror"
)

// Transaction coordinator defaults of Config.
const (
	// DefaultMaxTransactionTimeout is Kafka's transaction.max.timeout.ms
	// default: InitProducerId with a longer timeout is refused.
	DefaultMaxTransactionTimeout = 15 * time.Minute
	// DefaultTransactionCheckInterval is how often the site looks for
	// expired transactions and unfinished completions (Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms).
	DefaultTransactionCheckInterval = 10 * time.Second
	// DefaultOrphanTransactionTimeout is how long a transaction left open in
	// a writable log with no coordinator state (the site restarted while it
	// was open) stays open before the site aborts it: the Java producer's
	// default transaction.timeout.ms.
	DefaultOrphanTransactionTimeout = time.Minute
)

// txnState is a transactional id's state (Kafka's TransactionState; Dead
// and PrepareEpochFence are not needed: entries are never expired and a
// fence completes within one call).
type txnState int8

const (
	txnEmpty txnState = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

// String returns Kafka's name of the state (DescribeTransactions).
func (s txnState) String() string {
	return [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}[s]
}

// txnEntry is the coordinator state of one transactional id.
//
// Locks: op serializes the id's coordinator operations (InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the timeout abort) for their
// whole duration, including the markers they write; mu guards the fields
// and is held by a transactional Produce across its check and append. The
// order is op, then a partition's producer-state mutex, then mu.
type txnEntry struct {
	id string
	op sync.Mutex

	mu      sync.Mutex
	pid     int64
	epoch   int16
	state   txnState
	timeout time.Duration
	started time.Time // when the current transaction became Ongoing
	// parts are the partitions added to the transaction; data the subset
	// this site appended a batch of the transaction to (the ones that get a
	// marker), each with the log end before that first append: the marker
	// closes only a transaction of the producer that starts at or after it.
	parts map[mirror.TopicPartition]bool
	data  map[mirror.TopicPartition]int64
	// groups are the groups added with AddOffsetsToTxn; offsets the
	// offsets TxnOffsetCommit staged for them, committed with the
	// transaction.
	groups  map[string]bool
	offsets map[string]map[mirror.TopicPartition]int64
	// markerEpoch is the epoch the pending markers of a Prepare state are
	// written with (the producer's, or the bumped one of a fence);
	// markerPID the producer id they belong to.
	markerEpoch int16
	markerPID   int64
	// skipped counts the partitions of the transaction being completed that
	// got no marker because they became mirror partitions; partialCommit
	// says the last transaction committed with such a partition, so a retry
	// of its EndTxn is answered as the first one was.
	skipped       int
	partialCommit bool
	// prevPID and prevEpoch are the producer id and epoch before the last
	// bump, so a retried InitProducerId whose answer was lost is recognised.
	prevPID   int64
	prevEpoch int16
}

// resetTxn forgets the finished transaction's partitions and offsets.
func (e *txnEntry) resetTxn() {
	e.parts = map[mirror.TopicPartition]bool{}
	e.data = map[mirror.TopicPartition]int64{}
	e.groups = map[string]bool{}
	e.offsets = map[string]map[mirror.TopicPartition]int64{}
	e.skipped, e.partialCommit = 0, false
}

// begin moves an idle entry to Ongoing (the first partition or group of a
// transaction); an Ongoing entry is unchanged.
func (e *txnEntry) begin(now time.Time) {
	if e.state != txnOngoing {
		e.resetTxn()
		e.state, e.started = txnOngoing, now
	}
}

// idle reports whether no transaction is open or finishing.
func (e *txnEntry) idle() bool {
	return e.state == txnEmpty || e.state == txnCompleteCommit || e.state == txnCompleteAbort
}

// accepted records that this site appended a batch of e's transaction to tp
// when the log end moved from before to after (a refused or failed append
// that wrote nothing does not count). Called with e.mu held.
func (e *txnEntry) accepted(tp mirror.TopicPartition, before, after int64) {
	if _, ok := e.data[tp]; !ok && after > before {
		e.data[tp] = before
	}
}

// epochExhausted reports whether the epoch can no longer be bumped (Kafka
// rotates the producer id then).
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// coordinator holds every transactional id's state, in memory.
type coordinator struct {
	mu      sync.Mutex
	entries map[string]*txnEntry
}

func newCoordinator() *coordinator {
	return &coordinator{entries: map[string]*txnEntry{}}
}

// get returns the entry of id, or nil.
func (c *coordinator) get(id string) *txnEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[id]
}

// getOrCreate returns the entry of id, creating an Empty one without a
// producer id.
func (c *coordinator) getOrCreate(id string) *txnEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		e = &txnEntry{id: id, pid: -1, epoch: -1, prevPID: -1, prevEpoch: -1}
		e.resetTxn()
		c.entries[id] = e
	}
	return e
}

// all returns every entry, ordered by transactional id.
func (c *coordinator) all() []*txnEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*txnEntry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// owns reports whether some entry's transaction in progress appended data
// of producer pid to tp (so an open transaction there is not an orphan).
func (c *coordinator) owns(tp mirror.TopicPartition, pid int64) bool {
	for _, e := range c.all() {
		e.mu.Lock()
		_, wrote := e.data[tp]
		owned := !e.idle() && wrote && (e.pid == pid || e.markerPID == pid)
		e.mu.Unlock()
		if owned {
			return true
		}
	}
	return false
}
