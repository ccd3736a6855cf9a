package fetcher

import (
	"context"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/records"
)

// Incremental fetch sessions (KIP-227) of KafkaSource.
//
// A fetch loop (a Fetcher) owns one FetchSessions, which it puts in the context
// of its Fetch calls (WithFetchSessions); KafkaSource then keeps one session
// per source broker in it. The first fetch to a broker is a full one with
// SessionID 0 and SessionEpoch 0, asking the broker for a session. Once the
// broker answers a session id, each fetch names only the partitions whose
// fetch offset, last fetched epoch, current leader epoch or max bytes differ
// from what the broker holds, and lists in ForgottenTopics those the call no
// longer asks for; the broker answers only partitions with data, errors or a
// moved high watermark, log start or last stable offset, and the others are
// answered from what the session last heard (no records: their position did
// not move).
//
// The session mirrors, per partition, exactly what the broker was last sent,
// and changes only when a Fetch succeeded: a request that failed, was cut
// short or was refused resets it, and the next fetch is a full one that
// closes the old session (SessionID kept, SessionEpoch 0). The session errors
// FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH and
// FETCH_SESSION_TOPIC_ID_ERROR are retried at once as a full fetch, so the loop
// never sees them. A broker that answers SessionID 0 (its cache is full, or
// sessions are off) gets full fetches, each asking again. Calls without
// FetchSessions in their context (the Verifier, direct users) stay
// sessionless (SessionEpoch -1).

// Kafka's session error codes.
const (
	CodeFetchSessionIDNotFound    int16 = 70
	CodeInvalidFetchSessionEpoch  int16 = 71
	CodeFetchSessionTopicIDError  int16 = 106
	sessionInitialEpoch           int32 = 0
	sessionFinalEpoch             int32 = -1
	maxSessionEpoch               int32 = math.MaxInt32
	sessionlessID                 int32 = 0
	sessionRetriesAfterSessionErr       = 1
)

// FetchSessions holds the incremental fetch sessions of one fetch loop, one
// per source broker. The zero value is ready; it is safe for concurrent use
// (a source uses one broker's session at a time).
type FetchSessions struct {
	mu       sync.Mutex
	byBroker map[int32]*fetchSession
	lane     *fetchLane // the connections its fetches go on (KafkaSource.laneFor)
}

type fetchSessionsKey struct{}

// WithFetchSessions returns ctx carrying fs: a KafkaSource's Fetch under it
// uses and updates fs's sessions. Fetcher does this for its own fetches.
func WithFetchSessions(ctx context.Context, fs *FetchSessions) context.Context {
	return context.WithValue(ctx, fetchSessionsKey{}, fs)
}

