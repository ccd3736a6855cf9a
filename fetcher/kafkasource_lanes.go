package fetcher

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultFetchConnections is the default of
// KafkaSourceConfig.FetchConnections.
const DefaultFetchConnections = 8

// fetchLane is one set of connections Fetch requests go on: a kgo client
// (which keeps one fetch connection per broker) and the gate of each broker
// on it. A broker serves the requests of one connection one after the
// other, so a long poll holds its connection: fetch loops on different lanes
// long-poll a broker side by side, as Kafka's replica fetcher threads do
// (each its own connection), while those of one lane take turns (brokerGate).
type fetchLane struct {
	cl      *kgo.Client
	mu      sync.Mutex
	brokers map[int32]*brokerGate
}

// gate returns the lane's gate of broker id.
func (l *fetchLane) gate(id int32) *brokerGate {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.brokers[id]
	if g == nil {
		g = &brokerGate{}
		l.brokers[id] = g
	}
	return g
}

// laneFor returns the lane the fetches of fs go on. A FetchSessions (a fetch
// loop) keeps the lane it was first given; lanes are made on demand, up to
// KafkaSourceConfig.FetchConnections, the loops beyond sharing them in turn.
// The main lane (the metadata client's fetch connections) serves fetches
// without FetchSessions, and every fetch when FetchConnections is 1 or a
// client cannot be made.
func (s *KafkaSource) laneFor(fs *FetchSessions) *fetchLane {
	if fs == nil {
		return s.main
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.lane != nil {
		return fs.lane
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.cfg.FetchConnections
	if len(s.lanes) < n-1 && !s.closed {
		opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.SeedBrokers...)}, s.cfg.ClientOptions...)
		if cl, err := kgo.NewClient(opts...); err == nil {
			s.lanes = append(s.lanes, &fetchLane{cl: cl, brokers: map[int32]*brokerGate{}})
		}
	}
	all := append([]*fetchLane{s.main}, s.lanes...)
	fs.lane = all[s.nextLane%len(all)]
	s.nextLane++
	return fs.lane
}
