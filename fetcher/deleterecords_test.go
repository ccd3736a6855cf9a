package fetcher

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	open := map[string]func(t *testing.T) Log{
		"memory": func(t *testing.T) Log { return memLog(t, 0) },
		"file": func(t *testing.T) Log {
			l, err := OpenFileLog(dir, FileLogOptions{})
			require.NoError(t, err)
			return l
		},
	}
	for name, mk := range open {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			appendAll(t, l, batch(t, 0, 0, 4, records.CompressionNone), batch(t, 4, 0, 4, records.CompressionNone))
			require.NoError(t, l.Flush())
			rd := l.(RecordDeleter)
			hw := l.HighWatermark()
			require.Equal(t, int64(8), hw)

			_, err := rd.DeleteRecordsBefore(hw + 1)
			require.ErrorIs(t, err, ErrOffsetOutOfRange, "above the high watermark")
			_, err = rd.DeleteRecordsBefore(-2)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
			start, err := rd.DeleteRecordsBefore(5) // inside the second batch
			require.NoError(t, err)
			require.Equal(t, int64(5), start)
			require.Equal(t, int64(5), l.LogStartOffset())
			_, err = l.Read(3, 1<<20)
			require.ErrorIs(t, err, ErrOffsetOutOfRange, "records below the log start are not served")
			b, err := l.Read(5, 1<<20)
			require.NoError(t, err)
			require.NotEmpty(t, b, "the batch holding offset 5 is still served")
			start, err = rd.DeleteRecordsBefore(2)
			require.NoError(t, err)
			require.Equal(t, int64(5), start, "never backwards")

			l.SetReadOnly(true)
			_, err = rd.DeleteRecordsBefore(-1)
			require.ErrorIs(t, err, ErrReadOnly, "a mirror partition refuses")
			l.SetReadOnly(false)
			start, err = rd.DeleteRecordsBefore(-1)
			require.NoError(t, err)
			require.Equal(t, hw, start, "-1 is the high watermark")
			require.NoError(t, l.Close())
			if name == "file" {
				l = mk(t)
				defer l.Close()
				require.Equal(t, hw, l.LogStartOffset(), "durable across reopen")
				require.Equal(t, int64(8), l.LogEndOffset())
			}
		})
	}
}
