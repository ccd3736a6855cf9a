package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// funcHandler routes every RPC to one function.
type funcHandler struct {
	fn func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error)
}

func hcall[R any](h *funcHandler, ctx context.Context, rc *RequestContext, req kmsg.Request) (*R, error) {
	resp, err := h.fn(ctx, rc, req)
	if resp == nil {
		return nil, err
	}
	return any(resp).(*R), err
}

func (h *funcHandler) CreateClusterMirror(ctx context.Context, rc *RequestContext, req *CreateClusterMirrorRequest) (*CreateClusterMirrorResponse, error) {
	return hcall[CreateClusterMirrorResponse](h, ctx, rc, req)
}
func (h *funcHandler) DeleteClusterMirrors(ctx context.Context, rc *RequestContext, req *DeleteClusterMirrorsRequest) (*DeleteClusterMirrorsResponse, error) {
	return hcall[DeleteClusterMirrorsResponse](h, ctx, rc, req)
}
func (h *funcHandler) ListClusterMirrors(ctx context.Context, rc *RequestContext, req *ListClusterMirrorsRequest) (*ListClusterMirrorsResponse, error) {
	return hcall[ListClusterMirrorsResponse](h, ctx, rc, req)
}
func (h *funcHandler) DescribeClusterMirrors(ctx context.Context, rc *RequestContext, req *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error) {
	return hcall[DescribeClusterMirrorsResponse](h, ctx, rc, req)
}
func (h *funcHandler) StartMirrorTopics(ctx context.Context, rc *RequestContext, req *StartMirrorTopicsRequest) (*StartMirrorTopicsResponse, error) {
	return hcall[StartMirrorTopicsResponse](h, ctx, rc, req)
}
func (h *funcHandler) StopMirrorTopics(ctx context.Context, rc *RequestContext, req *StopMirrorTopicsRequest) (*StopMirrorTopicsResponse, error) {
	return hcall[StopMirrorTopicsResponse](h, ctx, rc, req)
}
func (h *funcHandler) PauseMirrorTopics(ctx context.Context, rc *RequestContext, req *PauseMirrorTopicsRequest) (*PauseMirrorTopicsResponse, error) {
	return hcall[PauseMirrorTopicsResponse](h, ctx, rc, req)
}
func (h *funcHandler) ResumeMirrorTopics(ctx context.Context, rc *RequestContext, req *ResumeMirrorTopicsRequest) (*ResumeMirrorTopicsResponse, error) {
	return hcall[ResumeMirrorTopicsResponse](h, ctx, rc, req)
}
func (h *funcHandler) RecoverMirrorTopics(ctx context.Context, rc *RequestContext, req *RecoverMirrorTopicsRequest) (*RecoverMirrorTopicsResponse, error) {
	return hcall[RecoverMirrorTopicsResponse](h, ctx, rc, req)
}
func (h *funcHandler) ReadMirrorStates(ctx context.Context, rc *RequestContext, req *ReadMirrorStatesRequest) (*ReadMirrorStatesResponse, error) {
	return hcall[ReadMirrorStatesResponse](h, ctx, rc, req)
}
func (h *funcHandler) WriteMirrorStates(ctx context.Context, rc *RequestContext, req *WriteMirrorStatesRequest) (*WriteMirrorStatesResponse, error) {
	return hcall[WriteMirrorStatesResponse](h, ctx, rc, req)
}
func (h *funcHandler) ReadMirrorOffsets(ctx context.Context, rc *RequestContext, req *ReadMirrorOffsetsRequest) (*ReadMirrorOffsetsResponse, error) {
	return hcall[ReadMirrorOffsetsResponse](h, ctx, rc, req)
}
func (h *funcHandler) BumpLeaderEpochs(ctx context.Context, rc *RequestContext, req *BumpLeaderEpochsRequest) (*BumpLeaderEpochsResponse, error) {
	return hcall[BumpLeaderEpochsResponse](h, ctx, rc, req)
}

// startServer serves h on 127.0.0.1 and stops it (checking Serve's result)
// at the end of the test.
func startServer(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	srv, err := NewServer(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, ErrServerClosed)
	})
	return srv, ln.Addr().String()
}

