package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// TestFileLogReadBuffer: ReadBuffer returns Read's bytes, in buf when its
// capacity holds the read and in new memory when it does not.
func TestFileLogReadBuffer(t *testing.T) {
	l, err := OpenFileLog(t.TempDir(), FileLogOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	appendAll(t, l, batch(t, 0, 0, 4, records.CompressionNone), batch(t, 4, 0, 4, records.CompressionNone))
	want, err := l.Read(0, 1<<20)
	require.NoError(t, err)

	buf := make([]byte, 7, 1<<20)
	got, err := l.ReadBuffer(0, 1<<20, true, buf)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Same(t, &buf[0], &got[0], "read into buf")

	small := make([]byte, 0, 10)
	got, err = l.ReadBuffer(0, 1<<20, true, small)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NotSame(t, &small[:1][0], &got[0], "new memory for a read larger than buf")

	got, err = l.ReadBuffer(8, 1<<20, true, buf)
	require.NoError(t, err)
	require.Empty(t, got, "nothing at the log end")
	_, err = l.ReadBuffer(9, 1<<20, true, buf)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	// minOne: the first batch is returned past the limit only when asked
	// for (Kafka's minOneMessage); without it a read too small for it
	// returns nothing.
	first := want[:len(want)/2]
	got, err = l.ReadBuffer(0, 10, true, buf)
	require.NoError(t, err)
	require.Equal(t, first, got, "the first batch, larger than the limit")
	got, err = l.ReadBuffer(0, 10, false, buf)
	require.NoError(t, err)
	require.Empty(t, got, "no batch fits the limit")
	got, err = l.ReadBuffer(0, len(first)+10, false, buf)
	require.NoError(t, err)
	require.Equal(t, first, got, "the batches that fit")
}
