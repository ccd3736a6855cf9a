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
	return serveLifecycle[admin.StopMirrorTopicsResponse, admin.StopMirrorTopicsResponseTopic, admin.StopMirrorTopicsRequestTopic,
		admin.StopMirrorTopicsResponseTopicPartition, admin.StopMirrorTopicsResponseTopicPartitionOpenTransaction](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.StopMirrorTopics(ctx, req.MirrorName, names, mirror.StopOptions{Patterns: req.Patterns, ValidateOnly: req.ValidateOnly})
	})
}

// PauseMirrorTopics implements admin.Handler (spec §11.7).
func (h *handler) PauseMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.PauseMirrorTopicsRequest) (*admin.PauseMirrorTopicsResponse, error) {
	return serveLifecycle[admin.PauseMirrorTopicsResponse, admin.PauseMirrorTopicsResponseTopic, admin.PauseMirrorTopicsRequestTopic,
		admin.PauseMirrorTopicsResponseTopicPartition, admin.PauseMirrorTopicsResponseTopicPartitionOpenTransaction](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.PauseMirrorTopics(ctx, req.MirrorName, names, mirror.LifecycleOptions{ValidateOnly: req.ValidateOnly})
	})
}

// RecoverMirrorTopics implements admin.Handler (spec §14.10): the FAILED partitions
// of the topics restart with their retry attempts reset.
func (h *handler) RecoverMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.RecoverMirrorTopicsRequest) (*admin.RecoverMirrorTopicsResponse, error) {
	return serveLifecycle[admin.RecoverMirrorTopicsResponse, admin.RecoverMirrorTopicsResponseTopic, admin.RecoverMirrorTopicsRequestTopic,
		admin.RecoverMirrorTopicsResponseTopicPartition, admin.RecoverMirrorTopicsResponseTopicPartitionOpenTransaction](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.RecoverMirrorTopics(ctx, req.MirrorName, names, mirror.RecoverOptions{ValidateOnly: req.ValidateOnly, AllowTruncation: req.AllowTruncation})
	})
}

// ResumeMirrorTopics implements admin.Handler (spec §11.7).
func (h *handler) ResumeMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.ResumeMirrorTopicsRequest) (*admin.ResumeMirrorTopicsResponse, error) {
	return serveLifecycle[admin.ResumeMirrorTopicsResponse, admin.ResumeMirrorTopicsResponseTopic, admin.ResumeMirrorTopicsRequestTopic,
		admin.ResumeMirrorTopicsResponseTopicPartition, admin.ResumeMirrorTopicsResponseTopicPartitionOpenTransaction](h, ctx, rc, req.TimeoutMs, req.Topics, func(ctx context.Context, names []string) ([]mirror.TopicResult, error) {
		return h.m.ResumeMirrorTopics(ctx, req.MirrorName, names, mirror.LifecycleOptions{ValidateOnly: req.ValidateOnly})
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
	lifecycleOutcome[PP any] = struct {
		TopicName    string
		ErrorCode    int16
		ErrorMessage *string
		Partitions   []PP
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
// outcome, its error as code and message and its plan (version 1). A failure of the
// whole request is the returned wire error.
func serveLifecycle[P ~lifecycleResponse[R], R ~lifecycleOutcome[PP], Q ~lifecycleTopic, PP ~planPartition[TX], TX ~planTxn](h *handler, ctx context.Context, rc *admin.RequestContext,
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
		out = append(out, R(lifecycleOutcome[PP]{TopicName: r.Topic, ErrorCode: code, ErrorMessage: msg, Partitions: wirePlan[PP, TX](r.Plan)}))
	}
	resp := P(lifecycleResponse[R]{Topics: out})
	return &resp, nil
}
