package dataplane

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Incremental fetch sessions (KIP-227), served as Kafka's FetchManager does:
//
//   - SessionEpoch -1 is a sessionless full fetch (SessionID, when set, names
//     a session to close first); the answer has SessionID 0.
//   - SessionEpoch 0 is a full fetch asking for a session (closing the one
//     SessionID names, if any). After the read, a session holding the
//     request's partitions is created when the cache has room or can evict
//     one (Kafka's rules below), and the answer carries its id; otherwise
//     SessionID 0, and the client goes on with full fetches.
//   - SessionEpoch > 0 is an incremental fetch of session SessionID:
//     FETCH_SESSION_ID_NOT_FOUND when the cache does not hold it,
//     INVALID_FETCH_SESSION_EPOCH when the epoch is not the one expected (a
//     replayed or out-of-order request), FETCH_SESSION_TOPIC_ID_ERROR when the
//     request's version uses topic ids and the session's does not or the
//     reverse. Otherwise the named partitions are added or updated, the
//     ForgottenTopics removed (one never added is ignored, as Kafka does), the
//     epoch advances, and every partition of the session is read; the answer
//     names only those with records, an error, a diverging epoch, or a high
//     watermark, last stable offset or log start offset other than the last
//     answered. A session left empty is dropped (the answer has SessionID 0).
//
// What a client can make the server hold is bounded: at most
// Config.FetchSessionCacheSlots sessions, each of at most
// Config.FetchSessionMaxPartitions partitions, and at most
// Config.FetchSessionCachePartitions partitions in all; a full fetch needing
// more gets no session, and an incremental one that would grow a session past
// a bound drops the session and is answered without one (SessionID 0), as for
// a cache that is full. A session not used for FetchSessionEvictAfter may be evicted
// by any new one; otherwise a new session evicts the least valuable
// evictable one when it is worth more (Kafka's EvictableKey: a privileged
// session, a follower's, is worth more than any unprivileged one; then the
// larger is worth more). An unprivileged session is evictable by a privileged
// newcomer at any time and by any newcomer once older than
// FetchSessionEvictAfter; a privileged one only once that old. Two requests of one session never run at once: the second
// waits for the first (or for its own context).

// Defaults of the fetch session cache.
const (
	// DefaultFetchSessionCacheSlots is Kafka's
	// max.incremental.fetch.session.cache.slots.
	DefaultFetchSessionCacheSlots = 1000
	// DefaultFetchSessionMaxPartitions bounds one session.
	DefaultFetchSessionMaxPartitions = 50_000
	// DefaultFetchSessionCachePartitions bounds the partitions of all
	// sessions (a few hundred bytes each).
	DefaultFetchSessionCachePartitions = 500_000
	// FetchSessionEvictAfter is Kafka's eviction time of an unused session
	// (and the age before which a session is protected from being evicted
	// by a larger one).
	FetchSessionEvictAfter = 2 * time.Minute
)

// Kafka's session error codes.
const (
	codeInvalidFetchSessionEpoch int16 = 71
	codeFetchSessionTopicIDError int16 = 106
)

const (
	sessionFinal   int32 = -1
	sessionInitial int32 = 0
)

// fetchSessions is the session cache.
type fetchSessions struct {
	slots, maxParts, maxTotal int
	evictAfter                time.Duration
	now                       func() time.Time

	mu       sync.Mutex
	sessions map[int32]*fetchSession
	total    int // partitions of the sessions held
}

// fetchSession is one session: the partitions as the client last sent them
// and the offsets last answered for each.
type fetchSession struct {
	id         int32
	privileged bool
	topicIDs   bool // built by a v13+ request: partitions keyed by topic id
	created    time.Time
	busy       chan struct{} // one slot: held by the request using the session

	// guarded by fetchSessions.mu:
	epoch    int32 // the epoch the next request must carry
	lastUsed time.Time
	size     int // len(parts), as the cache sees it

	// guarded by busy:
	parts map[sessionKey]int // index in list
	list  []sessionPart
	// gen is fetcher.LogChanges before the last read; tracked is set when
	// every quiet partition's log moves it: LogChanges still at gen means
	// no quiet partition's log moved.
	gen     uint64
	tracked bool
}

