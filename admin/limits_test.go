package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyStringsFrame is a ListClusterMirrors request frame (size prefix
// included) whose first filter holds n strings of strLen bytes, padded by
// the IncludeTopicNames byte and the tag count: the shape that made one
// request cost 24 times its size before the element limit.
func emptyStringsFrame(corr int32, n, strLen int) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = kbin.AppendInt16(b, KeyListClusterMirrors)
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, nil)
	b = append(b, 0) // header tags
	b = kbin.AppendUvarint(b, uint32(n+1))
	s := make([]byte, strLen)
	for range n {
		b = kbin.AppendCompactString(b, string(s))
	}
	b = append(b, 0, 0, 0, 0) // two null filters, IncludeTopicNames, tags
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestDecodeElementLimit(t *testing.T) {
	req := NewPtrListClusterMirrorsRequest()
	req.SourceClusterIdFilter = []string{"a", "b", "c"}
	req.MirrorNameFilter = []string{"d", "e"}
	enc := req.AppendTo(nil)
	require.NoError(t, NewPtrListClusterMirrorsRequest().ReadFromLimit(enc, 5))
	err := NewPtrListClusterMirrorsRequest().ReadFromLimit(enc, 4)
	require.ErrorIs(t, err, ErrTooLarge)
	require.NotErrorIs(t, err, ErrMalformed)
	require.NoError(t, NewPtrListClusterMirrorsRequest().ReadFrom(enc))

	// Over the wire: INVALID_REQUEST, and the connection stays usable.
	h := &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		return req.ResponseKind(), nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h, MaxDecodedElements: 100})
	rc := dialRaw(t, addr)
	_, err = rc.c.Write(emptyStringsFrame(7, 101, 0))
	require.NoError(t, err)
	frame, err := rc.readFrame()
	require.NoError(t, err)
	r := kbin.Reader{Src: frame}
	require.Equal(t, int32(7), r.Int32())
	kmsg.SkipTags(&r)
	resp := NewPtrListClusterMirrorsResponse()
	require.NoError(t, resp.ReadFrom(r.Src))
	require.Equal(t, int16(CodeInvalidRequest), resp.ErrorCode)
	rc.roundTrip(NewPtrListClusterMirrorsRequest())
}

func TestServerLimitsValidation(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{MaxInFlightRequests: -1}, {MaxInFlightBytes: -1}, {MaxDecodedElements: -1}, {MaxExtraRequestSize: -1},
	} {
		cfg.Handler = UnimplementedHandler{}
		_, err := NewServer(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	given := ServerConfig{Handler: UnimplementedHandler{}, MaxRequestSize: 1 << 30}
	require.NoError(t, given.validate())
	cfg := given.withDefaults()
	require.Equal(t, int64(2<<30), cfg.MaxInFlightBytes, "the budget must hold the largest frame")
	require.Equal(t, DefaultIdleTimeout, cfg.IdleTimeout)
	require.Zero(t, given.MaxInFlightBytes, "withDefaults works on a copy")
	cfg = ServerConfig{MaxRequestSize: 1 << 20, IdleTimeout: -1}.withDefaults()
	require.Zero(t, cfg.IdleTimeout, "negative disables")
	require.Equal(t, DefaultMaxInFlightRequests, cfg.MaxInFlightRequests)
	require.Error(t, ServerConfig{}.validate(), "a Handler is required")
}

func TestTemporaryAcceptError(t *testing.T) {
	op := func(err error) error {
		return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", err)}
	}
	require.True(t, temporaryAcceptError(op(syscall.EMFILE)))
	require.True(t, temporaryAcceptError(op(syscall.ENFILE)))
	require.True(t, temporaryAcceptError(op(syscall.ECONNABORTED)))
	require.False(t, temporaryAcceptError(op(net.ErrClosed)))
	require.False(t, temporaryAcceptError(fmt.Errorf("other")))
	var b acceptBackoff
	var got []time.Duration
	for range 10 {
		got = append(got, b.next())
	}
	require.Equal(t, 5*time.Millisecond, got[0])
	require.Equal(t, 10*time.Millisecond, got[1])
	require.Equal(t, time.Second, got[9])
	b.reset()
	require.Equal(t, 5*time.Millisecond, b.next())
}

// flakyListener fails Accept with EMFILE fails times before it delegates.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	l.fails--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestServeSurvivesEMFILE(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	srv, err := NewServer(ServerConfig{Handler: UnimplementedHandler{}, OnError: func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}})
	require.NoError(t, err)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(&flakyListener{Listener: inner, fails: 5}) }()
	rc := dialRaw(t, inner.Addr().String())
	resp := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	mu.Lock()
	require.Len(t, reported, 5)
	require.ErrorIs(t, reported[0], syscall.EMFILE)
	require.ErrorIs(t, reported[0], ErrAccept, "a host tells a failing Accept from a client's doing by ErrAccept")
	mu.Unlock()
	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-done, ErrServerClosed)
}

