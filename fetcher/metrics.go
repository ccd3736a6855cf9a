package fetcher

import (
	"context"
	"log/slog"

	"github.com/kmirror/kmirror/epoch"
)

// Progress is reported after every fetch response that a partition processed.
type Progress struct {
	// Lag is max(0, source high watermark − destination log end offset), in offsets.
	Lag int64
	// Bytes is the number of record-batch bytes appended by this response.
	Bytes int64
	// SourceHighWatermark and LogEndOffset are the two sides of Lag.
	SourceHighWatermark int64
	LogEndOffset        int64
}

// Events receives what happens to mirrored partitions. Calls come from the
// fetch loop's goroutine and must not block for long; implementations must be
// safe for concurrent use when several Fetchers share one.
type Events interface {
	// OnDivergence reports a truncation caused by a DivergingEpoch (or by the
	// OffsetForLeaderEpoch probe); the reconciler may enter ULE_LOG_TRUNCATION.
	OnDivergence(tp TopicPartition, d epoch.Divergence, truncatedTo int64)
	// OnOutOfRange reports that the source no longer holds the fetch offset;
	// Gap offsets (the difference to the source log start) will never be mirrored.
	OnOutOfRange(tp TopicPartition, fetchOffset, sourceLogStart, gap int64)
	// OnEpochFencing reports a batch whose leader epoch is above the destination
	// leader epoch; the partition has been stopped (spec §7.3 rule 1).
	OnEpochFencing(tp TopicPartition, batchEpoch, localEpoch int32)
	// OnFailed reports that the partition was removed with err.
	OnFailed(tp TopicPartition, err error)
	// OnProgress reports lag and throughput after every processed response.
	OnProgress(tp TopicPartition, p Progress)
}

// NopEvents ignores every event.
type NopEvents struct{}

// OnDivergence implements Events.
func (NopEvents) OnDivergence(TopicPartition, epoch.Divergence, int64) {}

// OnOutOfRange implements Events.
func (NopEvents) OnOutOfRange(TopicPartition, int64, int64, int64) {}

// OnEpochFencing implements Events.
func (NopEvents) OnEpochFencing(TopicPartition, int32, int32) {}

// OnFailed implements Events.
func (NopEvents) OnFailed(TopicPartition, error) {}

// OnProgress implements Events.
func (NopEvents) OnProgress(TopicPartition, Progress) {}

// Logger is the small logging interface the fetcher writes to. args are
// alternating key/value pairs, as in log/slog.
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// NopLogger discards everything.
type NopLogger struct{}

// Debug implements Logger.
func (NopLogger) Debug(string, ...any) {}

// Info implements Logger.
func (NopLogger) Info(string, ...any) {}

// Warn implements Logger.
func (NopLogger) Warn(string, ...any) {}

// Error implements Logger.
func (NopLogger) Error(string, ...any) {}

// SlogLogger adapts a *slog.Logger to Logger.
func SlogLogger(l *slog.Logger) Logger { return slogAdapter{l} }

type slogAdapter struct{ l *slog.Logger }

func (s slogAdapter) Debug(msg string, args ...any) {
	s.l.Log(context.Background(), slog.LevelDebug, msg, args...)
}
func (s slogAdapter) Info(msg string, args ...any) {
	s.l.Log(context.Background(), slog.LevelInfo, msg, args...)
}
func (s slogAdapter) Warn(msg string, args ...any) {
	s.l.Log(context.Background(), slog.LevelWarn, msg, args...)
}
func (s slogAdapter) Error(msg string, args ...any) {
	s.l.Log(context.Background(), slog.LevelError, msg, args...)
}
