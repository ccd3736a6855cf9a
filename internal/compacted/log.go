package compacted

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Log is a state log on a compacted Kafka topic: the topic, checked at Open, the replay
// of its partitions, and the transactional producers that write them. Safe for
// concurrent use.
type Log struct {
	cfg    Config
	base   *sarama.Config // copy of cfg.Sarama (or the default), shared by clients of the log
	client sarama.Client  // topic checks; producers have their own
	kcl    *kgo.Client    // the replay's raw fetches, with base's TLS and SASL

	mu     sync.Mutex
	closed bool
}

// Open validates cfg, connects and ensures the topic (see the package documentation):
// a missing topic is created and its partitions waited for until they have leaders; an
// existing one is refused with an error matching ErrTopic when it cannot hold the log.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	base := cfg.baseConfig()
	opts, err := kgoOptions(base)
	if err != nil {
		return nil, err
	}
	kcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RetryTimeout(cfg.RetryTimeout)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("compacted: replay client for %v: %w", cfg.Brokers, err)
	}
	client, err := sarama.NewClient(cfg.Brokers, base)
	if err != nil {
		kcl.Close()
		return nil, fmt.Errorf("compacted: connect to %v: %w", cfg.Brokers, err)
	}
	l := &Log{cfg: cfg, base: base, client: client, kcl: kcl}
	if err := l.ensureTopic(ctx); err != nil {
		_ = client.Close()
		kcl.Close()
		return nil, err
	}
	return l, nil
}

// Topic is the log's topic.
func (l *Log) Topic() string { return l.cfg.Topic }

// Partitions is the log's partition count.
func (l *Log) Partitions() int32 { return l.cfg.Partitions }

func (l *Log) checkOpen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}

// Close closes the log's clients. Producers are closed by their owners.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.kcl.Close()
	if err := l.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
		return fmt.Errorf("compacted: close: %w", err)
	}
	return nil
}
