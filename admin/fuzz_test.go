package admin

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkDecode decodes data into m; on success the value must survive an
// encode/decode cycle unchanged and its encoding must be stable.
func checkDecode(t *testing.T, m message, data []byte) {
	if err := m.ReadFrom(data); err != nil {
		return
	}
	enc := m.AppendTo(nil)
	again := fresh(m)
	require.NoError(t, again.ReadFrom(enc), "%s: re-decode of own encoding", typeName(m))
	require.Equal(t, m, again, typeName(m))
	require.True(t, bytes.Equal(enc, again.AppendTo(nil)), "%s: unstable encoding", typeName(m))
}

// seedRPC adds the minimal and full encodings of key's request (selector 0)
// and response (selector 1) to the corpus.
func seedRPC(f *testing.F, key int16, prefix []byte) {
	a, _ := LookupAPI(key)
	for sel, m := range []message{a.newRequest().(message), a.newResponse().(message)} {
		for _, enc := range [][]byte{m.AppendTo(nil), fullInstance(m).AppendTo(nil)} {
			f.Add(append(append(append([]byte(nil), prefix...), byte(sel)), enc...))
			f.Add(append(append(append([]byte(nil), prefix...), byte(sel)), enc[:len(enc)/2]...))
		}
	}
}

// fuzzRPC fuzzes the request (first byte even) and response (odd) decoders
// of one RPC.
func fuzzRPC(f *testing.F, key int16) {
	seedRPC(f, key, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		if data[0]&1 == 0 {
			req, _ := NewRequest(key, 0)
			checkDecode(t, req.(message), data[1:])
		} else {
			resp, _ := NewResponse(key, 0)
			checkDecode(t, resp.(message), data[1:])
		}
	})
}

func FuzzCreateClusterMirror(f *testing.F)    { fuzzRPC(f, KeyCreateClusterMirror) }
func FuzzDeleteClusterMirrors(f *testing.F)   { fuzzRPC(f, KeyDeleteClusterMirrors) }
func FuzzListClusterMirrors(f *testing.F)     { fuzzRPC(f, KeyListClusterMirrors) }
func FuzzDescribeClusterMirrors(f *testing.F) { fuzzRPC(f, KeyDescribeClusterMirrors) }
func FuzzStartMirrorTopics(f *testing.F)      { fuzzRPC(f, KeyStartMirrorTopics) }
func FuzzStopMirrorTopics(f *testing.F)       { fuzzRPC(f, KeyStopMirrorTopics) }
func FuzzPauseMirrorTopics(f *testing.F)      { fuzzRPC(f, KeyPauseMirrorTopics) }
func FuzzResumeMirrorTopics(f *testing.F)     { fuzzRPC(f, KeyResumeMirrorTopics) }
func FuzzReadMirrorStates(f *testing.F)       { fuzzRPC(f, KeyReadMirrorStates) }
func FuzzWriteMirrorStates(f *testing.F)      { fuzzRPC(f, KeyWriteMirrorStates) }
func FuzzReadMirrorOffsets(f *testing.F)      { fuzzRPC(f, KeyReadMirrorOffsets) }
func FuzzBumpLeaderEpochs(f *testing.F)       { fuzzRPC(f, KeyBumpLeaderEpochs) }

// FuzzAllDecoders covers all 24 decoders in one fuzzer: byte 0 picks the
// RPC (index in the API table), byte 1 request (even) or response (odd).
func FuzzAllDecoders(f *testing.F) {
	for i, a := range apiTable {
		seedRPC(f, a.Key, []byte{byte(i)})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		a := apiTable[int(data[0])%len(apiTable)]
		var m message
		if data[1]&1 == 0 {
			m = a.newRequest().(message)
		} else {
			m = a.newResponse().(message)
		}
		checkDecode(t, m, data[2:])
	})
}

// FuzzServerFrame feeds request frames (without the size prefix) to the
// server's frame handler: it must never panic, and any answer must be a
// well-formed frame.
func FuzzServerFrame(f *testing.F) {
	for _, a := range apiTable {
		req := fullInstance(a.newRequest().(message)).(kmsg.Request)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fz")).AppendRequest(nil, req, 7)
		f.Add(frame[4:])
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	f.Add(kmsg.NewRequestFormatter().AppendRequest(nil, av, 1)[4:])
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	srv, err := NewServer(ServerConfig{Handler: &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		return req.ResponseKind(), nil
	}}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, frame []byte) {
		rep, keep, err := srv.handleFrame(frame, "User:fuzz", "fuzz")
		rep.finish()
		out := bytes.Join(rep.bufs, nil)
		if rep.bufs == nil {
			require.False(t, keep)
			require.Error(t, err)
			return
		}
		require.GreaterOrEqual(t, len(out), 8)
		require.Equal(t, uint32(len(out)-4), binary.BigEndian.Uint32(out))
		r := kbin.Reader{Src: out[4:]}
		require.Equal(t, int32(binary.BigEndian.Uint32(frame[4:8])), r.Int32())
	})
}
