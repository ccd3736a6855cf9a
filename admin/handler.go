package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestContext describes who sent a request and how.
type RequestContext struct {
	Principal     string  // e.g. "User:ANONYMOUS" or "User:CN=broker-1"
	ClientID      *string // the request header's client id (nullable)
	RemoteAddr    string  // the peer address, as text
	Key           int16   // API key of the request
	Version       int16   // API version of the request
	CorrelationID int32

	done []func() // see OnDone
}

// OnDone registers fn to run once the server is done with the response to
// this request: after writing it to the connection, or after dropping it
// (an error, a closed connection). An ExtraAPI handler uses it to reuse
// memory its response refers to, such as the record buffers of a Fetch
// response, which the server writes as they are. fn runs on the
// connection's goroutine, after Serve returned.
func (rc *RequestContext) OnDone(fn func()) {
	rc.done = append(rc.done, fn)
}

// finish runs the functions registered with OnDone.
func (rc *RequestContext) finish() {
	for _, fn := range rc.done {
		fn()
	}
	rc.done = nil
}

// Handler serves the mirror RPCs. The Server calls one method per request,
// sequentially per connection and concurrently across connections, so
// implementations must be safe for concurrent use.
//
// A method returns the response, or an error: (nil, err) is answered with an
// empty response whose top-level ErrorCode is CodeOf(err) and ErrorMessage is
// the error text (an error wins over a response returned with it); a response
// with a nil error is sent as is (its version is
// set by the server). Methods must return promptly once ctx is canceled
// (Server.Close cancels it and waits). Authorization (see Authorizer) has
// already been applied: requests reach the handler only with the mirrors and
// topics the principal may act on.
type Handler interface {
	CreateClusterMirror(ctx context.Context, rc *RequestContext, req *CreateClusterMirrorRequest) (*CreateClusterMirrorResponse, error)
	DeleteClusterMirrors(ctx context.Context, rc *RequestContext, req *DeleteClusterMirrorsRequest) (*DeleteClusterMirrorsResponse, error)
	ListClusterMirrors(ctx context.Context, rc *RequestContext, req *ListClusterMirrorsRequest) (*ListClusterMirrorsResponse, error)
	DescribeClusterMirrors(ctx context.Context, rc *RequestContext, req *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error)
	StartMirrorTopics(ctx context.Context, rc *RequestContext, req *StartMirrorTopicsRequest) (*StartMirrorTopicsResponse, error)
	StopMirrorTopics(ctx context.Context, rc *RequestContext, req *StopMirrorTopicsRequest) (*StopMirrorTopicsResponse, error)
	PauseMirrorTopics(ctx context.Context, rc *RequestContext, req *PauseMirrorTopicsRequest) (*PauseMirrorTopicsResponse, error)
	ResumeMirrorTopics(ctx context.Context, rc *RequestContext, req *ResumeMirrorTopicsRequest) (*ResumeMirrorTopicsResponse, error)
	RecoverMirrorTopics(ctx context.Context, rc *RequestContext, req *RecoverMirrorTopicsRequest) (*RecoverMirrorTopicsResponse, error)
	ReadMirrorStates(ctx context.Context, rc *RequestContext, req *ReadMirrorStatesRequest) (*ReadMirrorStatesResponse, error)
	WriteMirrorStates(ctx context.Context, rc *RequestContext, req *WriteMirrorStatesRequest) (*WriteMirrorStatesResponse, error)
	ReadMirrorOffsets(ctx context.Context, rc *RequestContext, req *ReadMirrorOffsetsRequest) (*ReadMirrorOffsetsResponse, error)
	BumpLeaderEpochs(ctx context.Context, rc *RequestContext, req *BumpLeaderEpochsRequest) (*BumpLeaderEpochsResponse, error)
}

// errNotImplemented is what UnimplementedHandler answers.
var errNotImplemented = NewError(CodeInvalidRequest, "not implemented by this server")

// UnimplementedHandler answers every RPC with INVALID_REQUEST "not
// implemented". Embed it in a Handler that serves only some RPCs.
type UnimplementedHandler struct{}

// CreateClusterMirror implements Handler.
func (UnimplementedHandler) CreateClusterMirror(context.Context, *RequestContext, *CreateClusterMirrorRequest) (*CreateClusterMirrorResponse, error) {
	return nil, errNotImplemented
}

// DeleteClusterMirrors implements Handler.
func (UnimplementedHandler) DeleteClusterMirrors(context.Context, *RequestContext, *DeleteClusterMirrorsRequest) (*DeleteClusterMirrorsResponse, error) {
	return nil, errNotImplemented
}

// ListClusterMirrors implements Handler.
func (UnimplementedHandler) ListClusterMirrors(context.Context, *RequestContext, *ListClusterMirrorsRequest) (*ListClusterMirrorsResponse, error) {
	return nil, errNotImplemented
}

