package mirror_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
)

// Example_failoverAndFailback runs two in-process sites, "east" and "west", each a
// Mirror over a memory destination. West mirrors east, fails over (stop: west becomes
// writable), writes locally, and east fails back by mirroring west: its PREPARING step
// finds the LME stored on west and truncates, so both logs end identical.
func Example_failoverAndFailback() {
	ctx := context.Background()
	sites := map[string]*mirror.Mirror{}
	dests := map[string]*mirror.LocalDestination{}
	site := func(cfg mirror.MirrorConfig) string {
		host, _, _ := strings.Cut(cfg.BootstrapServers[0], ":")
		return host
	}
	// A site's source is the other site's logs, served in-process.
	sources := func(_ string, cfg mirror.MirrorConfig) (fetcher.Source, mirror.SourceAdmin, error) {
		d := dests[site(cfg)]
		ls := fetcher.NewLocalSource(fetcher.ReadUncommitted)
		for _, t := range d.Topics() {
			for p := range t.Partitions {
				l, _ := d.Log(t.Name, p)
				ls.Add(t.Name, t.TopicID, p, l)
			}
		}
		return ls, metasync.NewLocalSourceAdmin(d, nil), nil
	}
	// The other Mirror is the Peer that PREPARING asks for the LME.
	peers := func(_ string, cfg mirror.MirrorConfig) (mirror.Peer, error) { return sites[site(cfg)], nil }
	for _, id := range []string{"east", "west"} {
		dests[id] = mirror.NewMemoryDestination(id, fetcher.MemoryLogOptions{})
		m, err := mirror.New(mirror.Config{Destination: dests[id], SyncInterval: -1},
			mirror.WithSourceFactory(sources), mirror.WithPeerFactory(peers))
		if err != nil {
			panic(err)
		}
		sites[id] = m
		defer dests[id].Close()
		defer m.Close()
	}
	write := func(id, value string) {
		l, _ := dests[id].Log("orders", 0)
		b, _ := records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]records.Record{{Value: []byte(value)}})
		if _, err := l.AppendAsLeader(b); err != nil {
			panic(err)
		}
	}
	_ = dests["east"].CreateTopic(ctx, mirror.TopicSpec{Name: "orders", TopicID: records.UUID{7}, Partitions: 1})
	eastLog, _ := dests["east"].Log("orders", 0)
	_, _ = eastLog.BumpLeaderEpoch(-1)
	write("east", "o1")
	write("east", "o2")

	east, west := sites["east"], sites["west"]
	_ = west.CreateClusterMirror(ctx, "east-to-west", map[string]string{mirror.KeyBootstrapServers: "east:9092"})
	_, _ = west.StartMirrorTopics(ctx, "east-to-west", []string{"orders"}, mirror.StartOptions{})
	if err := west.WaitForLag(ctx, "east-to-west", []string{"orders"}, 0); err != nil {
		panic(err)
	}
	// Failover: west becomes writable; the LME (epoch 0) is stored, MIRROR_PID_RESET appended.
	_, _ = west.StopMirrorTopics(ctx, "east-to-west", []string{"orders"}, mirror.StopOptions{Wait: true})
	write("west", "o3")
	ds, _ := west.DescribeClusterMirrors(ctx, []string{"east-to-west"}, mirror.DescribeOptions{IncludeStates: true})
	p := ds[0].Topics[0].Partitions[0]
	fmt.Println("west:", p.State, "LME", p.LastMirrorEpoch, "writable", !dests["west"].ReadOnly("orders", 0))

	// Failback: east mirrors west.
	_ = east.CreateClusterMirror(ctx, "west-to-east", map[string]string{mirror.KeyBootstrapServers: "west:9092"})
	_, _ = east.StartMirrorTopics(ctx, "west-to-east", []string{"orders"}, mirror.StartOptions{})
	if err := east.WaitForLag(ctx, "west-to-east", []string{"orders"}, 0); err != nil {
		panic(err)
	}
	westLog, _ := dests["west"].Log("orders", 0)
	ds, _ = east.DescribeClusterMirrors(ctx, []string{"west-to-east"}, mirror.DescribeOptions{IncludeStates: true})
	fmt.Println("east:", ds[0].Topics[0].Partitions[0].State, "end", eastLog.LogEndOffset(), "west end", westLog.LogEndOffset())
	// Output:
	// west: STOPPED LME 0 writable true
	// east: MIRRORING end 4 west end 4
}
