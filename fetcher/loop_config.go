package fetcher

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Config configures a Fetcher. The zero value is usable with a Source.
type Config struct {
	// PartitionMaxBytes bounds each partition's share of a response; default
	// DefaultPartitionMaxBytes.
	PartitionMaxBytes int32
	// Events receives partition events; default NopEvents.
	Events Events
	// Logger receives the loop's log lines (warnings for retried source
	// errors and truncations, errors for failed partitions); nil discards
	// them.
	Logger *slog.Logger
	// DivergenceViaOffsetForLeaderEpoch makes the loop probe with
	// OffsetForLeaderEpoch before the first fetch after every leader change,
	// for sources that never return DivergingEpoch. It is also on when the
	// Source implements EpochProber and says so.
	DivergenceViaOffsetForLeaderEpoch bool
	// StopOnDivergence stops a partition right after it truncated for a
	// divergence (its Status.Err is then a *DivergedError), so the reconciler
	// can run ULE_LOG_TRUNCATION before fetching again (spec §7.4 with
	// mirror.support.unclean.leader.election=true). By default the loop
	// truncates and goes on fetching (spec §7.4 rule 2).
	StopOnDivergence bool
	// IdleWait is how long the loop pauses after a fetch that brought no
	// data for any partition (sources without long polling, such as
	// LocalSource, would otherwise spin); default 10 ms.
	IdleWait time.Duration
	// Appenders is how many partitions of one response are checked and
	// appended at once, each on its own goroutine (every Log still has one
	// writer); default GOMAXPROCS. 1 appends one partition after another on
	// the loop goroutine.
	Appenders int
	// NewBackOff makes the per-partition retry policy; default exponential
	// from 50 ms to 2 s with no time limit.
	NewBackOff func() backoff.BackOff
	// UnreachableTimeout stops a partition with a *SourceUnreachableError when
	// it had no successful fetch for longer than this (the source down, or
	// answering only errors); 0 retries for ever.
	UnreachableTimeout time.Duration
}

// Validate checks the configuration; it never changes it.
func (c Config) Validate() error {
	if c.UnreachableTimeout < 0 {
		return fmt.Errorf("fetcher: negative UnreachableTimeout %v", c.UnreachableTimeout)
	}
	if c.PartitionMaxBytes < 0 || c.IdleWait < 0 || c.Appenders < 0 {
		return fmt.Errorf("fetcher: negative PartitionMaxBytes %d, IdleWait %v or Appenders %d", c.PartitionMaxBytes, c.IdleWait, c.Appenders)
	}
	return nil
}

// Defaults of Config not exported as constants.
const (
	defaultIdleWait       = 10 * time.Millisecond
	defaultBackOffInitial = 50 * time.Millisecond
	defaultBackOffMax     = 2 * time.Second
)

// withDefaults returns c with every zero field set to its default: the one
// place defaults are applied (Validate only checks).
func (c Config) withDefaults() Config {
	if c.PartitionMaxBytes == 0 {
		c.PartitionMaxBytes = DefaultPartitionMaxBytes
	}
	if c.Events == nil {
		c.Events = NopEvents{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.IdleWait == 0 {
		c.IdleWait = defaultIdleWait
	}
	if c.Appenders == 0 {
		c.Appenders = runtime.GOMAXPROCS(0)
	}
	if c.NewBackOff == nil {
		c.NewBackOff = defaultBackOff
	}
	return c
}

// defaultBackOff is the default Config.NewBackOff: exponential from 50 ms to
// 2 s, with no time limit.
func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = defaultBackOffInitial
	b.MaxInterval = defaultBackOffMax
	b.MaxElapsedTime = 0
	return b
}