// DescribeClusterMirrors implements Handler.
func (UnimplementedHandler) DescribeClusterMirrors(context.Context, *RequestContext, *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error) {
	return nil, errNotImplemented
}

// StartMirrorTopics implements Handler.
func (UnimplementedHandler) StartMirrorTopics(context.Context, *RequestContext, *StartMirrorTopicsRequest) (*StartMirrorTopicsResponse, error) {
	return nil, errNotImplemented
}

// StopMirrorTopics implements Handler.
func (UnimplementedHandler) StopMirrorTopics(context.Context, *RequestContext, *StopMirrorTopicsRequest) (*StopMirrorTopicsResponse, error) {
	return nil, errNotImplemented
}

// RecoverMirrorTopics implements Handler.
func (UnimplementedHandler) RecoverMirrorTopics(context.Context, *RequestContext, *RecoverMirrorTopicsRequest) (*RecoverMirrorTopicsResponse, error) {
	return nil, errNotImplemented
}

// PauseMirrorTopics implements Handler.
func (UnimplementedHandler) PauseMirrorTopics(context.Context, *RequestContext, *PauseMirrorTopicsRequest) (*PauseMirrorTopicsResponse, error) {
	return nil, errNotImplemented
}

// ResumeMirrorTopics implements Handler.
func (UnimplementedHandler) ResumeMirrorTopics(context.Context, *RequestContext, *ResumeMirrorTopicsRequest) (*ResumeMirrorTopicsResponse, error) {
	return nil, errNotImplemented
}

// ReadMirrorStates implements Handler.
func (UnimplementedHandler) ReadMirrorStates(context.Context, *RequestContext, *ReadMirrorStatesRequest) (*ReadMirrorStatesResponse, error) {
	return nil, errNotImplemented
}

// WriteMirrorStates implements Handler.
func (UnimplementedHandler) WriteMirrorStates(context.Context, *RequestContext, *WriteMirrorStatesRequest) (*WriteMirrorStatesResponse, error) {
	return nil, errNotImplemented
}

// ReadMirrorOffsets implements Handler.
func (UnimplementedHandler) ReadMirrorOffsets(context.Context, *RequestContext, *ReadMirrorOffsetsRequest) (*ReadMirrorOffsetsResponse, error) {
	return nil, errNotImplemented
}

// BumpLeaderEpochs implements Handler.
func (UnimplementedHandler) BumpLeaderEpochs(context.Context, *RequestContext, *BumpLeaderEpochsRequest) (*BumpLeaderEpochsResponse, error) {
	return nil, errNotImplemented
}

// typed converts a handler's typed response into a kmsg.Response without
// producing a non-nil interface holding a nil pointer.
func typed[P interface {
	*T
	kmsg.Response
}, T any](p P, err error) (kmsg.Response, error) {
	if p == nil {
		return nil, err
	}
	return p, err
}

// Dispatch calls the Handler method for req. It is what the Server uses
// after authorization; hosts can use it to serve requests that arrive by
// other means. An unknown request type yields INVALID_REQUEST.
func Dispatch(ctx context.Context, h Handler, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *CreateClusterMirrorRequest:
		return typed(h.CreateClusterMirror(ctx, rc, r))
	case *DeleteClusterMirrorsRequest:
		return typed(h.DeleteClusterMirrors(ctx, rc, r))
	case *ListClusterMirrorsRequest:
		return typed(h.ListClusterMirrors(ctx, rc, r))
	case *DescribeClusterMirrorsRequest:
		return typed(h.DescribeClusterMirrors(ctx, rc, r))
	case *StartMirrorTopicsRequest:
		return typed(h.StartMirrorTopics(ctx, rc, r))
	case *StopMirrorTopicsRequest:
		return typed(h.StopMirrorTopics(ctx, rc, r))
	case *PauseMirrorTopicsRequest:
		return typed(h.PauseMirrorTopics(ctx, rc, r))
	case *ResumeMirrorTopicsRequest:
		return typed(h.ResumeMirrorTopics(ctx, rc, r))
	case *RecoverMirrorTopicsRequest:
		return typed(h.RecoverMirrorTopics(ctx, rc, r))
	case *ReadMirrorStatesRequest:
		return typed(h.ReadMirrorStates(ctx, rc, r))
	case *WriteMirrorStatesRequest:
		return typed(h.WriteMirrorStates(ctx, rc, r))
	case *ReadMirrorOffsetsRequest:
		return typed(h.ReadMirrorOffsets(ctx, rc, r))
	case *BumpLeaderEpochsRequest:
		return typed(h.BumpLeaderEpochs(ctx, rc, r))
	}
	return nil, Errorf(CodeInvalidRequest, "request key %d is not a mirror RPC", req.Key())
}
