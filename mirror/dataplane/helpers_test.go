package dataplane

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// site is a memory destination served by a data plane on the admin server
// over loopback TCP.
type site struct {
	dst  *mirror.LocalDestination
	dp   *DataPlane
	addr string
}

func startSite(t testing.TB, cfg Config) *site {
	t.Helper()
	return startSiteNamed(t, "cluster-"+t.Name(), cfg)
}

// startSiteNamed is startSite with the destination's cluster id.
func startSiteNamed(t testing.TB, clusterID string, cfg Config) *site {
	t.Helper()
	dst := mirror.NewMemoryDestination(clusterID, fetcher.MemoryLogOptions{SyncEveryAppend: true})
	t.Cleanup(func() { _ = dst.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.Destination = dst
	cfg.AdvertisedHost, cfg.AdvertisedPort = "127.0.0.1", int32(ln.Addr().(*net.TCPAddr).Port)
	dp, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dp.Close()) })
	srv, err := admin.NewServer(admin.ServerConfig{Handler: admin.UnimplementedHandler{}, Extra: dp.APIs()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, admin.ErrServerClosed)
	})
	return &site{dst: dst, dp: dp, addr: ln.Addr().String()}
}

func (s *site) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.addr), kgo.MetadataMinAge(10 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// topic creates a topic directly in the destination (epoch 0 logs).
func (s *site) topic(t *testing.T, name string, parts int32) mirror.TopicSpec {
	t.Helper()
	spec := mirror.TopicSpec{Name: name, TopicID: records.UUID{1, byte(len(name)), name[0]}, Partitions: parts}
	require.NoError(t, s.dst.CreateTopic(context.Background(), spec))
	for p := int32(0); p < parts; p++ {
		_, err := s.log(t, name, p).BumpLeaderEpoch(-1)
		require.NoError(t, err)
	}
	return spec
}

func (s *site) log(t *testing.T, topic string, p int32) fetcher.Log {
	t.Helper()
	l, err := s.dst.Log(topic, p)
	require.NoError(t, err)
	return l
}

// dataBatch is a batch of n records "v<i>" at base, optionally idempotent
// or transactional.
func dataBatch(t testing.TB, base int64, epoch int32, n int, pid int64, seq int32, txn bool) []byte {
	return dataBatchEpoch(t, base, epoch, n, pid, 0, seq, txn)
}

// dataBatchEpoch is dataBatch with a producer epoch.
func dataBatchEpoch(t testing.TB, base int64, epoch int32, n int, pid int64, pepoch int16, seq int32, txn bool) []byte {
	t.Helper()
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("v%d", base+int64(i)))
	}
	spec := records.BatchSpec{BaseOffset: base, PartitionLeaderEpoch: epoch, ProducerID: pid, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: 1000 + base, Transactional: txn}
	if pid >= 0 {
		spec.ProducerEpoch, spec.BaseSequence = pepoch, seq
	}
	b, err := records.BuildBatch(spec, recs)
	require.NoError(t, err)
	return b
}

func marker(pid int64, ct records.ControlType) []byte {
	return records.BuildControlBatch(records.ControlBatchSpec{ProducerID: pid, ProducerEpoch: 0, Type: ct, Timestamp: 5})
}

// request sends one kmsg request to the site over kgo and returns the
// response.
func request[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	require.NoError(t, err)
	return resp.(R)
}

func produceReq(topic string, p int32, recs []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, recs
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

func fetchReq(spec mirror.TopicSpec, p int32, offset int64, mod func(*kmsg.FetchRequestTopicPartition)) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = spec.Name, spec.TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
	if mod != nil {
		mod(&rp)
	}
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}
