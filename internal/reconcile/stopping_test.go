package reconcile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/records"
)

// TestStopProgressAfterALostBump: STOPPING's bump is made durable by the barrier's sync
// (fetcher.UnsyncedBumper). A crash that kept the barrier and lost the bump reopens the
// log at the barrier's epoch, and the resumed STOPPING finds every step done: no
// second LME (which would name the bumped epoch), bump or barrier.
func TestStopProgressAfterALostBump(t *testing.T) {
	dir := t.TempDir()
	l, err := fetcher.OpenFileLog(dir, fetcher.FileLogOptions{})
	require.NoError(t, err)
	_, err = l.BumpLeaderEpoch(9) // ahead of the source's epoch 3
	require.NoError(t, err)
	_, err = l.BumpLeaderEpoch(-1) // both slots of the state file written
	require.NoError(t, err)
	mirrored, err := records.BuildBatch(records.BatchSpec{PartitionLeaderEpoch: 3, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, BaseTimestamp: 1}, []records.Record{{Value: []byte("v")}})
	require.NoError(t, err)
	require.NoError(t, l.Append(mirrored))
	require.NoError(t, l.SyncData())
	lme, lmo := l.LatestEpoch(), l.LogEndOffset() // PersistLME
	durable, err := os.ReadFile(filepath.Join(dir, fetcher.StateFileName))
	require.NoError(t, err)

	bumped, err := l.BumpLeaderEpochUnsynced(lme)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(records.BuildControlBatch(records.ControlBatchSpec{Type: records.ControlMirrorPIDReset, Timestamp: 2}))
	require.NoError(t, err)

	crash := t.TempDir()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.Name() == fetcher.LockFileName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(crash, e.Name()), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(crash, fetcher.StateFileName), durable, 0o644))
	require.NoError(t, l.Close())

	c, err := fetcher.OpenFileLog(crash, fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, bumped, c.LeaderEpoch())
	r := &Partition{log: c, lme: lme, lmo: lmo}
	p, err := r.readStopProgress()
	require.NoError(t, err)
	require.Equal(t, stopProgress{lmePersisted: true, bumped: true, barrier: true}, p)
}