// session returns the session of broker in ctx's FetchSessions; nil when ctx
// carries none.
func sessionFor(ctx context.Context, broker int32) *fetchSession {
	fs, _ := ctx.Value(fetchSessionsKey{}).(*FetchSessions)
	if fs == nil {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.byBroker == nil {
		fs.byBroker = make(map[int32]*fetchSession)
	}
	s := fs.byBroker[broker]
	if s == nil {
		s = &fetchSession{}
		fs.byBroker[broker] = s
	}
	return s
}

// fetchSession is the client side of one broker's session: the id and the
// epoch of the next request (sessionInitialEpoch: a full fetch), and each
// partition as the broker holds it. Only the broker gate's holder uses it, under
// mu (held for a whole exchange, so a reader, a test, sees a settled session).
type fetchSession struct {
	mu        sync.Mutex
	id        int32
	epoch     int32
	parts     map[TopicPartition]*sessionPart
	primed    bool // an answer was accepted (kept across resets)
	lastQuick bool // the last request was sent without a long poll
}

// sessionPart is one partition of a session: the request fields last sent and
// the offsets last answered.
type sessionPart struct {
	sent              FetchPartition // TopicID resolved
	hw, lso, logStart int64
}

// reset makes the next request a full one; the broker's session (if any) is
// closed by it (closeExisting) or known gone (!closeExisting).
func (fs *fetchSession) reset(closeExisting bool) {
	if !closeExisting {
		fs.id = sessionlessID
	}
	fs.epoch = sessionInitialEpoch
	fs.parts = nil
}

// nextEpoch is Kafka's successor of a session epoch: it wraps to 1.
func nextEpoch(e int32) int32 {
	if e == maxSessionEpoch {
		return 1
	}
	return e + 1
}

// sessionRequest is the Fetch to send in session fs for parts[idx]: a full one
// (all partitions) when fs has no session, else an incremental one naming the
// changed partitions and forgetting the partitions fs holds that idx does not
// name. sent is the partitions the request names (resolved), forgotten the
// partitions it forgets.
type sessionRequest struct {
	req       *kmsg.FetchRequest
	full      bool
	sent      map[TopicPartition]FetchPartition
	forgotten []TopicPartition
	where     map[TopicPartition]int
	byID      map[records.UUID]string
}

func (s *KafkaSource) sessionRequest(fs *fetchSession, parts []FetchPartition, infos []PartitionInfo, idx []int) *sessionRequest {
	resolved := make([]FetchPartition, 0, len(idx))
	for _, i := range idx {
		p := parts[i]
		if p.TopicID == (records.UUID{}) {
			p.TopicID = infos[i].TopicID
		}
		resolved = append(resolved, p)
	}
	full := fs.epoch == sessionInitialEpoch || fs.parts == nil
	if !full {
		// A topic recreated under its name (new ID) is not expressible as a
		// forget plus an add by name (Fetch before v13): start over.
		for _, p := range resolved {
			if sp := fs.parts[p.TP()]; sp != nil && sp.sent.TopicID != p.TopicID {
				fs.reset(true)
				full = true
				break
			}
		}
	}
	sr := &sessionRequest{full: full, sent: make(map[TopicPartition]FetchPartition), where: make(map[TopicPartition]int, len(idx)), byID: make(map[records.UUID]string)}
	req := s.newFetchRequest()
	req.SessionID, req.SessionEpoch = fs.id, fs.epoch
	if full {
		req.SessionEpoch = sessionInitialEpoch
	}
	ti := make(map[string]int)
	named := make(map[TopicPartition]bool, len(idx))
	added := false
	for k, p := range resolved {
		tp := p.TP()
		sr.where[tp] = idx[k]
		sr.byID[p.TopicID] = p.Topic
		named[tp] = true
		if !full {
			if sp := fs.parts[tp]; sp != nil && samePosition(sp.sent, p) {
				continue
			}
		}
		if (full && !fs.primed) || (!full && fs.parts[tp] == nil) {
			added = true
		}
		sr.sent[tp] = p
		addFetchPartition(req, ti, p)
	}
	if !full {
		fi := make(map[string]int)
		for tp, sp := range fs.parts {
			if named[tp] {
				continue
			}
			sr.forgotten = append(sr.forgotten, tp)
			j := topicIndex(fi, &req.ForgottenTopics, tp.Topic, func() kmsg.FetchRequestForgottenTopic {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = tp.Topic, sp.sent.TopicID
				return ft
			})
			req.ForgottenTopics[j].Partitions = append(req.ForgottenTopics[j].Partitions, tp.Partition)
		}
	}
	// The first fetch of a session's fetcher, or one adding partitions the
	// broker does not hold for it yet, is answered at once rather than after
	// a long poll: a start or restart of thousands of partitions then learns
	// their offsets in one round of the fetchers that share each broker's
	// gate (brokerGate), not one long poll each. Never two such fetches in a row, so a
	// partition that comes and goes cannot turn the long poll into a loop.
	if added && !fs.lastQuick {
		req.MaxWaitMillis = 0
	}
	fs.lastQuick = req.MaxWaitMillis == 0
	sr.req = req
	return sr
}

// quickNext reports whether the next fetch of parts[idx] in fs is sent
// without a long poll (sessionRequest): the first of the session's fetcher,
// or one adding partitions, unless the last one was.
func (fs *fetchSession) quickNext(parts []FetchPartition, idx []int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.lastQuick {
		return false
	}
	if fs.epoch == sessionInitialEpoch || fs.parts == nil {
		return !fs.primed
	}
	for _, i := range idx {
		if fs.parts[parts[i].TP()] == nil {
			return true
		}
	}
	return false
}

// samePosition reports whether the broker holding a sends b's fetch as is.
func samePosition(a, b FetchPartition) bool {
	return a.FetchOffset == b.FetchOffset && a.LastFetchedEpoch == b.LastFetchedEpoch &&
		a.CurrentLeaderEpoch == b.CurrentLeaderEpoch && a.MaxBytes == b.MaxBytes && a.TopicID == b.TopicID
}

// sessionError reports whether code is one of the errors that end a session
// (the next fetch is a full one).
func sessionError(code int16) bool {
	return code == CodeFetchSessionIDNotFound || code == CodeInvalidFetchSessionEpoch || code == CodeFetchSessionTopicIDError
}

// fetchInSession sends parts[idx] to leader in session fs (the caller holds
// the broker's gate) and fills out[idx].
func (s *KafkaSource) fetchInSession(ctx context.Context, cl *kgo.Client, leader int32, fs *fetchSession, parts []FetchPartition, infos []PartitionInfo, idx []int, out []FetchResult) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for attempt := 0; ; attempt++ {
		sr := s.sessionRequest(fs, parts, infos, idx)
		resp, err := cl.Broker(int(leader)).Request(ctx, sr.req)
		fr, ok := resp.(*kmsg.FetchResponse)
		if err != nil || !ok {
			// The broker may or may not have applied the request: close
			// whatever it holds and start over.
			fs.reset(true)
			fillFetch(nil, err, nil, nil, idx, out)
			return
		}
		if fr.ErrorCode != CodeNone {
			fs.reset(fr.ErrorCode != CodeFetchSessionIDNotFound)
			if sessionError(fr.ErrorCode) && attempt < sessionRetriesAfterSessionErr && ctx.Err() == nil {
				continue
			}
			fillFetch(fr, nil, nil, nil, idx, out)
			return
		}
		s.acceptSession(fs, sr, fr, idx, out)
		return
	}
}