func newKgo(t *testing.T, addr string) *Client {
	t.Helper()
	opts := append(ClientOpts(), kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return NewClient(cl)
}

// clientCalls sends a request with the typed Client method of its key.
var clientCalls = map[int16]func(context.Context, *Client, kmsg.Request) (kmsg.Response, error){
	KeyCreateClusterMirror: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.CreateClusterMirror(ctx, r.(*CreateClusterMirrorRequest)))
	},
	KeyDeleteClusterMirrors: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.DeleteClusterMirrors(ctx, r.(*DeleteClusterMirrorsRequest)))
	},
	KeyListClusterMirrors: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.ListClusterMirrors(ctx, r.(*ListClusterMirrorsRequest)))
	},
	KeyDescribeClusterMirrors: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.DescribeClusterMirrors(ctx, r.(*DescribeClusterMirrorsRequest)))
	},
	KeyStartMirrorTopics: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.StartMirrorTopics(ctx, r.(*StartMirrorTopicsRequest)))
	},
	KeyStopMirrorTopics: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.StopMirrorTopics(ctx, r.(*StopMirrorTopicsRequest)))
	},
	KeyRecoverMirrorTopics: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.RecoverMirrorTopics(ctx, r.(*RecoverMirrorTopicsRequest)))
	},
	KeyPauseMirrorTopics: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.PauseMirrorTopics(ctx, r.(*PauseMirrorTopicsRequest)))
	},
	KeyResumeMirrorTopics: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.ResumeMirrorTopics(ctx, r.(*ResumeMirrorTopicsRequest)))
	},
	KeyReadMirrorStates: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.ReadMirrorStates(ctx, r.(*ReadMirrorStatesRequest)))
	},
	KeyWriteMirrorStates: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.WriteMirrorStates(ctx, r.(*WriteMirrorStatesRequest)))
	},
	KeyReadMirrorOffsets: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.ReadMirrorOffsets(ctx, r.(*ReadMirrorOffsetsRequest)))
	},
	KeyBumpLeaderEpochs: func(ctx context.Context, c *Client, r kmsg.Request) (kmsg.Response, error) {
		return typed(c.BumpLeaderEpochs(ctx, r.(*BumpLeaderEpochsRequest)))
	},
}

// setCodes sets every ErrorCode below the top level to an allowed code of
// key, cycling through the list, and the top-level one to 0.
func setCodes(resp kmsg.Response, key int16) {
	allowed := AllowedErrors(key)
	i := 0
	var walk func(v reflect.Value, top bool)
	walk = func(v reflect.Value, top bool) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), top)
			}
		case reflect.Struct:
			for j := 0; j < v.NumField(); j++ {
				f := v.Type().Field(j)
				switch {
				case f.Name == "ErrorCode" && top:
					v.Field(j).SetInt(0)
				case f.Name == "ErrorCode":
					v.Field(j).SetInt(int64(allowed[i%len(allowed)]))
					i++
				case f.IsExported():
					walk(v.Field(j), false)
				}
			}
		case reflect.Slice:
			for j := 0; j < v.Len(); j++ {
				walk(v.Index(j), false)
			}
		}
	}
	walk(reflect.ValueOf(resp), true)
}

