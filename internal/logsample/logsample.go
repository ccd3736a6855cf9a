// Package logsample bounds the log lines of events that can happen to every
// partition at once (a source outage fails them all together): a Sampler lets
// a burst of lines per key through in each interval and folds the rest into
// one summary line per key and interval, so that the lines logged per second
// do not grow with the partition count. What the suppressed lines said stays
// available where it is kept per partition (the describe, the StateChange
// events, the metrics); the summary gives their count and the first of them.
package logsample

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Sampler logs through Logger at most Burst lines per key and Interval, then
// one summary line per key when the interval ends.
type Sampler struct {
	log      *slog.Logger
	burst    int
	interval time.Duration

	mu   sync.Mutex
	keys map[string]*window
}

// window is one key's current interval.
type window struct {
	start      time.Time
	logged     int
	suppressed int
	level      slog.Level
	msg        string
	first      []any // the attributes of the first suppressed line
	timer      *time.Timer
}

// New returns a Sampler over log. burst < 1 is 1; interval <= 0 is a second.
func New(log *slog.Logger, burst int, interval time.Duration) *Sampler {
	if burst < 1 {
		burst = 1
	}
	if interval <= 0 {
		interval = time.Second
	}
	return &Sampler{log: log, burst: burst, interval: interval, keys: map[string]*window{}}
}

// Log logs msg with args at level, unless key already had Burst lines in
// the current interval: then the line is counted, and the summary logged at
// the end of the interval says how many there were, with the first one's
// attributes.
func (s *Sampler) Log(ctx context.Context, level slog.Level, key, msg string, args ...any) {
	if !s.log.Enabled(ctx, level) {
		return
	}
	now := time.Now()
	s.mu.Lock()
	w := s.keys[key]
	if w == nil || now.Sub(w.start) >= s.interval && w.suppressed == 0 {
		w = &window{start: now}
		s.keys[key] = w
	}
	if w.logged < s.burst {
		w.logged++
		s.mu.Unlock()
		s.log.Log(ctx, level, msg, args...)
		return
	}
	if w.suppressed == 0 {
		w.level, w.msg, w.first = level, msg, args
		w.timer = time.AfterFunc(time.Until(w.start.Add(s.interval)), func() { s.flush(key, w) })
	}
	w.suppressed++
	s.mu.Unlock()
}

// flush logs the summary of w, the window of key, and ends it.
func (s *Sampler) flush(key string, w *window) {
	s.mu.Lock()
	n, level, msg, first := w.suppressed, w.level, w.msg, w.first
	if s.keys[key] == w {
		delete(s.keys, key)
	}
	s.mu.Unlock()
	s.log.Log(context.Background(), level, msg+" (summary of the lines suppressed)", "suppressed", n, "interval", s.interval,
		slog.Group("first", first...))
}

// Close logs the summaries of the intervals under way at once.
func (s *Sampler) Close() {
	s.mu.Lock()
	var pending []struct {
		key string
		w   *window
	}
	for k, w := range s.keys {
		if w.suppressed > 0 && w.timer.Stop() {
			pending = append(pending, struct {
				key string
				w   *window
			}{k, w})
		}
	}
	s.mu.Unlock()
	for _, p := range pending {
		s.flush(p.key, p.w)
	}
}
