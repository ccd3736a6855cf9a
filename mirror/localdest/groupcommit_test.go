package localdest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// heldWrites makes d's writes of kmirror-topics.json and of its read-only journal wait
// on release (after announcing themselves on started) and counts them; fail makes
// them fail.
type heldWrites struct {
	started chan struct{}
	release chan struct{}
	writes  atomic.Int64
	fail    atomic.Bool
}

func holdWrites(d *LocalDestination) *heldWrites {
	h := &heldWrites{started: make(chan struct{}, 1000), release: make(chan struct{})}
	hold := func() error {
		h.writes.Add(1)
		h.started <- struct{}{}
		<-h.release
		if h.fail.Load() {
			return errors.New("disk full")
		}
		return nil
	}
	realTopics, realRO := d.writeTopics, d.writeReadOnly
	d.writeTopics = func(data []byte) error {
		if err := hold(); err != nil {
			return err
		}
		return realTopics(data)
	}
	d.writeReadOnly = func(data []byte, records int, snapshot bool) error {
		if err := hold(); err != nil {
			return err
		}
		return realRO(data, records, snapshot)
	}
	return h
}

func openTopic(t *testing.T, partitions int32) *LocalDestination {
	t.Helper()
	d, err := OpenFile(t.TempDir(), "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.CreateTopic(t.Context(), dest.TopicSpec{Name: "t", TopicID: records.UUID{1}, Partitions: partitions}))
	return d
}

// TestSetReadOnlyGroupCommit: while one write of the read-only journal is under way, the
// flags set by many concurrent SetReadOnly calls go out together in the next write,
// each call returning only once its flag is durable (read back from the file).
func TestSetReadOnlyGroupCommit(t *testing.T) {
	d := openTopic(t, 64)
	h := holdWrites(d)
	first := make(chan error, 1)
	go func() { first <- d.SetReadOnly("t", 0, true) }()
	<-h.started // partition 0's write is held
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for p := 1; p < 64; p++ {
		wg.Go(func() { errs[p] = d.SetReadOnly("t", int32(p), true) })
	}
	// Every other call has set its flag and waits for a write.
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.readOnly) == 64
	}, 10*time.Second, time.Millisecond)
	close(h.release)
	require.NoError(t, <-first)
	wg.Wait()
	for p, err := range errs {
		require.NoError(t, err, "partition %d", p)
	}
	require.LessOrEqual(t, h.writes.Load(), int64(2), "63 flags set during one write go out in one more write")

	j, back, ok, err := openReadOnlyJournal(d.root)
	require.NoError(t, err)
	require.True(t, ok)
	j.close()
	for p := range 64 {
		require.True(t, back[roKey("t", int32(p))], "partition %d durable", p)
	}
}

// TestWritableOnlyOnceDurable: a partition made writable stays read-only, for the
// destination's readers and its log, until the removal of its flag is durable; a
// failed write leaves it read-only and returns the error.
func TestWritableOnlyOnceDurable(t *testing.T) {
	d := openTopic(t, 2)
	l, err := d.Log("t", 0)
	require.NoError(t, err)
	require.NoError(t, d.SetReadOnly("t", 0, true))
	h := holdWrites(d)
	done := make(chan error, 1)
	go func() { done <- d.SetReadOnly("t", 0, false) }()
	<-h.started
	require.True(t, d.ReadOnly("t", 0), "not durable yet")
	require.True(t, l.ReadOnly())
	l1, err := d.Log("t", 1) // opened during the write: takes its own flag
	require.NoError(t, err)
	require.False(t, l1.ReadOnly())
	h.fail.Store(true)
	close(h.release)
	require.ErrorContains(t, <-done, "disk full")
	require.True(t, d.ReadOnly("t", 0))
	require.True(t, l.ReadOnly())

	h.fail.Store(false)
	require.NoError(t, d.SetReadOnly("t", 0, false))
	require.False(t, d.ReadOnly("t", 0))
	require.False(t, l.ReadOnly())
}

// TestLogsOpenConcurrently: the logs of different partitions open at the same time
// (the open runs outside the destination's lock); a second caller of the same
// partition gets the first one's log.
func TestLogsOpenConcurrently(t *testing.T) {
	release := make(chan struct{})
	var inOpen atomic.Int64
	d := newLocalDestination("dst", func(topic string, partition int32) (fetcher.Log, error) {
		inOpen.Add(1)
		<-release
		return fetcher.NewMemoryLog(fetcher.MemoryLogOptions{}), nil
	})
	require.NoError(t, d.CreateTopic(t.Context(), dest.TopicSpec{Name: "t", TopicID: records.UUID{1}, Partitions: 8}))
	logs := make([]fetcher.Log, 9)
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			l, err := d.Log("t", int32(p))
			if err != nil {
				panic(fmt.Sprint(p, err))
			}
			logs[p] = l
		})
	}
	wg.Go(func() {
		l, err := d.Log("t", 3) // the same partition as one above
		if err != nil {
			panic(err)
		}
		logs[8] = l
	})
	require.Eventually(t, func() bool { return inOpen.Load() == 8 }, 10*time.Second, time.Millisecond,
		"eight partitions open at once, the second caller of partition 3 waits for the first")
	close(release)
	wg.Wait()
	require.Equal(t, int64(8), inOpen.Load())
	require.Same(t, logs[3], logs[8])
	require.NoError(t, d.Close())
}
