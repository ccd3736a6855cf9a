package fetcher

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// verifyPair is a source log served by a LocalSource and its byte-for-byte copy.
func verifyPair(t testing.TB, batches int) (*LocalSource, *MemoryLog, *MemoryLog) {
	t.Helper()
	src, dst := NewMemoryLog(MemoryLogOptions{}), NewMemoryLog(MemoryLogOptions{})
	for i := range batches {
		b := batch(t, int64(i*10), 1, 10, records.CompressionNone)
		require.NoError(t, src.Append(b))
		require.NoError(t, dst.Append(b))
	}
	ls := NewLocalSource(ReadUncommitted)
	ls.Add("t", records.UUID{}, 0, src)
	return ls, src, dst
}

func TestVerifierCleanAdvancesToLogEnd(t *testing.T) {
	ls, _, dst := verifyPair(t, 40)
	v := NewVerifier(ls, 4<<10) // a few batches per check
	from := int64(0)
	checks := 0
	for from < dst.LogEndOffset() {
		res := v.Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: from}})
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		require.Nil(t, res[0].Mismatch)
		require.Greater(t, res[0].VerifiedUpTo, from, "every check makes progress")
		require.Equal(t, int64(400), res[0].SourceHighWatermark)
		from = res[0].VerifiedUpTo
		checks++
	}
	require.Equal(t, int64(400), from)
	require.Greater(t, checks, 1, "the budget bounds one check")
	reqs, _ := v.SourceLoad()
	require.Equal(t, int64(checks), reqs, "one request per leader per check")
	// Caught up: a check compares nothing, still reads the source's end.
	res := v.Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: from}})
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(400), res[0].VerifiedUpTo)
	require.Equal(t, int64(400), res[0].SourceHighWatermark)
}

func TestVerifierFindsPlantedBatch(t *testing.T) {
	src, dst := NewMemoryLog(MemoryLogOptions{}), NewMemoryLog(MemoryLogOptions{})
	for i := range 10 {
		b := batch(t, int64(i*10), 1, 10, records.CompressionNone)
		require.NoError(t, src.Append(b))
		if i == 6 { // a different, valid batch at a mirrored offset
			b = batch(t, 60, 1, 10, records.CompressionGzip)
		}
		require.NoError(t, dst.Append(b))
	}
	ls := NewLocalSource(ReadUncommitted)
	ls.Add("t", records.UUID{}, 0, src)
	v := NewVerifier(ls, 0)
	res := v.Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: 0}})
	require.NoError(t, res[0].Err)
	mm := res[0].Mismatch
	require.NotNil(t, mm)
	require.True(t, errors.Is(mm, ErrFidelityMismatch))
	require.Equal(t, int64(60), mm.Offset)
	require.NotEqual(t, mm.SourceCRC, mm.DestinationCRC)
	require.Equal(t, int64(60), res[0].VerifiedUpTo, "verified identical below the mismatch only")
	require.Contains(t, mm.Error(), "offset 60")
}

func TestVerifierFindsBytesChangedUnderIntactHeader(t *testing.T) {
	src := NewMemoryLog(MemoryLogOptions{})
	dir := t.TempDir()
	dst, err := OpenFileLog(dir, FileLogOptions{})
	require.NoError(t, err)
	defer dst.Close()
	var at20 []byte
	for i := range 5 {
		b := batch(t, int64(i*10), 1, 10, records.CompressionNone)
		require.NoError(t, src.Append(b))
		require.NoError(t, dst.Append(b))
		if i == 2 {
			at20 = b
		}
	}
	require.NoError(t, dst.Flush())
	// Flip one record byte of the batch at 20 in the segment file, leaving its header
	// (and CRC field) as they were.
	segs := segmentFiles(t, dir)
	require.Len(t, segs, 1)
	data, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	pos := bytes.Index(data, at20)
	require.Positive(t, pos)
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{data[pos+len(at20)-3] ^ 0x01}, int64(pos+len(at20)-3))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	ls := NewLocalSource(ReadUncommitted)
	ls.Add("t", records.UUID{}, 0, src)
	res := NewVerifier(ls, 0).Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: 0}})
	require.NoError(t, res[0].Err)
	require.NotNil(t, res[0].Mismatch)
	require.Equal(t, int64(20), res[0].Mismatch.Offset)
	require.Equal(t, records.Batch(at20).CRC(), res[0].Mismatch.SourceCRC)
	require.NotEqual(t, res[0].Mismatch.SourceCRC, res[0].Mismatch.DestinationCRC)
	require.Equal(t, int64(20), res[0].VerifiedUpTo)
}

func TestVerifierOnlyMirroredOffsets(t *testing.T) {
	ls, src, dst := verifyPair(t, 3)
	require.NoError(t, src.Append(batch(t, 30, 1, 10, records.CompressionNone))) // not mirrored yet
	v := NewVerifier(ls, 0)
	res := v.Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: 0}})
	require.NoError(t, res[0].Err)
	require.Nil(t, res[0].Mismatch)
	require.Equal(t, int64(30), res[0].VerifiedUpTo)
	require.Equal(t, int64(40), res[0].SourceHighWatermark)
}

func TestVerifierSourceErrorIsNotAMismatch(t *testing.T) {
	ls, _, dst := verifyPair(t, 3)
	require.NoError(t, ls.Close())
	res := NewVerifier(ls, 0).Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: 0}})
	require.Error(t, res[0].Err)
	require.Nil(t, res[0].Mismatch)
	require.Equal(t, int64(0), res[0].VerifiedUpTo)
}

// BenchmarkVerifierSourceLoad measures what the fidelity check adds to the source's
// load: requests and record bytes per partition per minute at the default interval
// (30 s: two checks a minute) and the default fidelity.check.max.bytes, for a
// partition growing by about 1 MiB a minute (caught up: a check that finds nothing new
// sweeps the verified offsets instead, at the same cost), next to what the mirror's
// own fetching reads from the source in that minute without the check: every new
// byte once (mirrored-bytes) in at least 60 long-poll Fetch requests (the default
// fetch.wait.max.ms of 1 s on an idle partition; more when busy).
func BenchmarkVerifierSourceLoad(b *testing.B) {
	const interval = 30 * time.Second
	checksPerMinute := int(time.Minute / interval)
	var reqs, bytes, mirrored int64
	for b.Loop() {
		b.StopTimer()
		ls, src, dst := verifyPair(b, 0)
		v := NewVerifier(ls, 0)
		from := int64(0)
		b.StartTimer()
		for range checksPerMinute {
			for range 90 { // 1 MiB a minute: ~512 KiB per interval
				off := src.LogEndOffset()
				bt := batch(b, off, 1, 50, records.CompressionNone)
				_ = src.Append(bt)
				_ = dst.Append(bt)
				mirrored += int64(len(bt))
			}
			res := v.Check(context.Background(), []VerifyTarget{{Topic: "t", Partition: 0, Log: dst, From: from}})
			from = res[0].VerifiedUpTo
		}
		r, by := v.SourceLoad()
		reqs, bytes = reqs+r, bytes+by
	}
	n := float64(b.N)
	b.ReportMetric(float64(reqs)/n, "check-requests/partition/min")
	b.ReportMetric(float64(bytes)/n, "check-bytes/partition/min")
	b.ReportMetric(float64(mirrored)/n, "mirrored-bytes/partition/min")
	b.ReportMetric(100*float64(bytes)/float64(mirrored), "check-bytes-%")
}