// sessionKey names a session partition: by topic id in a topic-id session,
// else by name.
type sessionKey struct {
	topic     string
	id        records.UUID
	partition int32
}

type sessionPart struct {
	key sessionKey
	req kmsg.FetchRequestTopicPartition
	// the offsets last answered; hw -1 makes the next answer name it.
	hw, lso, logStart int64
	// quiet is set when the last read of the partition found the client
	// caught up (no records, no error: caughtUp) in the log seen, of the
	// topic whose id is topicID: while that log does not move and the
	// request does not change, reading it again would answer the same, so
	// it is not read (Kafka reads every partition of a session; a log
	// that did not move is the case it makes cheap).
	quiet   bool
	seen    watchedLog
	topicID records.UUID
	tracked bool // seen.log moves fetcher.LogChanges
	skip    bool // quiet and not read by the fetch being served
}

func newFetchSessions(slots, maxParts, maxTotal int) *fetchSessions {
	return &fetchSessions{slots: slots, maxParts: maxParts, maxTotal: maxTotal, evictAfter: FetchSessionEvictAfter, now: time.Now, sessions: make(map[int32]*fetchSession)}
}

// size is the number of sessions held.
func (c *fetchSessions) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// remove drops session id, if held.
func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		c.dropLocked(s)
	}
}

// dropLocked removes s, if the cache holds it.
func (c *fetchSessions) dropLocked(s *fetchSession) {
	if c.sessions[s.id] == s {
		delete(c.sessions, s.id)
		c.total -= s.size
	}
}

func keyOf(topicIDs bool, rt *kmsg.FetchRequestTopic, p int32) sessionKey {
	if topicIDs {
		return sessionKey{id: records.UUID(rt.TopicID), partition: p}
	}
	return sessionKey{topic: rt.Topic, partition: p}
}

// create makes a session of r's partitions, whose answers are resp (same
// order), when the cache has room or can evict a session; 0 when not.
func (c *fetchSessions) create(r *kmsg.FetchRequest, privileged bool, resp *kmsg.FetchResponse) int32 {
	n := 0
	for _, rt := range r.Topics {
		n += len(rt.Partitions)
	}
	if c.slots <= 0 || n == 0 || n > c.maxParts {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.sessions) >= c.slots && !c.evictLocked(privileged, n, now) {
		return 0
	}
	if c.total+n > c.maxTotal {
		return 0
	}
	s := &fetchSession{privileged: privileged, topicIDs: r.Version >= 13, created: now, lastUsed: now, epoch: 1,
		busy: make(chan struct{}, 1), parts: make(map[sessionKey]int, n), list: make([]sessionPart, 0, n)}
	for i := range r.Topics {
		rt := &r.Topics[i]
		for j, rp := range rt.Partitions {
			sp := sessionPart{key: keyOf(s.topicIDs, rt, rp.Partition), req: rp, hw: -1, lso: -1, logStart: -1}
			if i < len(resp.Topics) && j < len(resp.Topics[i].Partitions) {
				a := &resp.Topics[i].Partitions[j]
				if a.ErrorCode == 0 {
					sp.hw, sp.lso, sp.logStart = a.HighWatermark, a.LastStableOffset, a.LogStartOffset
				}
			}
			s.put(sp)
		}
	}
	s.size = len(s.list)
	c.total += s.size
	for {
		s.id = rand.Int32N(math.MaxInt32) + 1 // 1..MaxInt32: 0 is "no session"
		if c.sessions[s.id] == nil {
			break
		}
	}
	c.sessions[s.id] = s
	return s.id
}

// evictLocked frees a slot for a new session of n partitions, by Kafka's
// rules (see above); false when none may go.
func (c *fetchSessions) evictLocked(privileged bool, n int, now time.Time) bool {
	var stale, victim *fetchSession
	for _, s := range c.sessions {
		if stale == nil || s.lastUsed.Before(stale.lastUsed) {
			stale = s
		}
		old := now.Sub(s.created) > c.evictAfter
		if !old && !(privileged && !s.privileged) {
			continue // not evictable by this newcomer
		}
		if victim == nil || lessEvictable(s, victim) {
			victim = s
		}
	}
	switch {
	case stale != nil && now.Sub(stale.lastUsed) > c.evictAfter:
		victim = stale
	case victim == nil:
		return false
	case privileged == victim.privileged && n <= victim.size, !privileged && victim.privileged:
		return false // the newcomer is not worth more than the least valuable
	}
	c.dropLocked(victim)
	return true
}

