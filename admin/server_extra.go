package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ExtraAPI serves one standard Kafka API key (one kmsg knows, such as Fetch or
// Produce) on the same listener as the mirror RPCs, so that a host can mount a
// data plane next to the admin RPCs on one port. The server decodes the
// request with kmsg, passes it to Serve, and advertises [MinVersion,
// MaxVersion] in ApiVersions.
type ExtraAPI struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	// Serve answers a decoded request of Key at a version in range. It must
	// return promptly once ctx is canceled (Server.Close cancels it). A
	// response with a nil error is sent (its version is set by the server);
	// (nil, ErrNoResponse) sends nothing (Produce with acks 0); any other
	// error, or a panic, closes the connection, as Kafka does for a request
	// it cannot answer. Authorization is Serve's (rc carries the principal).
	Serve func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error)
}

// ErrNoResponse, returned by ExtraAPI.Serve, tells the server to send no
// response for this request.
var ErrNoResponse = errors.New("admin: no response")

// ErrBadExtraAPI is wrapped by NewServer's error for an invalid ExtraAPI.
var ErrBadExtraAPI = errors.New("admin: invalid extra API")

// checkExtra validates ServerConfig.Extra and indexes it by key.
func checkExtra(extra []ExtraAPI) (map[int16]ExtraAPI, error) {
	out := make(map[int16]ExtraAPI, len(extra))
	for _, e := range extra {
		bad := func(why string) error {
			return fmt.Errorf("%w: key %d versions %d-%d: %s", ErrBadExtraAPI, e.Key, e.MinVersion, e.MaxVersion, why)
		}
		req := kmsg.RequestForKey(e.Key)
		switch {
		case e.Key == apiVersionsKey:
			return nil, bad("ApiVersions is the server's own")
		case req == nil:
			return nil, bad("not a key kmsg knows")
		case e.Serve == nil:
			return nil, bad("nil Serve")
		case e.MinVersion < 0 || e.MinVersion > e.MaxVersion || e.MaxVersion > req.MaxVersion():
			return nil, bad(fmt.Sprintf("versions outside 0-%d or reversed", req.MaxVersion()))
		}
		if _, ok := LookupAPI(e.Key); ok {
			return nil, bad("a mirror RPC key")
		}
		if _, dup := out[e.Key]; dup {
			return nil, bad("listed twice")
		}
		out[e.Key] = e
	}
	return out, nil
}

// handleExtra serves one frame of an ExtraAPI key; r is positioned after the
// client id of the request header. The reply's done runs what the handler
// registered with RequestContext.OnDone; the caller runs it once it is done
// with the reply (it is run here when there is none).
func (s *Server) handleExtra(e ExtraAPI, h header, r kbin.Reader, principal, remote string) (out reply, keep bool, err error) {
	if h.version < e.MinVersion || h.version > e.MaxVersion {
		return reply{}, false, &errClose{fmt.Sprintf("unsupported request key %d version %d from %s", h.key, h.version, remote)}
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return reply{}, false, &errClose{fmt.Sprintf("truncated request header tags from %s", remote)}
	}
	if derr := req.ReadFrom(r.Src); derr != nil {
		return reply{}, false, fmt.Errorf("admin: key %d v%d request from %s: %w", h.key, h.version, remote, derr)
	}
	rc := &RequestContext{Principal: principal, ClientID: h.clientID, RemoteAddr: remote,
		Key: h.key, Version: h.version, CorrelationID: h.correlation}
	resp, err := s.callExtra(e, rc, req)
	if errors.Is(err, ErrNoResponse) {
		rc.finish()
		return reply{}, true, nil
	}
	if err == nil && (resp == nil || resp.Key() != h.key) {
		err = fmt.Errorf("admin: extra handler for key %d returned no response of its key", h.key)
	}
	if err != nil {
		rc.finish()
		return reply{}, false, err
	}
	resp.SetVersion(h.version)
	out = reply{done: rc.finish}
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		out.bufs = fetchFrame(h.correlation, req.IsFlexible(), f)
	} else {
		out.bufs = net.Buffers{appendResponseFrame(make([]byte, 0, responseSizeHint(resp)), h.correlation, req.IsFlexible(), resp)}
	}
	return out, true, nil
}

// reply is a response frame as buffers to write, and what to run once the
// server is done with them (nil: nothing).
type reply struct {
	bufs net.Buffers
	done func()
}

// finish runs r's done, if any.
func (r reply) finish() {
	if r.done != nil {
		r.done()
	}
}

// responseSizeHint is a capacity for the frame of resp that fits it in one allocation
// when resp carries record batches (Fetch): growing the frame from nil copied every
// fetched byte two or three times. Other responses are small.
func responseSizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 512
	}
	n := 512
	for _, t := range f.Topics {
		n += 64 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 128 + len(p.RecordBatches) + 24*len(p.AbortedTransactions)
		}
	}
	return n
}

// callExtra runs Serve, turning a panic into an error.
func (s *Server) callExtra(e ExtraAPI, rc *RequestContext, req kmsg.Request) (resp kmsg.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("admin: extra handler panic on key %d from %s: %v", rc.Key, rc.RemoteAddr, p)
		}
	}()
	return e.Serve(context.WithValue(s.ctx, requestContextKey{}, rc), rc, req)
}

// requestContextKey keys the RequestContext in the context an ExtraAPI's
// Serve gets.
type requestContextKey struct{}

// RequestContextFrom returns the RequestContext of the request whose Serve
// got ctx (an ExtraAPI's), so that code below Serve that has only the
// context can register RequestContext.OnDone.
func RequestContextFrom(ctx context.Context) (*RequestContext, bool) {
	rc, ok := ctx.Value(requestContextKey{}).(*RequestContext)
	return rc, ok
}

// extraKeys lists the ExtraAPI keys for ApiVersions, sorted by key.
func (s *Server) extraKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(s.extra))
	for _, e := range s.extra {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: e.Key, MinVersion: e.MinVersion, MaxVersion: e.MaxVersion})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}
