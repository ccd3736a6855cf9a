package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClientOpts returns the kgo options a client needs to send the mirror
// RPCs: kgo refuses request keys missing from its MaxVersions.
func ClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.MaxVersions(Versions())}
}

// Client sends the mirror RPCs with a kgo client. The kgo client must be
// built with ClientOpts (or kgo.MaxVersions(Versions())). Requests go to any
// broker of the client (the receiving broker forwards to the controller or
// fans out, spec §11); use kgo.Client.Broker(id) with RequestWith to target
// one node. Safe for concurrent use.
type Client struct {
	cl *kgo.Client
}

// NewClient wraps cl.
func NewClient(cl *kgo.Client) *Client { return &Client{cl: cl} }

// topLevel is implemented by every response.
type topLevel interface {
	TopLevelError() (int16, *string)
}

// do sends req and returns the typed response; a transport failure returns
// (nil, err), a non-zero top-level ErrorCode returns (resp, *Error).
func do[P interface {
	*T
	topLevel
}, T any](ctx context.Context, c *Client, req kmsg.Request) (P, error) {
	kresp, err := c.cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, ok := kresp.(P)
	if !ok {
		return nil, Errorf(CodeUnknownServerError, "unexpected response type %T", kresp)
	}
	code, msg := resp.TopLevelError()
	return resp, ErrorFromResponse(code, msg)
}

// CreateClusterMirror sends a CreateClusterMirror request.
func (c *Client) CreateClusterMirror(ctx context.Context, req *CreateClusterMirrorRequest) (*CreateClusterMirrorResponse, error) {
	return do[*CreateClusterMirrorResponse](ctx, c, req)
}

// DeleteClusterMirrors sends a DeleteClusterMirrors request.
func (c *Client) DeleteClusterMirrors(ctx context.Context, req *DeleteClusterMirrorsRequest) (*DeleteClusterMirrorsResponse, error) {
	return do[*DeleteClusterMirrorsResponse](ctx, c, req)
}

// ListClusterMirrors sends a ListClusterMirrors request.
func (c *Client) ListClusterMirrors(ctx context.Context, req *ListClusterMirrorsRequest) (*ListClusterMirrorsResponse, error) {
	return do[*ListClusterMirrorsResponse](ctx, c, req)
}

// DescribeClusterMirrors sends a DescribeClusterMirrors request.
func (c *Client) DescribeClusterMirrors(ctx context.Context, req *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error) {
	return do[*DescribeClusterMirrorsResponse](ctx, c, req)
}

// StartMirrorTopics sends a StartMirrorTopics request.
func (c *Client) StartMirrorTopics(ctx context.Context, req *StartMirrorTopicsRequest) (*StartMirrorTopicsResponse, error) {
	return do[*StartMirrorTopicsResponse](ctx, c, req)
}

// StopMirrorTopics sends a StopMirrorTopics request.
func (c *Client) StopMirrorTopics(ctx context.Context, req *StopMirrorTopicsRequest) (*StopMirrorTopicsResponse, error) {
	return do[*StopMirrorTopicsResponse](ctx, c, req)
}

// RecoverMirrorTopics sends a RecoverMirrorTopics request.
func (c *Client) RecoverMirrorTopics(ctx context.Context, req *RecoverMirrorTopicsRequest) (*RecoverMirrorTopicsResponse, error) {
	return do[*RecoverMirrorTopicsResponse](ctx, c, req)
}

// PauseMirrorTopics sends a PauseMirrorTopics request.
func (c *Client) PauseMirrorTopics(ctx context.Context, req *PauseMirrorTopicsRequest) (*PauseMirrorTopicsResponse, error) {
	return do[*PauseMirrorTopicsResponse](ctx, c, req)
}

// ResumeMirrorTopics sends a ResumeMirrorTopics request.
func (c *Client) ResumeMirrorTopics(ctx context.Context, req *ResumeMirrorTopicsRequest) (*ResumeMirrorTopicsResponse, error) {
	return do[*ResumeMirrorTopicsResponse](ctx, c, req)
}

// ReadMirrorStates sends a ReadMirrorStates request.
func (c *Client) ReadMirrorStates(ctx context.Context, req *ReadMirrorStatesRequest) (*ReadMirrorStatesResponse, error) {
	return do[*ReadMirrorStatesResponse](ctx, c, req)
}

// WriteMirrorStates sends a WriteMirrorStates request.
func (c *Client) WriteMirrorStates(ctx context.Context, req *WriteMirrorStatesRequest) (*WriteMirrorStatesResponse, error) {
	return do[*WriteMirrorStatesResponse](ctx, c, req)
}

// ReadMirrorOffsets sends a ReadMirrorOffsets request.
func (c *Client) ReadMirrorOffsets(ctx context.Context, req *ReadMirrorOffsetsRequest) (*ReadMirrorOffsetsResponse, error) {
	return do[*ReadMirrorOffsetsResponse](ctx, c, req)
}

// BumpLeaderEpochs sends a BumpLeaderEpochs request.
func (c *Client) BumpLeaderEpochs(ctx context.Context, req *BumpLeaderEpochsRequest) (*BumpLeaderEpochsResponse, error) {
	return do[*BumpLeaderEpochsResponse](ctx, c, req)
}
