// Command kafkaprobe waits until a Kafka cluster serves metadata listing a given number of
// brokers. scripts/kafka/kafka.sh uses it as its Java-free readiness check.
//
// Usage:
//
//	kafkaprobe -brokers 127.0.0.1:19092,127.0.0.1:19093 -want 2 -timeout 60s [-print] [-coordinators]
//
// Every address in -brokers must answer a Metadata request listing at least -want brokers
// before the deadline; the exit status is 0 then, 1 otherwise. With -print the broker list
// of the last answer is printed. With -coordinators it then also waits until the cluster
// finds a group and a transaction coordinator, which makes the brokers create
// __consumer_offsets and __transaction_state up front instead of in the first test that
// needs them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated host:port list, each of which must answer")
	want := flag.Int("want", 1, "number of brokers the metadata must list")
	timeout := flag.Duration("timeout", 60*time.Second, "overall deadline")
	printList := flag.Bool("print", false, "print the brokers of the last answer")
	coordinators := flag.Bool("coordinators", false, "also wait for group and transaction coordinators")
	flag.Parse()
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "kafkaprobe: -brokers is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var lastList string
	for _, addr := range strings.Split(*brokers, ",") {
		list, err := waitOne(ctx, addr, *want)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkaprobe: %s: %v\n", addr, err)
			os.Exit(1)
		}
		lastList = list
	}
	if *coordinators {
		if err := waitCoordinators(ctx, strings.Split(*brokers, ",")); err != nil {
			fmt.Fprintf(os.Stderr, "kafkaprobe: coordinators: %v\n", err)
			os.Exit(1)
		}
	}
	if *printList {
		fmt.Println(lastList)
	}
}

// waitCoordinators polls FindCoordinator for a group key (type 0) and a transactional id
// (type 1) until both resolve.
func waitCoordinators(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0),
		kgo.DialTimeout(2*time.Second), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for _, keyType := range []int8{0, 1} {
		var lastErr error
		for {
			lastErr = findCoordinator(ctx, cl, keyType)
			if lastErr == nil {
				break
			}
			select {
			case <-ctx.Done():
				return errors.Join(ctx.Err(), lastErr)
			case <-tick.C:
			}
		}
	}
	return nil
}

func findCoordinator(ctx context.Context, cl *kgo.Client, keyType int8) error {
	const key = "kmirror-kafkaprobe"
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = key
	req.CoordinatorKeys = []string{key}
	req.CoordinatorType = keyType
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	code := resp.ErrorCode
	if len(resp.Coordinators) > 0 {
		code = resp.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("coordinator type %d: %w", keyType, err)
	}
	return nil
}

// waitOne polls addr until its metadata lists at least want brokers or ctx ends.
func waitOne(ctx context.Context, addr string, want int) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.DialTimeout(2*time.Second), kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		list, n, err := brokerList(ctx, cl)
		if err == nil && n >= want {
			return list, nil
		}
		if err == nil {
			err = fmt.Errorf("metadata lists %d of %d brokers: %s", n, want, list)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return "", errors.Join(ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

func brokerList(ctx context.Context, cl *kgo.Client) (string, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics, brokers only
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", 0, err
	}
	parts := make([]string, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		parts = append(parts, fmt.Sprintf("%d@%s:%d", b.NodeID, b.Host, b.Port))
	}
	sort.Strings(parts)
	cid := ""
	if resp.ClusterID != nil {
		cid = *resp.ClusterID
	}
	return fmt.Sprintf("cluster %s controller %d brokers [%s]", cid, resp.ControllerID, strings.Join(parts, " ")), len(resp.Brokers), nil
}