// TestEveryRPCOverKgo sends every RPC with a real kgo client and checks the
// handler saw exactly the request and the client got exactly the answer.
func TestEveryRPCOverKgo(t *testing.T) {
	require.Len(t, clientCalls, len(apiTable))
	var mu sync.Mutex
	answers := map[int16]kmsg.Response{}
	seen := map[int16]kmsg.Request{}
	h := &funcHandler{fn: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[req.Key()] = req
		resp := answers[req.Key()]
		for _, c := range responseCodes(resp) {
			if !ErrorAllowed(req.Key(), c) {
				return nil, Errorf(CodeUnknownServerError, "handler answered code %v not allowed for key %d", c, req.Key())
			}
		}
		if rc.Principal != "User:ANONYMOUS" || rc.ClientID == nil || *rc.ClientID != "kmirror-test" {
			return nil, Errorf(CodeInvalidRequest, "bad request context %+v", rc)
		}
		return resp, nil
	}}
	_, addr := startServer(t, ServerConfig{Handler: h})
	opts := append(ClientOpts(), kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.ClientID("kmirror-test"))
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	c := NewClient(cl)
	ctx := context.Background()
	for _, a := range APIs() {
		req := fullInstance(a.newRequest().(message)).(kmsg.Request)
		resp := fullInstance(a.newResponse().(message)).(kmsg.Response)
		setCodes(resp, a.Key)
		// kgo honours ThrottleTimeMs by delaying the next request; keep it 0.
		resp.(kmsg.SetThrottleResponse).SetThrottle(0)
		mu.Lock()
		answers[a.Key] = resp
		mu.Unlock()
		got, err := clientCalls[a.Key](ctx, c, req)
		require.NoError(t, err, a.Name)
		require.Equal(t, resp, got, a.Name)
		mu.Lock()
		require.Equal(t, req, seen[a.Key], a.Name)
		mu.Unlock()
	}

	// A handler error becomes the top-level code, and the typed client
	// returns it as an *Error alongside the response.
	h.fn = func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
		return nil, NewError(CodeUnknownClusterMirror, "no mirror m1")
	}
	resp, err := c.PauseMirrorTopics(ctx, NewPtrPauseMirrorTopicsRequest())
	require.ErrorIs(t, err, CodeUnknownClusterMirror.Err())
	require.Equal(t, "no mirror m1", *resp.ErrorMessage)
	require.Empty(t, resp.Topics)

	// A plain error maps to UNKNOWN_SERVER_ERROR with its text.
	h.fn = func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
		return nil, errors.New("disk on fire")
	}
	_, err = c.ListClusterMirrors(ctx, NewPtrListClusterMirrorsRequest())
	require.ErrorIs(t, err, CodeUnknownServerError.Err())
	require.Contains(t, err.Error(), "disk on fire")
}

// rawConn speaks the wire protocol directly.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c}
}

func (r *rawConn) send(req kmsg.Request) int32 {
	r.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, r.corr)
	_, err := r.c.Write(frame)
	require.NoError(r.t, err)
	return r.corr
}

// readFrame reads one response frame; io.EOF when the server closed.
func (r *rawConn) readFrame() ([]byte, error) {
	require.NoError(r.t, r.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	return r.readFrameNoDeadline()
}

// readFrameNoDeadline is readFrame with the connection's deadline as set.
func (r *rawConn) readFrameNoDeadline() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r.c, buf)
	return buf, err
}

// roundTrip sends req and decodes the response (header v1 for flexible
// versions, except ApiVersions).
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	corr := r.send(req)
	frame, err := r.readFrame()
	require.NoError(r.t, err)
	b := kbin.Reader{Src: frame}
	require.Equal(r.t, corr, b.Int32())
	if req.Key() != apiVersionsKey && req.IsFlexible() {
		kmsg.SkipTags(&b)
	}
	resp := req.ResponseKind()
	require.NoError(r.t, resp.ReadFrom(b.Src))
	return resp
}

func (r *rawConn) expectClosed() {
	_, err := r.readFrame()
	require.Error(r.t, err)
	var ne net.Error
	require.False(r.t, errors.As(err, &ne) && ne.Timeout(), "server did not close: %v", err)
}

func TestAPIVersions(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}})
	rc := dialRaw(t, addr)
	maxV := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	for v := int16(0); v <= maxV; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror-test", "1.0"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		require.Equal(t, int16(0), resp.ErrorCode)
		var got []int16
		for _, k := range resp.ApiKeys {
			got = append(got, k.ApiKey)
			if k.ApiKey == apiVersionsKey {
				require.Equal(t, maxV, k.MaxVersion)
				continue
			}
			a, ok := LookupAPI(k.ApiKey)
			require.True(t, ok)
			require.Equal(t, a.MinVersion, k.MinVersion)
			require.Equal(t, a.MaxVersion, k.MaxVersion)
		}
		want := []int16{apiVersionsKey, 10094, 10095, 10096, 10098, 10099, 10100, 10101, 10102, 10103, 10104, 10105, 10106, 10107}
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		require.Equal(t, want, got)
	}
	// Too new a version: answered at v0 with UNSUPPORTED_VERSION.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = maxV + 1
	corr := rc.send(req)
	frame, err := rc.readFrame()
	require.NoError(t, err)
	b := kbin.Reader{Src: frame}
	require.Equal(t, corr, b.Int32())
	resp := kmsg.NewPtrApiVersionsResponse()
	require.NoError(t, resp.ReadFrom(b.Src))
	require.Equal(t, int16(CodeUnsupportedVersion), resp.ErrorCode)
	require.NotEmpty(t, resp.ApiKeys)
}