// lessEvictable orders sessions as Kafka's EvictableKey: unprivileged first,
// then smaller, then by id.
func lessEvictable(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if a.size != b.size {
		return a.size < b.size
	}
	return a.id < b.id
}

// put adds or replaces sp.
func (s *fetchSession) put(sp sessionPart) {
	if i, ok := s.parts[sp.key]; ok {
		old := s.list[i]
		sp.hw, sp.lso, sp.logStart = old.hw, old.lso, old.logStart // sp is not quiet: a new request
		s.list[i] = sp
		return
	}
	s.parts[sp.key] = len(s.list)
	s.list = append(s.list, sp)
}

// forget removes key, if held.
func (s *fetchSession) forget(key sessionKey) {
	i, ok := s.parts[key]
	if !ok {
		return
	}
	last := len(s.list) - 1
	if i != last {
		s.list[i] = s.list[last]
		s.parts[s.list[i].key] = i
	}
	s.list = s.list[:last]
	delete(s.parts, key)
}

// incremental is an incremental fetch being served: the session (held busy
// until done) and, once planned, the request topics to read.
type incremental struct {
	s      *fetchSession
	topics []kmsg.FetchRequestTopic
	idx    [][]int        // index in s.list of each partition of topics
	denied []bool         // topics refused by the ACLs
	ids    []records.UUID // the destination's id of each topic (zero if unknown)
}

// begin starts incremental request r: code is the top-level error to answer
// with; inc nil and code 0 means the request is to be served without a
// session (it emptied or outgrew the session, which is gone).
func (c *fetchSessions) begin(ctx context.Context, r *kmsg.FetchRequest) (inc *incremental, code int16) {
	c.mu.Lock()
	s := c.sessions[r.SessionID]
	switch {
	case s == nil:
		c.mu.Unlock()
		return nil, codeFetchSessionIDNotFound
	case s.epoch != r.SessionEpoch:
		c.mu.Unlock()
		return nil, codeInvalidFetchSessionEpoch
	case s.topicIDs != (r.Version >= 13):
		c.mu.Unlock()
		return nil, codeFetchSessionTopicIDError
	}
	// Taking the epoch now makes a duplicate of this request fail its check.
	s.epoch = nextSessionEpoch(s.epoch)
	c.mu.Unlock()
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, codeFetchSessionIDNotFound
	}
	for i := range r.ForgottenTopics {
		ft := &r.ForgottenTopics[i]
		rt := kmsg.FetchRequestTopic{Topic: ft.Topic, TopicID: ft.TopicID}
		for _, p := range ft.Partitions {
			s.forget(keyOf(s.topicIDs, &rt, p))
		}
	}
	for i := range r.Topics {
		rt := &r.Topics[i]
		for _, rp := range rt.Partitions {
			k := keyOf(s.topicIDs, rt, rp.Partition)
			if _, held := s.parts[k]; !held && len(s.list) >= c.maxParts {
				c.mu.Lock()
				c.dropLocked(s)
				c.mu.Unlock()
				<-s.busy
				return nil, 0
			}
			s.put(sessionPart{key: k, req: rp, hw: -1, lso: -1, logStart: -1})
		}
	}
	c.mu.Lock()
	if len(s.list) == 0 || (c.sessions[s.id] == s && c.total-s.size+len(s.list) > c.maxTotal) {
		// Empty (Kafka drops it), or the cache cannot hold it grown.
		c.dropLocked(s)
		c.mu.Unlock()
		<-s.busy
		return nil, 0
	}
	if c.sessions[s.id] == s {
		c.total += len(s.list) - s.size
		s.lastUsed, s.size = c.now(), len(s.list)
	}
	c.mu.Unlock()
	return &incremental{s: s}, 0
}

