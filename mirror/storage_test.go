package mirror

import (
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/statemachine"
)

// eventLog collects StateChange events.
type eventLog struct {
	mu  sync.Mutex
	evs []StateChange
}

func (e *eventLog) add(c StateChange) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, c)
}

func (e *eventLog) find(pred func(StateChange) bool) (StateChange, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.evs {
		if pred(c) {
			return c, true
		}
	}
	return StateChange{}, false
}

func failedOf(topic string, p int32) func(StateChange) bool {
	return func(c StateChange) bool { return c.Topic == topic && c.Partition == p && c.To == statemachine.Failed }
}

// TestUnwritablePartitionDirFailsThatPartition: a partition whose directory cannot be
// created (a regular file stands at its path, so MkdirAll fails with ENOTDIR for root
// too) is FAILED at once with the reason in describe and in a StateChange event; the
// other partition mirrors on; once the path is fixed the failed partition recovers by
// the library's storage retry, without WithFailedRetry, and mirrors byte for byte.
func TestUnwritablePartitionDirFailsThatPartition(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produceTo(t, ctx, src, "t", 2, 10, "a")
	root := t.TempDir()
	dest, err := OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dest.Close()) })
	blocker := fetcher.PartitionDir(root, "t", 1)
	require.NoError(t, os.WriteFile(blocker, []byte("not a directory"), 0o644))

	var evs eventLog
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }), WithEvents(evs.add))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{}))

	waitCond(t, ctx, m, "partition 1 FAILED", func() bool { return describeOn(t, m, "k", "t", 1).State == statemachine.Failed })
	d := describeOn(t, m, "k", "t", 1)
	require.Contains(t, d.ErrorMessage, "not a directory", "describe names the cause")
	require.Contains(t, d.ErrorMessage, "open the log")
	waitCond(t, ctx, m, "a StateChange reports the failure", func() bool { _, ok := evs.find(failedOf("t", 1)); return ok })
	ev, _ := evs.find(failedOf("t", 1))
	require.Equal(t, d.ErrorMessage, ev.Reason)
	waitCond(t, ctx, m, "partition 0 mirrors on", func() bool {
		d := describeOn(t, m, "k", "t", 0)
		return d.State == statemachine.Mirroring && d.DestinationOffset == 10
	})
	require.Equal(t, statemachine.Failed, describeOn(t, m, "k", "t", 1).State, "still FAILED while the disk is broken")

	require.NoError(t, os.Remove(blocker)) // the disk is fixed
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Mirroring), "WaitForStates waits through the storage retry")
	waitCond(t, ctx, m, "partition 1 caught up", func() bool { return describeOn(t, m, "k", "t", 1).DestinationOffset == 10 })
	_, ok := evs.find(func(c StateChange) bool {
		return c.Topic == "t" && c.Partition == 1 && c.From == statemachine.Failed && c.To == statemachine.Preparing
	})
	require.True(t, ok, "recovered through the retry path (FAILED -> PREPARING)")
}

// fullDisk is a destination whose logs of one partition fail every Append with ENOSPC
// while full is set.
type fullDisk struct {
	*LocalDestination
	victim TopicPartition
	full   atomic.Bool
	fails  atomic.Int32
	mu     sync.Mutex
	logs   map[TopicPartition]fetcher.Log
}

type fullDiskLog struct {
	fetcher.Log
	d *fullDisk
}

func (l *fullDiskLog) Append(batches []byte) error {
	if l.d.full.Load() {
		l.d.fails.Add(1)
		return &fs.PathError{Op: "write", Path: "00000000000000000000.log", Err: syscall.ENOSPC}
	}
	return l.Log.Append(batches)
}

func (d *fullDisk) Log(topic string, partition int32) (fetcher.Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tp := TopicPartition{Topic: topic, Partition: partition}
	if l, ok := d.logs[tp]; ok {
		return l, nil
	}
	l, err := d.LocalDestination.Log(topic, partition)
	if err != nil || tp != d.victim {
		return l, err
	}
	w := &fullDiskLog{Log: l, d: d}
	d.logs[tp] = w
	return w, nil
}

// TestENOSPCDuringAppendFailsThatPartition: ENOSPC on an append makes that partition
// FAILED with a cause matching ErrStorage and syscall.ENOSPC, reported by describe and
// an event; the other partition keeps mirroring new records; when space is back the
// partition recovers by the storage retry and holds every record.
func TestENOSPCDuringAppendFailsThatPartition(t *testing.T) {
	ctx := testCtx(t)
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	t.Cleanup(src.Close)
	produceTo(t, ctx, src, "t", 2, 10, "a")
	dest := &fullDisk{LocalDestination: NewMemoryDestination("dst", fetcher.MemoryLogOptions{}),
		victim: TopicPartition{Topic: "t", Partition: 1}, logs: map[TopicPartition]fetcher.Log{}}
	dest.full.Store(true)
	var evs eventLog
	m, err := New(Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond},
		WithPeerFactory(func(string, MirrorConfig) (Peer, error) { return nil, nil }), WithEvents(evs.add))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	require.NoError(t, m.CreateClusterMirror(ctx, "k", map[string]string{
		KeyBootstrapServers: strings.Join(src.ListenAddrs(), ","), KeyFetchWaitMaxMs: "20"}))
	mustOK(t)(m.StartMirrorTopics(ctx, "k", []string{"t"}, StartOptions{}))

	waitCond(t, ctx, m, "partition 1 FAILED", func() bool { return describeOn(t, m, "k", "t", 1).State == statemachine.Failed })
	d := describeOn(t, m, "k", "t", 1)
	require.Contains(t, d.ErrorMessage, syscall.ENOSPC.Error())
	waitCond(t, ctx, m, "a StateChange reports the failure", func() bool { _, ok := evs.find(failedOf("t", 1)); return ok })
	ev, _ := evs.find(failedOf("t", 1))
	require.Equal(t, d.ErrorMessage, ev.Reason)
	r := m.reconcilerOf("t", 1)
	require.False(t, r.FailureFinal(), "a storage failure is retried by default")

	produceTo(t, ctx, src, "t", 2, 5, "b")
	waitCond(t, ctx, m, "partition 0 mirrors on", func() bool { return describeOn(t, m, "k", "t", 0).DestinationOffset == 15 })
	failsBefore := dest.fails.Load()
	waitCond(t, ctx, m, "a second attempt on the full disk", func() bool { return dest.fails.Load() > failsBefore })

	dest.full.Store(false)
	require.NoError(t, m.WaitForStates(ctx, "k", []string{"t"}, statemachine.Mirroring))
	waitCond(t, ctx, m, "partition 1 caught up", func() bool { return describeOn(t, m, "k", "t", 1).DestinationOffset == 15 })
}
