package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// freePort returns a loopback port nothing listens on (the daemon is
// restarted on it).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestConsumerGroupAcrossRestart: a kgo group consumer joins the daemon's
// classic group, consumes and commits; the daemon restarts (membership is
// not kept), the consumer rejoins by itself and carries on from its
// committed offsets, reading what is produced after the restart.
func TestConsumerGroupAcrossRestart(t *testing.T) {
	addr := freePort(t)
	dir := filepath.Join(t.TempDir(), "site")
	args := []string{"-listen", addr, "-data", dir, "-group.initial.rebalance.delay.ms", "0"}
	d := startRun(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	require.NoError(t, err)
	defer prod.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", 2, 1
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	cresp, err := ct.RequestWith(ctx, prod)
	require.NoError(t, err)
	require.Zero(t, cresp.Topics[0].ErrorCode)
	produce := func(tag string) {
		t.Helper()
		var recs []*kgo.Record
		for p := int32(0); p < 2; p++ {
			for i := 0; i < 5; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", tag, p, i))})
			}
		}
		require.NoError(t, prod.ProduceSync(ctx, recs...).FirstErr())
	}
	produce("before")

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.AutoCommitInterval(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	require.NoError(t, err)
	defer cons.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cons.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
			})
		}
	}()
	defer func() { close(stop); <-polled }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	require.Eventually(t, func() bool { return count() == 10 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))

	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer admin.Close()
	describe := func() kmsg.DescribeGroupsResponseGroup {
		t.Helper()
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"app"}
		resp, err := req.RequestWith(ctx, admin)
		require.NoError(t, err)
		return resp.Groups[0]
	}
	require.Equal(t, "Stable", describe().State)

	d.stop(t)
	startRun(t, args...) // stopped by its cleanup
	produce("after")
	require.Eventually(t, func() bool { return count() == 20 }, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	for v, n := range seen {
		require.Equal(t, 1, n, "%s read twice: the consumer resumed from its commits", v)
	}
	mu.Unlock()
	require.Eventually(t, func() bool { g := describe(); return g.State == "Stable" && len(g.Members) == 1 }, 30*time.Second, 20*time.Millisecond)
}
