package admin

import (
	"context"
	"time"
)

// RequestObservation is one mirror RPC served by a Handler wrapped with
// ObserveHandler.
type RequestObservation struct {
	// Key and API are the RPC's API key and name ("DescribeClusterMirrors").
	Key int16
	API string
	// Code is the top-level error code answered: CodeOf the returned error, or
	// the response's own top-level ErrorCode (CodeNone on success).
	Code Code
	// Latency is the time the handler took.
	Latency time.Duration
}

// ObserveHandler returns a Handler that serves every RPC with h and then calls
// fn with the RPC's key, name, top-level error code and latency (metrics).
// fn runs on the connection's goroutine and must not block for long. Methods
// added to Handler later pass through to h unobserved until they are wrapped
// here too. ApiVersions and ServerConfig.Extra keys do not go through a
// Handler and are not observed.
func ObserveHandler(h Handler, fn func(RequestObservation)) Handler {
	return observed{Handler: h, fn: fn}
}

type observed struct {
	Handler
	fn func(RequestObservation)
}

// observe calls call and reports it; R is a response with a top-level error.
func observe[R interface{ TopLevelError() (int16, *string) }](o observed, key int16, call func() (R, error)) (R, error) {
	start := time.Now()
	resp, err := call()
	code := CodeOf(err)
	if err == nil {
		var zero R
		if any(resp) != any(zero) {
			c, _ := resp.TopLevelError()
			code = Code(c)
		}
	}
	name := ""
	if a, ok := LookupAPI(key); ok {
		name = a.Name
	}
	o.fn(RequestObservation{Key: key, API: name, Code: code, Latency: time.Since(start)})
	return resp, err
}

// CreateClusterMirror implements Handler.
func (o observed) CreateClusterMirror(ctx context.Context, rc *RequestContext, req *CreateClusterMirrorRequest) (*CreateClusterMirrorResponse, error) {
	return observe(o, KeyCreateClusterMirror, func() (*CreateClusterMirrorResponse, error) { return o.Handler.CreateClusterMirror(ctx, rc, req) })
}

// DeleteClusterMirrors implements Handler.
func (o observed) DeleteClusterMirrors(ctx context.Context, rc *RequestContext, req *DeleteClusterMirrorsRequest) (*DeleteClusterMirrorsResponse, error) {
	return observe(o, KeyDeleteClusterMirrors, func() (*DeleteClusterMirrorsResponse, error) { return o.Handler.DeleteClusterMirrors(ctx, rc, req) })
}

// ListClusterMirrors implements Handler.
func (o observed) ListClusterMirrors(ctx context.Context, rc *RequestContext, req *ListClusterMirrorsRequest) (*ListClusterMirrorsResponse, error) {
	return observe(o, KeyListClusterMirrors, func() (*ListClusterMirrorsResponse, error) { return o.Handler.ListClusterMirrors(ctx, rc, req) })
}

// DescribeClusterMirrors implements Handler.
func (o observed) DescribeClusterMirrors(ctx context.Context, rc *RequestContext, req *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error) {
	return observe(o, KeyDescribeClusterMirrors, func() (*DescribeClusterMirrorsResponse, error) {
		return o.Handler.DescribeClusterMirrors(ctx, rc, req)
	})
}

// StartMirrorTopics implements Handler.
func (o observed) StartMirrorTopics(ctx context.Context, rc *RequestContext, req *StartMirrorTopicsRequest) (*StartMirrorTopicsResponse, error) {
	return observe(o, KeyStartMirrorTopics, func() (*StartMirrorTopicsResponse, error) { return o.Handler.StartMirrorTopics(ctx, rc, req) })
}

// StopMirrorTopics implements Handler.
func (o observed) StopMirrorTopics(ctx context.Context, rc *RequestContext, req *StopMirrorTopicsRequest) (*StopMirrorTopicsResponse, error) {
	return observe(o, KeyStopMirrorTopics, func() (*StopMirrorTopicsResponse, error) { return o.Handler.StopMirrorTopics(ctx, rc, req) })
}

// PauseMirrorTopics implements Handler.
func (o observed) PauseMirrorTopics(ctx context.Context, rc *RequestContext, req *PauseMirrorTopicsRequest) (*PauseMirrorTopicsResponse, error) {
	return observe(o, KeyPauseMirrorTopics, func() (*PauseMirrorTopicsResponse, error) { return o.Handler.PauseMirrorTopics(ctx, rc, req) })
}

// ResumeMirrorTopics implements Handler.
func (o observed) ResumeMirrorTopics(ctx context.Context, rc *RequestContext, req *ResumeMirrorTopicsRequest) (*ResumeMirrorTopicsResponse, error) {
	return observe(o, KeyResumeMirrorTopics, func() (*ResumeMirrorTopicsResponse, error) { return o.Handler.ResumeMirrorTopics(ctx, rc, req) })
}

// ReadMirrorStates implements Handler.
func (o observed) ReadMirrorStates(ctx context.Context, rc *RequestContext, req *ReadMirrorStatesRequest) (*ReadMirrorStatesResponse, error) {
	return observe(o, KeyReadMirrorStates, func() (*ReadMirrorStatesResponse, error) { return o.Handler.ReadMirrorStates(ctx, rc, req) })
}

// WriteMirrorStates implements Handler.
func (o observed) WriteMirrorStates(ctx context.Context, rc *RequestContext, req *WriteMirrorStatesRequest) (*WriteMirrorStatesResponse, error) {
	return observe(o, KeyWriteMirrorStates, func() (*WriteMirrorStatesResponse, error) { return o.Handler.WriteMirrorStates(ctx, rc, req) })
}

// ReadMirrorOffsets implements Handler.
func (o observed) ReadMirrorOffsets(ctx context.Context, rc *RequestContext, req *ReadMirrorOffsetsRequest) (*ReadMirrorOffsetsResponse, error) {
	return observe(o, KeyReadMirrorOffsets, func() (*ReadMirrorOffsetsResponse, error) { return o.Handler.ReadMirrorOffsets(ctx, rc, req) })
}

// BumpLeaderEpochs implements Handler.
func (o observed) BumpLeaderEpochs(ctx context.Context, rc *RequestContext, req *BumpLeaderEpochsRequest) (*BumpLeaderEpochsResponse, error) {
	return observe(o, KeyBumpLeaderEpochs, func() (*BumpLeaderEpochsResponse, error) { return o.Handler.BumpLeaderEpochs(ctx, rc, req) })
}
