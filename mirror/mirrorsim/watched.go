package mirrorsim

import (
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/epoch"
	"github.com/kmirror/kmirror/fetcher"
)

// notifier wakes condition waits: its channel is closed and replaced on every change.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// changed returns a channel closed at the next notify.
func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

// watchedLog is the handle of one partition log that the simulation hands out (to the
// facade, to the sources of other sites, to its own checks). It notifies after every
// mutation, so the simulation can wait for log conditions without polling, and it
// survives crashes: a log without a Crash method is closed and replaced by a reopened
// one while no call is in progress.
type watchedLog struct {
	n    *notifier
	spec LogSpec

	mu sync.RWMutex
	l  fetcher.Log
}

var _ fetcher.Log = (*watchedLog)(nil)

// inner returns the current log (for the optional interfaces it may implement).
func (w *watchedLog) inner() fetcher.Log {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l
}

// exclusive runs fn on the log while no other call is in progress.
func (w *watchedLog) exclusive(fn func(fetcher.Log) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fn(w.l)
}

// setReadOnly hands the partition's read-only flag to the log.
func (w *watchedLog) setReadOnly(readOnly bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	w.l.SetReadOnly(readOnly)
}

// SetReadOnly implements fetcher.Log.
func (w *watchedLog) SetReadOnly(readOnly bool) { w.setReadOnly(readOnly) }

// ReadOnly implements fetcher.Log.
func (w *watchedLog) ReadOnly() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.ReadOnly()
}

func (w *watchedLog) Append(b []byte) error {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.Append(b)
}

func (w *watchedLog) AppendAsLeader(b []byte) (int64, error) {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.AppendAsLeader(b)
}

func (w *watchedLog) Truncate(off int64) error {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.Truncate(off)
}

func (w *watchedLog) TruncateFullyAndStartAt(off int64) error {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.TruncateFullyAndStartAt(off)
}

func (w *watchedLog) BumpLeaderEpoch(min int32) (int32, error) {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.BumpLeaderEpoch(min)
}

// BumpLeaderEpochUnsynced implements fetcher.UnsyncedBumper when the log it watches
// does (a FileLog: the power loss of FileLogFactory then drops a bump not synced
// since); otherwise it is BumpLeaderEpoch.
func (w *watchedLog) BumpLeaderEpochUnsynced(min int32) (int32, error) {
	defer w.n.notify()
	w.mu.RLock()
	defer w.mu.RUnlock()
	if ub, ok := w.l.(fetcher.UnsyncedBumper); ok {
		return ub.BumpLeaderEpochUnsynced(min)
	}
	return w.l.BumpLeaderEpoch(min)
}

func (w *watchedLog) LogStartOffset() int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.LogStartOffset()
}

func (w *watchedLog) LogEndOffset() int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.LogEndOffset()
}

func (w *watchedLog) HighWatermark() int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.HighWatermark()
}

func (w *watchedLog) LastStableOffset() int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.LastStableOffset()
}

func (w *watchedLog) OpenTransactions() []fetcher.OpenTxn {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.OpenTransactions()
}

func (w *watchedLog) Read(offset int64, maxBytes int) ([]byte, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.Read(offset, maxBytes)
}

func (w *watchedLog) Epochs() *epoch.Cache {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.Epochs()
}

func (w *watchedLog) EndOffsetForEpoch(e int32) (int32, int64) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.EndOffsetForEpoch(e)
}

func (w *watchedLog) LatestEpoch() int32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.LatestEpoch()
}

func (w *watchedLog) LeaderEpoch() int32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.LeaderEpoch()
}

func (w *watchedLog) Flush() error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.l.Flush()
}

// Close is a no-op: the simulation owns the logs for the whole run (a site's
// destination outlives its Mirror across crashes).
func (w *watchedLog) Close() error { return nil }

// crash simulates a process crash of the log: in place with its Crash method, else by
// closing it and reopening it with the factory (a reopen from its storage). readOnly
// is the partition's read-only flag, handed to the reopened log.
func (w *watchedLog) crash(factory LogFactory, readOnly bool) error {
	defer w.n.notify()
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.l.(interface{ Crash() }); ok {
		c.Crash()
		return nil
	}
	if err := w.l.Close(); err != nil {
		return fmt.Errorf("mirrorsim: crash %s %s-%d: close: %w", w.spec.Site, w.spec.Topic, w.spec.Partition, err)
	}
	spec := w.spec
	spec.Reopen = true
	l, err := factory(spec)
	if err == nil && l == nil {
		err = fmt.Errorf("mirrorsim: log factory returned nil")
	}
	if err != nil {
		return fmt.Errorf("mirrorsim: reopen %s %s-%d after a crash: %w", spec.Site, spec.Topic, spec.Partition, err)
	}
	l.SetReadOnly(readOnly)
	w.l = l
	return nil
}

// discard closes the log at the end of a run (Discard when the log has it).
func (w *watchedLog) discard() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d, ok := w.l.(interface{ Discard() error }); ok {
		return d.Discard()
	}
	return w.l.Close()
}

// gatedLog is the view of a source log that one destination site fetches from: its
// high watermark and last stable offset are capped at the gate, so the simulation
// decides how far mirroring may progress.
type gatedLog struct {
	fetcher.Log
	gate func() int64
}

func (g *gatedLog) HighWatermark() int64 { return min(g.Log.HighWatermark(), g.gate()) }

func (g *gatedLog) LastStableOffset() int64 { return min(g.Log.LastStableOffset(), g.gate()) }
