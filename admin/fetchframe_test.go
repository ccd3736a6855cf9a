package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponseFixture is a Fetch response at version v with partitions that
// carry records (of lengths around the one- and two-byte uvarint bounds),
// no records, empty records, aborted transactions and a diverging epoch.
func fetchResponseFixture(v int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	resp.SessionID = 7
	lens := [][]int{{126, 0, 127}, {-1, 16383}, {1 << 20, 3}}
	for ti, ls := range lens {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d", ti)
		t.TopicID[0] = byte(ti + 1)
		for pi, n := range ls {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int32(pi), 100, 90, 0
			switch {
			case n > 0:
				p.RecordBatches = bytes.Repeat([]byte{byte(0xff - pi)}, n)
			case n == 0:
				p.RecordBatches = []byte{}
			}
			if pi == 1 {
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 0xff, FirstOffset: -1}}
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 3, 0xffff
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func TestFetchFrameMatchesWholeEncoding(t *testing.T) {
	for v := int16(4); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			resp := fetchResponseFixture(v)
			flexible := resp.IsFlexible()
			want := appendResponseFrame(nil, 42, flexible, resp)
			bufs := fetchFrame(42, flexible, resp)
			require.Equal(t, want, bytes.Join(bufs, nil))
			// The records are the partitions' own slices, not copies, and the
			// response is left as it was.
			require.Equal(t, want, appendResponseFrame(nil, 42, flexible, resp))
			shared := 0
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					for _, b := range bufs {
						if len(p.RecordBatches) > 0 && len(b) == len(p.RecordBatches) && &b[0] == &p.RecordBatches[0] {
							shared++
						}
					}
				}
			}
			require.Equal(t, 5, shared)
		})
	}
}

func TestFetchFrameWithoutRecords(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	resp.ErrorCode = 70
	bufs := fetchFrame(1, true, resp)
	require.Len(t, bufs, 1)
	require.Equal(t, appendResponseFrame(nil, 1, true, resp), bufs[0])
}

func TestRecordFieldPositionsRejectsOtherDifferences(t *testing.T) {
	// A difference that is not an empty-against-null prefix, a length
	// mismatch, or a wrong count must make fetchFrame encode whole.
	_, ok := recordFieldPositions([]byte{1, 2, 3}, []byte{1, 9, 3}, true, 1)
	require.False(t, ok)
	_, ok = recordFieldPositions([]byte{1, 1}, []byte{1, 0, 0}, true, 1)
	require.False(t, ok)
	_, ok = recordFieldPositions([]byte{1, 1, 1}, []byte{1, 0, 0}, true, 1)
	require.False(t, ok)
	_, ok = recordFieldPositions([]byte{5, 0, 0, 0, 0}, []byte{5, 0xff, 0xff, 0xff, 0xff}, false, 2)
	require.False(t, ok)
	at, ok := recordFieldPositions([]byte{5, 0, 0, 0, 0, 1}, []byte{5, 0xff, 0xff, 0xff, 0xff, 1}, false, 1)
	require.True(t, ok)
	require.Equal(t, []int{1}, at)
	_, ok = recordFieldPositions([]byte{5, 0, 0, 0}, []byte{5, 0xff, 0xff, 0xff}, false, 1)
	require.False(t, ok)
}

// TestFetchRecordsWrittenBeforeOnDone: a Fetch response's record batches go
// to the wire as the handler's own slices, and OnDone (registered through
// the context, as the data plane does) runs only after the write: a handler
// that overwrites its buffer in OnDone (a reuse) never corrupts what the
// client got. OnDone also runs when the handler fails.
func TestFetchRecordsWrittenBeforeOnDone(t *testing.T) {
	var done atomic.Int32
	batch := bytes.Repeat([]byte{0xab}, 3<<20)
	extra := []ExtraAPI{{Key: int16(kmsg.Fetch), MinVersion: 4, MaxVersion: 16, Serve: func(ctx context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		rc, ok := RequestContextFrom(ctx)
		if !ok {
			return nil, errors.New("no request context")
		}
		buf := append([]byte(nil), batch...)
		rc.OnDone(func() {
			clear(buf)
			done.Add(1)
		})
		r := req.(*kmsg.FetchRequest)
		if r.MaxWaitMillis == 1 {
			return nil, errors.New("fail on purpose")
		}
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		tp := kmsg.NewFetchResponseTopic()
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = buf
		tp.Partitions = append(tp.Partitions, p)
		resp.Topics = append(resp.Topics, tp)
		return resp, nil
	}}}
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}, Extra: extra})
	rc := dialRaw(t, addr)
	for _, v := range []int16{4, 11, 12, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		require.Equal(t, batch, resp.Topics[0].Partitions[0].RecordBatches)
	}
	require.Eventually(t, func() bool { return done.Load() == 4 }, 5*time.Second, time.Millisecond)
	// A failing handler's OnDone runs too (the server then closes the
	// connection).
	rc2 := dialRaw(t, addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis = 12, 1
	rc2.send(req)
	require.Eventually(t, func() bool { return done.Load() == 5 }, 5*time.Second, time.Millisecond)
}