// acceptSession applies a successful answer to sr: the session takes the
// partitions sent and forgets those forgotten, and out[idx] is filled, the
// partitions not answered from what the session last heard.
func (s *KafkaSource) acceptSession(fs *fetchSession, sr *sessionRequest, fr *kmsg.FetchResponse, idx []int, out []FetchResult) {
	fs.primed = true
	if sr.full || fs.parts == nil {
		fs.parts = make(map[TopicPartition]*sessionPart, len(sr.sent))
	}
	for _, tp := range sr.forgotten {
		delete(fs.parts, tp)
	}
	for tp, p := range sr.sent {
		if sp := fs.parts[tp]; sp != nil {
			sp.sent = p
		} else {
			fs.parts[tp] = &sessionPart{sent: p, hw: -1, lso: -1, logStart: -1}
		}
	}
	stray := false
	answered := make([]bool, len(out))
	for _, rt := range fr.Topics {
		topic := rt.Topic
		if fr.Version >= 13 {
			topic = sr.byID[records.UUID(rt.TopicID)]
		}
		for _, rp := range rt.Partitions {
			tp := TopicPartition{topic, rp.Partition}
			i, ok := sr.where[tp]
			if !ok {
				stray = true // a partition the session does not hold
				continue
			}
			answered[i] = true
			fillPartition(&out[i], &rp)
			if sp := fs.parts[tp]; sp != nil {
				sp.hw, sp.lso, sp.logStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			}
		}
	}
	for _, i := range idx {
		if answered[i] {
			continue
		}
		sp := fs.parts[out[i].TP()]
		if sr.full || sp == nil {
			out[i].ErrorCode = CodeUnknownTopicOrPartition
			continue
		}
		// Unchanged since the session last heard of it: no records, the
		// same offsets; its fetch position stays where it was.
		out[i].HighWatermark, out[i].LastStableOffset, out[i].LogStartOffset = sp.hw, sp.lso, sp.logStart
		out[i].Unchanged = true
	}
	switch {
	case stray:
		fs.reset(true)
	case fr.SessionID == sessionlessID:
		fs.reset(false) // no session (cache full, sessions off) or the broker dropped it
	case !sr.full && fr.SessionID != fs.id:
		fs.reset(true)
	default:
		fs.id = fr.SessionID
		if sr.full {
			fs.epoch = 1
		} else {
			fs.epoch = nextEpoch(fs.epoch)
		}
	}
}

// FetchSessionCloser is implemented by sources that keep fetch sessions
// (KafkaSource): Fetcher.Close calls it so that the brokers free them at once
// rather than when they evict them.
type FetchSessionCloser interface {
	CloseFetchSessions(ctx context.Context, fs *FetchSessions)
}

// CloseFetchSessions implements FetchSessionCloser: each session of fs is
// closed with a Fetch naming it at SessionEpoch -1 and no partition (Kafka
// removes the session and answers an empty sessionless fetch), sent within
// ctx; fs is empty afterwards. Failures are ignored: the broker evicts what it
// still holds.
func (s *KafkaSource) CloseFetchSessions(ctx context.Context, fs *FetchSessions) {
	lane := s.laneFor(fs)
	fs.mu.Lock()
	byBroker := fs.byBroker
	fs.byBroker = nil
	fs.mu.Unlock()
	for broker, sess := range byBroker {
		sess.mu.Lock()
		id := sess.id
		sess.mu.Unlock()
		if id == sessionlessID || ctx.Err() != nil {
			continue
		}
		g := lane.gate(broker)
		if g.acquire(ctx, false) != nil {
			return
		}
		req := s.newFetchRequest()
		req.MaxWaitMillis, req.SessionID, req.SessionEpoch = 0, id, sessionFinalEpoch
		_, _ = lane.cl.Broker(int(broker)).Request(ctx, req)
		g.release()
	}
}