// plan sets the topics to read now: every partition of the session but the
// quiet ones whose log did not move (of a topic still the same, that the
// ACLs, if enforced, still allow). The watch returned holds the quiet
// partitions (through the session: their skip flags); the read adds the
// others.
func (inc *incremental) plan(ctx context.Context, dp *DataPlane, r *kmsg.FetchRequest) *logWatch {
	s := inc.s
	seen := newLogWatch()
	still := s.tracked && s.gen == seen.gen // no tracked log moved since the last read
	var allowed func(kmsg.FetchRequestTopic) bool
	if dp.aclStore != nil {
		allowed = fetchRule(dp, dp.authzFor(ctx), r)
	}
	type topicState struct {
		spec   mirror.TopicSpec
		ok     bool // known
		denied bool
		j      int // index in inc.topics, -1 before its first partition to read
	}
	topics := make(map[sessionKey]*topicState)
	inc.topics, inc.idx, inc.denied, inc.ids = nil, nil, nil, nil
	seen.sess = s
	var ts *topicState
	var tk sessionKey
	for i := range s.list {
		sp := &s.list[i]
		sp.skip = false
		if ts == nil || sp.key.topic != tk.topic || sp.key.id != tk.id {
			tk = sessionKey{topic: sp.key.topic, id: sp.key.id}
			if ts = topics[tk]; ts == nil {
				rt := kmsg.FetchRequestTopic{Topic: sp.key.topic, TopicID: sp.key.id}
				ts = &topicState{j: -1}
				ts.spec, ts.ok, _ = dp.fetchTopic(r.Version, rt)
				ts.denied = allowed != nil && !allowed(rt)
				topics[tk] = ts
			}
		}
		if sp.quiet && ts.ok && !ts.denied && sp.topicID == ts.spec.TopicID && sp.key.partition < ts.spec.Partitions &&
			(still || watchLog(sp.seen.log) == sp.seen) {
			sp.skip = true
			seen.tracked = seen.tracked && sp.tracked
			continue
		}
		if ts.j < 0 {
			ts.j = len(inc.topics)
			inc.topics = append(inc.topics, kmsg.FetchRequestTopic{Topic: sp.key.topic, TopicID: sp.key.id})
			inc.idx = append(inc.idx, nil)
			inc.denied = append(inc.denied, ts.denied)
			inc.ids = append(inc.ids, ts.spec.TopicID)
		}
		inc.topics[ts.j].Partitions = append(inc.topics[ts.j].Partitions, sp.req)
		inc.idx[ts.j] = append(inc.idx[ts.j], i)
	}
	return seen
}

// nextSessionEpoch is Kafka's successor of a session epoch: it wraps to 1.
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// filter keeps in resp (the answer to inc.topics, same order) only the
// partitions the client must hear of, and records what it heard and what the
// read saw (seen).
func (inc *incremental) filter(version int16, resp *kmsg.FetchResponse, seen *logWatch) {
	kept := resp.Topics[:0]
	for i := range resp.Topics {
		t := resp.Topics[i]
		ps := t.Partitions[:0]
		for j := range t.Partitions {
			p := t.Partitions[j]
			sp := &inc.s.list[inc.idx[i][j]]
			must := len(p.RecordBatches) > 0 || p.ErrorCode != 0 || p.DivergingEpoch.Epoch >= 0 ||
				p.HighWatermark != sp.hw || p.LastStableOffset != sp.lso || p.LogStartOffset != sp.logStart
			if p.ErrorCode != 0 {
				sp.hw = -1 // named again once the error is gone
			} else {
				sp.hw, sp.lso, sp.logStart = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
			}
			sp.quiet = false
			if k := seen.at[i][j]; k >= 0 && len(p.RecordBatches) == 0 && p.ErrorCode == 0 && p.DivergingEpoch.Epoch < 0 {
				w := seen.logs[k]
				sp.quiet, sp.seen, sp.topicID = caughtUp(w, requestPartition(version, sp.req)), w, inc.ids[i]
				sp.tracked = fetcher.TracksChanges(w.log)
			}
			if must {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			t.Partitions = ps
			kept = append(kept, t)
		}
	}
	resp.Topics = kept
	inc.s.gen, inc.s.tracked = seen.gen, seen.tracked
}

// done releases the session.
func (inc *incremental) done() { <-inc.s.busy }
