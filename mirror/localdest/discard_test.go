package localdest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/records"
)

// A torn tail cut by the open of a partition's log is reported, with the
// partition, the file, the position and the bytes, to every OnDiscard
// handler: those registered before the open when it ends, later ones at once.
func TestDiscardsReportTornTail(t *testing.T) {
	root := t.TempDir()
	d, err := OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	require.NoError(t, d.CreateTopic(context.Background(), dest.TopicSpec{Name: "orders", TopicID: records.UUID{1}, Partitions: 2}))
	batch := func(base int64) []byte {
		b, err := records.BuildBatch(records.BatchSpec{BaseOffset: base, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte("v")}, {Value: []byte("w")}})
		require.NoError(t, err)
		return b
	}
	l, err := d.Log("orders", 1)
	require.NoError(t, err)
	require.NoError(t, l.Append(batch(0)))
	l0, err := d.Log("orders", 0)
	require.NoError(t, err)
	require.NoError(t, l0.Append(batch(0)))
	require.NoError(t, d.Close())

	seg := filepath.Join(fetcher.PartitionDir(root, "orders", 1), "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	torn := batch(2)
	torn = torn[:len(torn)-5]
	require.NoError(t, os.WriteFile(seg, append(append([]byte(nil), data...), torn...), 0o644))

	d, err = OpenFile(root, "dst", fetcher.FileLogOptions{})
	require.NoError(t, err)
	defer d.Close()
	var (
		mu          sync.Mutex
		early, late []PartitionDiscard
	)
	stop := d.OnDiscard(func(pd PartitionDiscard) { mu.Lock(); early = append(early, pd); mu.Unlock() })
	stopped := d.OnDiscard(func(pd PartitionDiscard) { t.Error("stopped handler called") })
	stopped()
	stopped()

	_, err = d.Log("orders", 0) // intact: nothing removed
	require.NoError(t, err)
	require.Empty(t, d.Discards())
	l, err = d.Log("orders", 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), l.LogEndOffset(), "the records before the torn tail are kept")

	got := d.Discards()
	require.Len(t, got, 1)
	require.Equal(t, "orders", got[0].Topic)
	require.Equal(t, int32(1), got[0].Partition)
	require.Equal(t, seg, got[0].File)
	require.Equal(t, int64(len(data)), got[0].Position)
	require.Equal(t, int64(2), got[0].FromOffset)
	require.Equal(t, int64(len(torn)), got[0].Bytes)
	require.False(t, got[0].Repaired)
	mu.Lock()
	require.Equal(t, got, early)
	mu.Unlock()

	d.OnDiscard(func(pd PartitionDiscard) { late = append(late, pd) })
	require.Equal(t, got, late, "a handler registered after the open is told at once")
	stop()
	_, err = d.Log("orders", 1) // already open: no second report
	require.NoError(t, err)
	require.Len(t, d.Discards(), 1)
}
