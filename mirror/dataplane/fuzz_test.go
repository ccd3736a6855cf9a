package dataplane

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// fuzzPlane is a data plane over a memory destination with one topic and a
// few batches, for the dispatch fuzzer; enforce turns on ACL enforcement
// with a few ACLs that allow some and deny some.
func fuzzPlane(f *testing.F, enforce bool) *DataPlane {
	dst := mirror.NewMemoryDestination("fuzz", fetcher.MemoryLogOptions{SyncEveryAppend: true})
	spec := mirror.TopicSpec{Name: "t", TopicID: records.UUID{9}, Partitions: 2}
	if err := dst.CreateTopic(context.Background(), spec); err != nil {
		f.Fatal(err)
	}
	l, err := dst.Log("t", 0)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := l.BumpLeaderEpoch(-1); err != nil {
		f.Fatal(err)
	}
	if err := l.Append(dataBatch(f, 0, 0, 3, 7, 0, true)); err != nil {
		f.Fatal(err)
	}
	if err := dst.ReplaceMirrorACLs("m", []mirror.ACL{allow(ResourceTopic, "P", "t", OpAll), allow(ResourceGroup, "L", "*", OpRead),
		acl(ResourceTopic, "L", "t", WildcardPrincipal, "*", OpDelete, PermissionDeny)}); err != nil {
		f.Fatal(err)
	}
	dp, err := New(Config{Destination: dst, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, MaxMessageBytes: 1 << 16, EnforceACLs: enforce})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dp.Close() })
	return dp
}

// FuzzDispatch decodes arbitrary bytes as each served request (every
// version) with kmsg, as the admin server does, and serves what decodes:
// no input may panic or hang (the context is canceled, so long-polls end at
// once). The data plane's own decoding is kmsg's; this fuzzes what it does
// with any request kmsg accepts, with and without ACL enforcement.
func FuzzDispatch(f *testing.F) {
	planes := []*DataPlane{fuzzPlane(f, false), fuzzPlane(f, true)}
	for i, a := range apis {
		req := kmsg.RequestForKey(int16(a.key))
		req.SetVersion(a.max)
		f.Add(uint8(i), a.max, req.AppendTo(nil))
	}
	fr := fetchReq(mirror.TopicSpec{Name: "t", TopicID: records.UUID{9}}, 0, 0, nil)
	fr.Version, fr.IsolationLevel = 12, 1
	f.Add(uint8(1), int16(12), fr.AppendTo(nil))
	pr := produceReq("t", 0, dataBatch(f, 0, 0, 2, 5, 0, false))
	f.Add(uint8(0), int16(9), pr.AppendTo(nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, which uint8, version int16, body []byte) {
		a := apis[int(which)%len(apis)]
		if version < a.min || version > a.max {
			version = a.min + int16(uint16(version)%uint16(a.max-a.min+1))
		}
		req := kmsg.RequestForKey(int16(a.key))
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		for i, dp := range planes {
			if i > 0 { // a fresh decode: the handlers narrow requests in place
				req = kmsg.RequestForKey(int16(a.key))
				req.SetVersion(version)
				if req.ReadFrom(body) != nil {
					t.Fatal("decodes once, not twice")
				}
			}
			resp, err := dp.Serve(ctx, req)
			if err == nil && resp == nil {
				t.Fatalf("key %d v%d: nil response without error", a.key, version)
			}
		}
	})
}

// TestHostileFramesCombined throws 400 random and truncated frames of the
// data-plane keys at the combined admin + data plane server, then checks it
// still serves Metadata and Fetch.
func TestHostileFramesCombined(t *testing.T) {
	s := startSite(t, Config{})
	spec := s.topic(t, "t", 1)
	require.NoError(t, s.log(t, "t", 0).Append(dataBatch(t, 0, 0, 3, -1, -1, false)))
	rng := rand.New(rand.NewSource(14))
	var valid [][]byte
	for _, a := range apis {
		req := kmsg.RequestForKey(int16(a.key))
		req.SetVersion(a.max)
		valid = append(valid, kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
	}
	for i := 0; i < 400; i++ {
		c, err := net.Dial("tcp", s.addr)
		require.NoError(t, err)
		f := append([]byte(nil), valid[rng.Intn(len(valid))]...)
		switch rng.Intn(3) {
		case 0: // flip bytes of the body
			for j := 0; j < 1+rng.Intn(4); j++ {
				if k := 12 + rng.Intn(max(len(f)-12, 1)); k < len(f) {
					f[k] = byte(rng.Intn(256))
				}
			}
		case 1: // truncate the body, keep the size
			f = f[:4+rng.Intn(len(f)-4)]
		default: // random body
			body := make([]byte, rng.Intn(64))
			rng.Read(body)
			f = append(f[:12], body...)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		}
		_, _ = c.Write(f)
		_ = c.(*net.TCPConn).CloseWrite() // a truncated frame then ends in EOF
		require.NoError(t, c.SetReadDeadline(time.Now().Add(500*time.Millisecond)))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16)) // a response, a close or the deadline
		_ = c.Close()
	}
	cl := s.client(t)
	md := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	require.Len(t, md.Topics, 1)
	p := request[*kmsg.FetchResponse](t, cl, fetchReq(spec, 0, 0, nil)).Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode)
	require.NotEmpty(t, p.RecordBatches)
}
