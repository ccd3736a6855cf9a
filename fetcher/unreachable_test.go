package fetcher

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// downableSource fails every call with ECONNREFUSED while down is set.
type downableSource struct {
	Source
	down atomic.Bool
}

func (s *downableSource) Fetch(ctx context.Context, ps []FetchPartition) ([]FetchResult, error) {
	if s.down.Load() {
		return nil, syscall.ECONNREFUSED
	}
	return s.Source.Fetch(ctx, ps)
}

func (s *downableSource) PartitionInfo(ctx context.Context, t string, p int32, refresh bool) (PartitionInfo, error) {
	if s.down.Load() {
		return PartitionInfo{}, syscall.ECONNREFUSED
	}
	return s.Source.PartitionInfo(ctx, t, p, refresh)
}

func TestFetcherUnreachableTimeoutFailsPartition(t *testing.T) {
	s := memLog(t, 0)
	appendAll(t, s, batch(t, 0, 0, 4, records.CompressionNone))
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{}, 0, s)
	src := &downableSource{Source: local}
	d := memLog(t, 3)
	ev := newRecorder()
	const timeout = 300 * time.Millisecond
	f, err := NewFetcher(src, Config{Events: ev, UnreachableTimeout: timeout})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "caught up", func() bool { return d.LogEndOffset() == 4 })
	down := time.Now()
	src.down.Store(true)
	tp := TopicPartition{"t", 0}
	ev.waitUntil(t, waitLong, "failed", func() bool { return ev.failure(tp) != nil })
	ev.mu.Lock()
	err = ev.failed[tp]
	ev.mu.Unlock()
	require.GreaterOrEqual(t, time.Since(down), timeout, "not before the timeout")
	require.ErrorIs(t, err, ErrSourceUnreachable)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is kept")
	var ue *SourceUnreachableError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, tp, ue.TopicPartition)
	require.Equal(t, timeout, ue.Timeout)
	require.Contains(t, err.Error(), "t-0")
	require.Equal(t, int64(4), d.LogEndOffset(), "nothing lost")
}

func TestFetcherUnreachableTimeoutResetBySuccess(t *testing.T) {
	// Short outages, each below the timeout, never fail the partition.
	s := memLog(t, 0)
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{}, 0, s)
	src := &downableSource{Source: local}
	d := memLog(t, 3)
	ev := newRecorder()
	f, err := NewFetcher(src, Config{Events: ev, UnreachableTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	for i := int64(0); i < 5; i++ {
		src.down.Store(true)
		timer := time.NewTimer(300 * time.Millisecond) // an outage of 300 ms
		<-timer.C
		src.down.Store(false)
		appendAll(t, s, batch(t, i*2, 0, 2, records.CompressionNone))
		ev.waitUntil(t, waitLong, "caught up", func() bool { return d.LogEndOffset() == (i+1)*2 })
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Nil(t, ev.failed[TopicPartition{"t", 0}])
	_, err = NewFetcher(src, Config{UnreachableTimeout: -1})
	require.Error(t, err)
}

// frozenSource accepts every call while frozen and answers none: each blocks until
// its context ends (a broker whose connections stay open but which never replies).
type frozenSource struct {
	Source
	frozen atomic.Bool
}

func (s *frozenSource) Fetch(ctx context.Context, ps []FetchPartition) ([]FetchResult, error) {
	if s.frozen.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Source.Fetch(ctx, ps)
}

func (s *frozenSource) PartitionInfo(ctx context.Context, t string, p int32, refresh bool) (PartitionInfo, error) {
	if s.frozen.Load() {
		<-ctx.Done()
		return PartitionInfo{}, ctx.Err()
	}
	return s.Source.PartitionInfo(ctx, t, p, refresh)
}

func TestFetcherFrozenSourceFailsWithinTimeout(t *testing.T) {
	s := memLog(t, 0)
	appendAll(t, s, batch(t, 0, 0, 4, records.CompressionNone))
	local := NewLocalSource(ReadUncommitted)
	local.Add("t", records.UUID{}, 0, s)
	src := &frozenSource{Source: local}
	d := memLog(t, 3)
	ev := newRecorder()
	const timeout = 300 * time.Millisecond
	f, err := NewFetcher(src, Config{Events: ev, UnreachableTimeout: timeout})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Add(PartitionSpec{Topic: "t", Partition: 0, Log: d}))
	ev.waitUntil(t, waitLong, "caught up", func() bool { return d.LogEndOffset() == 4 })
	frozen := time.Now()
	src.frozen.Store(true)
	tp := TopicPartition{"t", 0}
	ev.waitUntil(t, waitLong, "failed", func() bool { return ev.failure(tp) != nil })
	err = ev.failure(tp)
	require.ErrorIs(t, err, ErrSourceUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the hung request was bounded by the timeout")
	var ue *SourceUnreachableError
	require.True(t, errors.As(err, &ue))
	// The failing run counts from the last answer, before the freeze, not from the
	// end of the first hung request (which would make it two timeouts long).
	// (A fetch that passed the freeze check just before it may still answer just after
	// frozen was read: half a timeout of slack keeps that race out of the assertion.)
	require.False(t, ue.Since.After(frozen.Add(timeout/2)), "since %v, frozen at %v", ue.Since, frozen)
	require.Equal(t, int64(4), d.LogEndOffset(), "nothing lost")
}
