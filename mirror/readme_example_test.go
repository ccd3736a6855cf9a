package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Example_readme is the library snippet of the README ("Use it"), run against an
// embedded Kafka (kfake) as the primary: the lines between the README markers are
// the README's code block, line for line (TestReadmeSnippetIsTheExample checks it).
func Example_readme() {
	primary, root, batch, done := readmeSetup()
	defer done()

	// README:BEGIN
	dest, _ := mirror.OpenFileDestination(root, "dr-site", fetcher.FileLogOptions{})
	defer dest.Close()
	m, _ := mirror.New(mirror.Config{Destination: dest})
	defer m.Close() // before dest.Close: the Mirror closes the state stores it opened

	ctx := context.Background()
	_ = m.CreateClusterMirror(ctx, "from-primary", map[string]string{"bootstrap.servers": primary})
	_, _ = m.StartMirrorTopics(ctx, "from-primary", []string{"orders"}, mirror.StartOptions{})
	_ = m.WaitForLag(ctx, "from-primary", []string{"orders"}, 0) // copied up to the source's end

	// Client writes go through dest.Produce: refused with READ_ONLY_TOPIC while the topic mirrors.
	_, err := dest.Produce(ctx, "orders", 0, batch)
	fmt.Println("read-only while mirroring:", errors.Is(err, admin.CodeReadOnlyTopic.Err()))

	// Failover: stop mirroring; partitions end STOPPED and writable, their last mirror epoch persisted,
	// every open transaction closed by an ABORT marker (no committed record is lost, LSO = HW).
	_, _ = m.StopMirrorTopics(ctx, "from-primary", []string{"orders"}, mirror.StopOptions{Wait: true})
	off, err := dest.Produce(ctx, "orders", 0, batch) // accepted now, after the MIRROR_PID_RESET barrier
	fmt.Println("written after the stop at offset", off, err)
	// README:END

	// Output:
	// read-only while mirroring: true
	// written after the stop at offset 3 <nil>
}

// readmeSetup starts the README example's primary, an embedded Kafka holding two
// records in orders-0, and returns its address, a fresh directory for the site, a
// client batch of one record, and what to call when the example is done.
func readmeSetup() (primary, root string, batch []byte, done func()) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	primary = strings.Join(src.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(primary), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, v := range []string{"o1", "o2"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "kmirror-readme-")
	if err != nil {
		panic(err)
	}
	batch, err = records.BuildBatch(records.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]records.Record{{Value: []byte("o3")}})
	if err != nil {
		panic(err)
	}
	return primary, filepath.Join(dir, "kmirror"), batch, func() {
		src.Close()
		_ = os.RemoveAll(dir)
	}
}
