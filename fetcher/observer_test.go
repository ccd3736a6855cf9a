package fetcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// observer is a recorder that also implements FetchObserver.
type observer struct {
	*recorder
	omu      sync.Mutex
	rounds   []FetchRound
	partErrs map[TopicPartition][]error
	records  map[TopicPartition]int64
	maxTs    map[TopicPartition]int64
}

func newObserver() *observer {
	return &observer{recorder: newRecorder(), partErrs: map[TopicPartition][]error{},
		records: map[TopicPartition]int64{}, maxTs: map[TopicPartition]int64{}}
}

func (o *observer) OnFetch(r FetchRound) {
	o.omu.Lock()
	o.rounds = append(o.rounds, r)
	o.omu.Unlock()
	o.notify()
}

func (o *observer) OnPartitionError(tp TopicPartition, err error) {
	o.omu.Lock()
	o.partErrs[tp] = append(o.partErrs[tp], err)
	o.omu.Unlock()
	o.notify()
}

func (o *observer) OnProgress(tp TopicPartition, p Progress) {
	o.omu.Lock()
	o.records[tp] += p.Records
	if p.MaxTimestamp > o.maxTs[tp] {
		o.maxTs[tp] = p.MaxTimestamp
	}
	o.omu.Unlock()
	o.recorder.OnProgress(tp, p)
}

// flakySource fails every Fetch while down is set.
type flakySource struct {
	*LocalSource
	down atomic.Bool
}

var errDown = errors.New("source down")

func (s *flakySource) Fetch(ctx context.Context, parts []FetchPartition) ([]FetchResult, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.LocalSource.Fetch(ctx, parts)
}

func TestFetchObserverSeesRoundsErrorsRecordsAndTimestamps(t *testing.T) {
	local := NewLocalSource(ReadUncommitted)
	srcLog := memLog(t, 1)
	appendAll(t, srcLog, batch(t, 0, 0, 3, records.CompressionNone), batch(t, 3, 0, 4, records.CompressionNone))
	local.Add("t", records.UUID{7}, 0, srcLog)
	src := &flakySource{LocalSource: local}
	src.down.Store(true)
	ob := newObserver()
	f, err := NewFetcher(src, Config{Events: ob})
	require.NoError(t, err)
	defer f.Close()
	dst := memLog(t, 5)
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: dst}))
	tp := TopicPartition{"t", 0}

	ob.waitUntil(t, waitLong, "a failed round and a partition error", func() bool {
		ob.omu.Lock()
		defer ob.omu.Unlock()
		return len(ob.partErrs[tp]) > 0 && len(ob.rounds) > 0
	})
	ob.omu.Lock()
	require.ErrorIs(t, ob.rounds[0].Err, errDown)
	require.Equal(t, 1, ob.rounds[0].Partitions)
	require.ErrorIs(t, ob.partErrs[tp][0], errDown)
	ob.omu.Unlock()

	src.down.Store(false)
	ob.waitUntil(t, waitLong, "caught up", func() bool { return dst.LogEndOffset() == 7 })
	var wantTs int64 = -1
	for _, b := range allBatches(t, srcLog) {
		wantTs = max(wantTs, b.MaxTimestamp())
	}
	ob.omu.Lock()
	defer ob.omu.Unlock()
	require.Equal(t, int64(7), ob.records[tp])
	require.Equal(t, wantTs, ob.maxTs[tp])
	ok := 0
	for _, r := range ob.rounds {
		if r.Err == nil {
			ok++
			require.GreaterOrEqual(t, r.Latency.Nanoseconds(), int64(0))
		}
	}
	require.Positive(t, ok, "answered rounds are reported")
}

func TestFetchObserverReportsPartitionErrorCodes(t *testing.T) {
	local := NewLocalSource(ReadUncommitted)
	ob := newObserver()
	f, err := NewFetcher(local, Config{Events: ob})
	require.NoError(t, err)
	defer f.Close()
	// The partition is unknown to the source: metadata fails, the error is reported.
	require.NoError(t, f.Add(PartitionSpec{Topic: "missing", Partition: 0, Log: memLog(t, 5)}))
	tp := TopicPartition{"missing", 0}
	ob.waitUntil(t, waitLong, "a partition error", func() bool {
		ob.omu.Lock()
		defer ob.omu.Unlock()
		return len(ob.partErrs[tp]) > 0
	})
	ob.omu.Lock()
	defer ob.omu.Unlock()
	require.ErrorIs(t, ob.partErrs[tp][0], ErrUnknownPartition)
}