func TestServerProtocolErrors(t *testing.T) {
	var panics sync.WaitGroup
	h := &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if r, ok := req.(*CreateClusterMirrorRequest); ok && r.MirrorName == "panic" {
			panic("handler bug")
		}
		return req.ResponseKind(), nil
	}}
	panics.Add(1)
	var reported sync.Once
	_, addr := startServer(t, ServerConfig{Handler: h, MaxRequestSize: 1 << 10, OnError: func(err error) {
		if strings.Contains(err.Error(), "handler panic") {
			reported.Do(panics.Done)
		}
	}})

	// Malformed body: INVALID_REQUEST in a proper response; conn stays.
	rc := dialRaw(t, addr)
	bad := &rawRequest{key: KeyWriteMirrorStates, body: []byte{0x00}}
	resp := rc.roundTrip(bad).(*WriteMirrorStatesResponse)
	require.Equal(t, int16(CodeInvalidRequest), resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "malformed")
	require.IsType(t, &ReadMirrorOffsetsResponse{}, rc.roundTrip(NewPtrReadMirrorOffsetsRequest()))

	// Handler panic: UNKNOWN_SERVER_ERROR, then the connection closes.
	p := NewPtrCreateClusterMirrorRequest()
	p.MirrorName = "panic"
	cresp := rc.roundTrip(p).(*CreateClusterMirrorResponse)
	require.Equal(t, int16(CodeUnknownServerError), cresp.ErrorCode)
	rc.expectClosed()
	panics.Wait()

	// Unknown key, unsupported version, oversized and negative frames close.
	for _, r := range []kmsg.Request{
		&rawRequest{key: 3, body: []byte{0}},
		&rawRequest{key: KeyReadMirrorStates, version: 1, body: []byte{1, 1, 0}},
	} {
		rc = dialRaw(t, addr)
		rc.send(r)
		rc.expectClosed()
	}
	for _, size := range []uint32{1 << 11, 0xffffffff, 3} {
		rc = dialRaw(t, addr)
		_, err := rc.c.Write(binary.BigEndian.AppendUint32(nil, size))
		require.NoError(t, err)
		rc.expectClosed()
	}

	// The server still serves.
	rc = dialRaw(t, addr)
	require.IsType(t, &ReadMirrorOffsetsResponse{}, rc.roundTrip(NewPtrReadMirrorOffsetsRequest()))
}

// rawRequest is a request with an arbitrary key, version and body.
type rawRequest struct {
	key, version int16
	body         []byte
}

func (r *rawRequest) Key() int16               { return r.key }
func (r *rawRequest) MaxVersion() int16        { return 0 }
func (r *rawRequest) SetVersion(v int16)       { r.version = v }
func (r *rawRequest) GetVersion() int16        { return r.version }
func (r *rawRequest) IsFlexible() bool         { return true }
func (r *rawRequest) AppendTo(b []byte) []byte { return append(b, r.body...) }
func (r *rawRequest) ReadFrom([]byte) error    { return nil }
func (r *rawRequest) ResponseKind() kmsg.Response {
	resp, _ := NewResponse(r.key, r.version)
	return resp
}

func TestServerCloseWaits(t *testing.T) {
	base := runtime.NumGoroutine()
	started := make(chan struct{})
	h := &funcHandler{fn: func(ctx context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		close(started)
		<-ctx.Done() // a slow handler that honours cancellation
		return nil, ctx.Err()
	}}
	srv, err := NewServer(ServerConfig{Handler: h})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	rc := dialRaw(t, ln.Addr().String())
	rc.send(NewPtrListClusterMirrorsRequest())
	<-started
	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-done, ErrServerClosed)
	require.ErrorIs(t, srv.Serve(ln), ErrServerClosed)
	require.NoError(t, srv.Close())
	_ = rc.c.Close()
	waitGoroutines(t, base)
}

// waitGoroutines waits until the goroutine count is back to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d > baseline %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // poll interval of the deadline loop
	}
}

func TestNewServerValidation(t *testing.T) {
	_, err := NewServer(ServerConfig{})
	require.Error(t, err)
	_, err = NewServer(ServerConfig{Handler: UnimplementedHandler{}, MaxRequestSize: -1})
	require.Error(t, err)
}
