package dataplane

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
// Config.FetchSessionMaxPartitions partitions; a full fetch with more gets no
// session, and an incremental one that would grow a session past the bound
// drops the session and is answered without one (SessionID 0), as for a cache
// that is full. A session not used for FetchSessionEvictAfter may be evicted
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
	slots, maxParts int
	evictAfter      time.Duration
	now             func() time.Time

	mu       sync.Mutex
	sessions map[int32]*fetchSession
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
}

func newFetchSessions(slots, maxParts int) *fetchSessions {
	return &fetchSessions{slots: slots, maxParts: maxParts, evictAfter: FetchSessionEvictAfter, now: time.Now, sessions: make(map[int32]*fetchSession)}
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
	delete(c.sessions, id)
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
	delete(c.sessions, victim.id)
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
		sp.hw, sp.lso, sp.logStart = old.hw, old.lso, old.logStart
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
// until done) and the request topics to read, every partition of the
// session.
type incremental struct {
	s      *fetchSession
	topics []kmsg.FetchRequestTopic
	idx    [][]int // index in s.list of each partition of topics
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
				<-s.busy
				c.remove(s.id)
				return nil, 0
			}
			s.put(sessionPart{key: k, req: rp, hw: -1, lso: -1, logStart: -1})
		}
	}
	c.mu.Lock()
	if len(s.list) == 0 {
		delete(c.sessions, s.id)
		c.mu.Unlock()
		<-s.busy
		return nil, 0
	}
	if c.sessions[s.id] == s {
		s.lastUsed, s.size = c.now(), len(s.list)
	}
	c.mu.Unlock()
	inc = &incremental{s: s}
	byTopic := make(map[sessionKey]int)
	for i := range s.list {
		sp := &s.list[i]
		tk := sessionKey{topic: sp.key.topic, id: sp.key.id}
		j, ok := byTopic[tk]
		if !ok {
			j = len(inc.topics)
			byTopic[tk] = j
			inc.topics = append(inc.topics, kmsg.FetchRequestTopic{Topic: sp.key.topic, TopicID: sp.key.id})
			inc.idx = append(inc.idx, nil)
		}
		inc.topics[j].Partitions = append(inc.topics[j].Partitions, sp.req)
		inc.idx[j] = append(inc.idx[j], i)
	}
	return inc, 0
}

// nextSessionEpoch is Kafka's successor of a session epoch: it wraps to 1.
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// filter keeps in resp (the answer to inc.topics, same order) only the
// partitions the client must hear of, and records what it heard.
func (inc *incremental) filter(resp *kmsg.FetchResponse) {
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
}

// done releases the session.
func (inc *incremental) done() { <-inc.s.busy }
