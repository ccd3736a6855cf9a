package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHostileFrames throws 10,000 random, truncated, oversized and
// amplification frames (many empty strings, the cheapest element to send) at
// the server over raw TCP, then checks that it still serves and that its
// goroutines are gone once the connections are.
func TestHostileFrames(t *testing.T) {
	const frames = 10000
	const maxSize = 1 << 12
	h := &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		return req.ResponseKind(), nil
	}}
	const maxElems = 64
	srv, err := NewServer(ServerConfig{Handler: h, MaxRequestSize: maxSize, MaxDecodedElements: maxElems})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, ErrServerClosed)
	}()
	base := runtime.NumGoroutine() // server running, no connections

	rng := rand.New(rand.NewSource(1279))
	valid := make([][]byte, 0, len(apiTable))
	for _, a := range apiTable {
		valid = append(valid, fullInstance(a.newRequest().(message)).AppendTo(nil))
	}
	var conn net.Conn
	dial := func() {
		if conn != nil {
			_ = conn.Close()
		}
		conn, err = net.Dial("tcp", addr)
		require.NoError(t, err)
	}
	dial()
	defer func() { _ = conn.Close() }()
	// readAnswer reads one response frame or notices the close.
	readAnswer := func() (frame []byte, closed bool) {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "server neither answered nor closed")
			return nil, true
		}
		frame = make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err := io.ReadFull(conn, frame)
		require.NoError(t, err)
		return frame, false
	}
	header := func(key, version int16, corr int32) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, corr)
		b = kbin.AppendNullableString(b, nil)
		return append(b, 0) // header tags
	}
	send := func(body []byte) {
		_, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		if err != nil { // the server may already have closed on us
			dial()
		}
	}
	var answered, closes int
	for i := 0; i < frames; i++ {
		corr := int32(i)
		switch kind := rng.Intn(22); {
		case kind < 12: // valid header, random or mutated body: always answered
			a := apiTable[rng.Intn(len(apiTable))]
			var body []byte
			if rng.Intn(2) == 0 {
				body = make([]byte, rng.Intn(64))
				rng.Read(body)
			} else {
				v := valid[rng.Intn(len(valid))]
				body = append([]byte(nil), v[:rng.Intn(len(v)+1)]...)
				if len(body) > 0 && rng.Intn(2) == 0 {
					body[rng.Intn(len(body))] ^= byte(1 + rng.Intn(255))
				}
			}
			send(append(header(a.Key, 0, corr), body...))
			frame, closed := readAnswer()
			require.False(t, closed, "frame %d: valid header must be answered", i)
			r := kbin.Reader{Src: frame}
			require.Equal(t, corr, r.Int32())
			kmsg.SkipTags(&r)
			resp, _ := NewResponse(a.Key, 0)
			require.NoError(t, resp.ReadFrom(r.Src), "frame %d: response must decode", i)
			answered++
		case kind < 16: // random header and body: answered or closed
			body := make([]byte, rng.Intn(48))
			rng.Read(body)
			send(body)
			if _, closed := readAnswer(); closed {
				closes++
				dial()
			} else {
				answered++
			}
		case kind < 18: // oversized or negative size
			size := uint32(maxSize + 1 + rng.Intn(1<<20))
			if rng.Intn(2) == 0 {
				size = 0x80000000 | uint32(rng.Uint32())
			}
			_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, size))
			_, closed := readAnswer()
			require.True(t, closed)
			closes++
			dial()
		case kind >= 20: // amplification: answered, INVALID_REQUEST past the element limit
			n := rng.Intn(maxSize - 64)
			_, _ = conn.Write(emptyStringsFrame(corr, n, 0))
			frame, closed := readAnswer()
			require.False(t, closed, "frame %d: amplification frame must be answered", i)
			r := kbin.Reader{Src: frame}
			require.Equal(t, corr, r.Int32())
			kmsg.SkipTags(&r)
			resp := NewPtrListClusterMirrorsResponse()
			require.NoError(t, resp.ReadFrom(r.Src))
			if n > maxElems {
				require.Equal(t, int16(CodeInvalidRequest), resp.ErrorCode, "frame %d: %d elements", i, n)
			} else {
				require.Zero(t, resp.ErrorCode, "frame %d: %d elements", i, n)
			}
			answered++
		default: // frame cut short by a client that goes away
			body := header(KeyReadMirrorStates, 0, corr)
			_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body)+100)))
			_, _ = conn.Write(body)
			closes++
			dial()
		}
	}
	t.Logf("%d frames: %d answered, %d connection closes", frames, answered, closes)
	require.Greater(t, answered, frames/2)

	// Still serving valid requests.
	rc := &rawConn{t: t, c: conn}
	resp := rc.roundTrip(NewPtrReadMirrorStatesRequest()).(*ReadMirrorStatesResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	_ = conn.Close()
	waitGoroutines(t, base)
}
