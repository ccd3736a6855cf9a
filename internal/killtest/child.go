// Package killtest is the kill test of the durable default (issue 12): RunChild is the
// README's default setup (OpenFileDestination, mirror.New with no stores given) run as a
// child process that the test SIGKILLs at random moments; the test restarts it on the
// same root and checks what survived.
package killtest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/statemachine"
)

// Names the child uses.
const (
	MirrorName = "k"
	// TopicRun keeps MIRRORING to the end; TopicStop is stopped in the child's "stop" mode.
	TopicRun  = "run"
	TopicStop = "stop"
)

// Open opens the default setup on root: a file destination and a Mirror with the
// default (durable) stores, a plain Kafka source (no peer: LME lookups answer -1).
// Extra options are added to the Mirror's.
func Open(root string, extra ...mirror.Option) (*mirror.LocalDestination, *mirror.Mirror, error) {
	dest, err := mirror.OpenFileDestination(root, "dst", fetcher.FileLogOptions{})
	if err != nil {
		return nil, nil, err
	}
	opts := append([]mirror.Option{mirror.WithPeerFactory(func(string, mirror.MirrorConfig) (mirror.Peer, error) { return nil, nil })}, extra...)
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: -1, FetchIdleWait: time.Millisecond}, opts...)
	if err != nil {
		_ = dest.Close()
		return nil, nil, err
	}
	return dest, m, nil
}

// RunChild opens the default setup on root, reports on w the mirrors it lists at once
// ("listed <names>"), makes sure mirror k exists ("created") and both topics are started
// ("started"), and in mode "stop" stops topic stop and waits for STOPPED ("stopped").
// Every state change is reported as "state <topic>-<partition> <STATE>" once durable,
// so the test can kill the child inside PREPARING or STOPPING. Then it runs until ctx
// ends (the test kills it long before).
func RunChild(ctx context.Context, w io.Writer, root, bootstrap, mode string) error {
	var mu sync.Mutex
	_, m, err := Open(root, mirror.WithEvents(func(c mirror.StateChange) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "state %s-%d %s\n", c.Topic, c.Partition, c.To)
	}))
	if err != nil {
		return err
	}
	ls, err := m.ListClusterMirrors(ctx, mirror.ListFilter{})
	if err != nil {
		return err
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
	}
	fmt.Fprintf(w, "listed %s\n", strings.Join(names, ","))
	if _, ok := m.Controller().Mirror(MirrorName); !ok {
		if err := m.CreateClusterMirror(ctx, MirrorName, map[string]string{
			mirror.KeyBootstrapServers: bootstrap, mirror.KeyFetchWaitMaxMs: "20"}); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "created")
	for _, topic := range []string{TopicRun, TopicStop} {
		if _, ok := m.Controller().Topic(topic); ok {
			continue
		}
		res, err := m.StartMirrorTopics(ctx, MirrorName, []string{topic}, mirror.StartOptions{})
		if err != nil {
			return err
		}
		if res[0].Err != nil {
			return res[0].Err
		}
	}
	fmt.Fprintln(w, "started")
	if mode == "stop" {
		if err := stop(ctx, m); err != nil {
			return err
		}
		fmt.Fprintln(w, "stopped")
	}
	<-ctx.Done()
	return m.Close()
}

// stop stops topic stop, or, when an earlier run acknowledged the stop already, waits
// for the partitions to finish it.
func stop(ctx context.Context, m *mirror.Mirror) error {
	if ts, ok := m.Controller().Topic(TopicStop); ok && ts.Desired == statemachine.DesiredStopped {
		return m.WaitForStates(ctx, MirrorName, []string{TopicStop}, statemachine.Stopped)
	}
	res, err := m.StopMirrorTopics(ctx, MirrorName, []string{TopicStop}, mirror.StopOptions{Wait: true})
	if err != nil {
		return err
	}
	return res[0].Err
}