// TestSlowlorisCut: a partial size prefix, a partial frame and an idle
// connection are each closed after their timeout, while a connection sending
// whole requests keeps being served.
func TestSlowlorisCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}, ReadTimeout: timeout, IdleTimeout: 2 * timeout})
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	cases := map[string][]byte{
		"partial size prefix": frame[:2],
		"partial frame":       frame[:len(frame)-1],
		"idle":                nil,
	}
	for name, partial := range cases {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, addr)
			start := time.Now()
			if partial != nil {
				_, err := rc.c.Write(partial)
				require.NoError(t, err)
			}
			rc.expectClosed()
			took := time.Since(start)
			want := timeout
			if partial == nil {
				want = 2 * timeout
			}
			require.GreaterOrEqual(t, took, want-50*time.Millisecond, "cut too early")
			require.Less(t, took, want+3*time.Second, "cut too late")
		})
	}
	// A connection that sends whole requests is not cut by the read timeout.
	rc := dialRaw(t, addr)
	for range 3 {
		rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
	}
}

// TestInFlightBounds: with one request slot, a second connection's request
// waits until the first one's handler returns.
func TestInFlightBounds(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan int, 2)
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		entered <- int(rc.CorrelationID)
		<-release
		return req.ResponseKind(), nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h, MaxInFlightRequests: 1})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.corr, b.corr = 10, 20
	a.send(NewPtrListClusterMirrorsRequest())
	require.Equal(t, 11, <-entered)
	b.send(NewPtrListClusterMirrorsRequest())
	select {
	case c := <-entered:
		t.Fatalf("request %d entered the handler beyond MaxInFlightRequests", c)
	case <-time.After(200 * time.Millisecond): // the second request must not start meanwhile
	}
	close(release)
	require.Equal(t, 21, <-entered)
	_, err := a.readFrame()
	require.NoError(t, err)
	_, err = b.readFrame()
	require.NoError(t, err)
}

// reports collects a server's OnError reports.
type reports struct {
	mu   sync.Mutex
	errs []error
	grew chan struct{}
}

func newReports() *reports { return &reports{grew: make(chan struct{}, 1<<10)} }

func (r *reports) add(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	select {
	case r.grew <- struct{}{}:
	default:
	}
}

// waitFor waits (at most 10 s) for a report that pred accepts.
func (r *reports) waitFor(t *testing.T, pred func(error) bool) error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		for _, err := range r.errs {
			if pred(err) {
				r.mu.Unlock()
				return err
			}
		}
		r.mu.Unlock()
		select {
		case <-r.grew:
		case <-timeout:
			t.Fatalf("no such report in %v", r.errs)
		}
	}
}

// TestBudgetChargedAsBytesArrive: frames announced and stalled after their
// key hold only what they sent, so a request as large as the whole frame
// half of the budget is still served; a request whose memory is not free
// waits at most until its read deadline and is then closed and reported
// (ErrBudget); a frame over its key's limit is closed right after the key.
func TestBudgetChargedAsBytesArrive(t *testing.T) {
	rep := newReports()
	const readTimeout = 500 * time.Millisecond
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if rc.CorrelationID == 2 {
			entered <- struct{}{}
			<-block
		}
		return req.ResponseKind(), nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h, MaxRequestSize: 1 << 20, MaxInFlightBytes: 2 << 20,
		ReadTimeout: readTimeout, OnError: rep.add})
	// 50 announcements of 1 MiB frames, stalled after the key.
	for range 50 {
		rc := dialRaw(t, addr)
		_, err := rc.c.Write(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint32(nil, 1<<20), uint16(KeyListClusterMirrors)))
		require.NoError(t, err)
	}
	big := emptyStringsFrame(1, 1<<20-4096, 0) // nearly all of the frame half (1 MiB)
	rc := dialRaw(t, addr)
	_, err := rc.c.Write(big)
	require.NoError(t, err)
	_, err = rc.readFrame()
	require.NoError(t, err, "stalled announcements hold no budget worth the name")

	// A 1 MiB request being handled holds its megabyte; a second one
	// cannot get its memory before its read deadline: closed and reported.
	holder := dialRaw(t, addr)
	_, err = holder.c.Write(emptyStringsFrame(2, 1<<20-64, 0))
	require.NoError(t, err)
	<-entered
	waiter := dialRaw(t, addr)
	_, err = waiter.c.Write(big)
	require.NoError(t, err)
	waiter.expectClosed()
	got := rep.waitFor(t, func(err error) bool { return errors.Is(err, ErrBudget) })
	require.Contains(t, got.Error(), "within the read timeout")
	close(block)
	_, err = holder.readFrame()
	require.NoError(t, err)

	// Over the key's limit: closed after the size prefix and the key.
	over := dialRaw(t, addr)
	_, err = over.c.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20+1), 0, 18))
	require.NoError(t, err)
	over.expectClosed()
	rep.waitFor(t, func(err error) bool { return strings.Contains(err.Error(), "limit") })
}
