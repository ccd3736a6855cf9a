package adminhandler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
)

// StopMirrorTopics implements admin.Handler (spec §11.6). It answers once the desired
// state is STOPPED; the partitions reach STOPPED asynchronously (poll
// DescribeClusterMirrors). StateOffset is not forwarded (see DeleteClusterMirrors).
func (h *handler) StopMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.StopMirrorTopicsRequest) (*admin.StopMirrorTopicsResponse, error) {
	return serveLifecycle[admin.StopMirrorTopicsResponse](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.StopMirrorTopics(ctx, req.MirrorName, names, mirror.StopOptions{Patterns: req.Patterns})
	})
}

// PauseMirrorTopics implements admin.Handler (spec §11.7).
func (h *handler) PauseMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.PauseMirrorTopicsRequest) (*admin.PauseMirrorTopicsResponse, error) {
	return serveLifecycle[admin.PauseMirrorTopicsResponse](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.PauseMirrorTopics(ctx, req.MirrorName, names, mirror.LifecycleOptions{})
	})
}

// RecoverMirrorTopics implements admin.Handler (spec §14.10): the FAILED partitions
// of the topics restart with their retry attempts reset.
func (h *handler) RecoverMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.RecoverMirrorTopicsRequest) (*admin.RecoverMirrorTopicsResponse, error) {
	return serveLifecycle[admin.RecoverMirrorTopicsResponse](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.RecoverMirrorTopics(ctx, req.MirrorName, names)
	})
}

// ResumeMirrorTopics implements admin.Handler (spec §11.7).
func (h *handler) ResumeMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.ResumeMirrorTopicsRequest) (*admin.ResumeMirrorTopicsResponse, error) {
	return serveLifecycle[admin.ResumeMirrorTopicsResponse](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.ResumeMirrorTopics(ctx, req.MirrorName, names, mirror.LifecycleOptions{})
	})
}

// The per-topic lifecycle RPCs (stop, pause, resume, recover) have requests and
// responses of one shape (the generated types differ only by name); these are that
// shape, so that serveLifecycle serves them all.
type (
	lifecycleTopic = struct {
		TopicName   string
		UnknownTags kmsg.Tags
	}
	lifecycleOutcome = struct {
		TopicName    string
		ErrorCode    int16
		ErrorMessage *string
		UnknownTags  kmsg.Tags
	}
	lifecycleResponse[R any] = struct {
		Version        int16
		ThrottleTimeMs int32
		ErrorCode      int16
		ErrorMessage   *string
		Topics         []R
		UnknownTags    kmsg.Tags
	}
)

// serveLifecycle runs one per-topic lifecycle RPC: op on the request's topic names
// within the request's timeout (TimeoutMs, when positive), then one response topic per
// outcome, its error as code and message. A failure of the whole request is the
// returned wire error.
func serveLifecycle[P ~lifecycleResponse[R], R ~lifecycleOutcome, Q ~lifecycleTopic](h *handler, ctx context.Context, rc *admin.RequestContext,
	timeoutMs int32, topics []Q, op func(ctx context.Context, names []string) ([]mirror.TopicResult, error)) (*P, error) {
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, lifecycleTopic(t).TopicName)
	}
	ctx, cancel := withTimeout(ctx, timeoutMs)
	defer cancel()
	res, err := op(ctx, names)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	var out []R
	for _, r := range res {
		code, msg := h.codeAndMessage(rc, r.Err)
		out = append(out, R(lifecycleOutcome{TopicName: r.Topic, ErrorCode: code, ErrorMessage: msg}))
	}
	resp := P(lifecycleResponse[R]{Topics: out})
	return &resp, nil
}
