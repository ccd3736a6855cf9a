// Package adminhandler is the wire adapter between an admin.Server and the mirror
// facade: New returns the admin.Handler that serves the KIP-1279 RPCs with a
// *mirror.Mirror's exported Go API. It owns the translation of requests to facade
// calls and of facade results and errors to Kafka error codes and wire fields.
package adminhandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// Option configures the handler of New. Its values come from the With... functions of
// this package (WithLogger).
type Option interface {
	apply(*options)
}

// options are the settings of the handler.
type options struct {
	log *slog.Logger
}

// optionFunc is an Option that sets one field.
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// newOptions applies opts over the defaults: m's logger, or a discarding one when that
// (or the logger given) is nil.
func newOptions(m *mirror.Mirror, opts []Option) options {
	o := options{log: m.Logger()}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return o
}

// WithLogger makes the handler log the unexpected errors it answers with
// UNKNOWN_SERVER_ERROR (default: the Mirror's logger).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) { o.log = l })
}

// New returns the admin.Handler that serves the KIP-1279 RPCs with m's Go API: the
// admin RPCs (create, delete, list, describe, start, stop, pause, resume, recover) map
// to the facade's workflows and the instance RPCs (ReadMirrorStates,
// WriteMirrorStates, ReadMirrorOffsets, BumpLeaderEpochs) to its coordinator and
// destination. Mount it on an admin.Server:
//
//	srv, _ := admin.NewServer(admin.ServerConfig{Handler: adminhandler.New(m)})
//	go srv.Serve(listener)
//
// Errors travel as Kafka error codes: an *admin.Error anywhere in an error's chain
// keeps its code, a context deadline is REQUEST_TIMED_OUT, an invalid config
// (mirror.ErrInvalidConfig) INVALID_CONFIG, anything else UNKNOWN_SERVER_ERROR with
// the error text as message. A request's TimeoutMs (when positive) bounds the call.
// When m reports to a Metrics other than mirror.NopMetrics (m.Metrics()), each request
// is reported to its AdminRequest (admin.ObserveHandler). The handler is safe for
// concurrent use.
func New(m *mirror.Mirror, opts ...Option) admin.Handler {
	h := &handler{m: m, log: newOptions(m, opts).log}
	if mt := m.Metrics(); !isNop(mt) {
		return admin.ObserveHandler(h, mt.AdminRequest)
	}
	return h
}

// isNop reports whether mt is the mirror.NopMetrics default.
func isNop(mt mirror.Metrics) bool {
	_, nop := mt.(mirror.NopMetrics)
	return nop
}

// handler implements admin.Handler over a *Mirror.
type handler struct {
	m   *mirror.Mirror
	log *slog.Logger
}

var _ admin.Handler = (*handler)(nil)

// withTimeout bounds ctx by a request's TimeoutMs (ignored when not positive).
func withTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// wireError turns a facade error into the *admin.Error the server puts on the wire.
func (h *handler) wireError(rc *admin.RequestContext, err error) *admin.Error {
	if err == nil {
		return nil
	}
	var ae *admin.Error
	if errors.As(err, &ae) {
		if ae == err {
			return ae
		}
		// Keep the wrapping context, not the inner error's "admin: CODE (n)": the
		// code travels as ErrorCode and the reader names it.
		return admin.NewError(ae.Code, admin.MessageOf(err))
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return admin.NewError(admin.CodeRequestTimedOut, err.Error())
	case errors.Is(err, mirror.ErrInvalidConfig):
		return admin.NewError(admin.CodeInvalidConfig, err.Error())
	}
	key := int16(-1)
	if rc != nil {
		key = rc.Key
	}
	h.log.Warn("mirror: admin request failed", "api_key", key, "error", err)
	return admin.NewError(admin.CodeUnknownServerError, err.Error())
}

// codeAndMessage splits a per-item error into response fields.
func (h *handler) codeAndMessage(rc *admin.RequestContext, err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	ae := h.wireError(rc, err)
	if ae.Message == "" {
		return int16(ae.Code), nil
	}
	msg := ae.Message
	return int16(ae.Code), &msg
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CreateClusterMirror implements admin.Handler (spec §11.1). A config with a null
// value is left out (its default applies); a name given twice is INVALID_REQUEST.
func (h *handler) CreateClusterMirror(ctx context.Context, rc *admin.RequestContext, req *admin.CreateClusterMirrorRequest) (*admin.CreateClusterMirrorResponse, error) {
	configs := make(map[string]string, len(req.Configs))
	seen := make(map[string]bool, len(req.Configs))
	for _, c := range req.Configs {
		if seen[c.Name] {
			return nil, admin.Errorf(admin.CodeInvalidRequest, "config %q is given more than once", c.Name)
		}
		seen[c.Name] = true
		if c.Value != nil {
			configs[c.Name] = *c.Value
		}
	}
	if err := h.m.CreateClusterMirror(ctx, req.MirrorName, configs); err != nil {
		return nil, h.wireError(rc, err)
	}
	resp := admin.NewPtrCreateClusterMirrorResponse()
	return resp, nil
}

// DeleteClusterMirrors implements admin.Handler (spec §11.2). StateOffset is not
// forwarded: the facade fences with the controller offset it validated against itself.
func (h *handler) DeleteClusterMirrors(ctx context.Context, rc *admin.RequestContext, req *admin.DeleteClusterMirrorsRequest) (*admin.DeleteClusterMirrorsResponse, error) {
	ctx, cancel := withTimeout(ctx, req.TimeoutMs)
	defer cancel()
	if err := h.m.DeleteClusterMirrors(ctx, []string{req.MirrorName})[req.MirrorName]; err != nil {
		return nil, h.wireError(rc, err)
	}
	return admin.NewPtrDeleteClusterMirrorsResponse(), nil
}

// ListClusterMirrors implements admin.Handler (spec §11.3). An unknown desired state
// in the filter is INVALID_REQUEST.
func (h *handler) ListClusterMirrors(ctx context.Context, rc *admin.RequestContext, req *admin.ListClusterMirrorsRequest) (*admin.ListClusterMirrorsResponse, error) {
	f := mirror.ListFilter{
		SourceClusterIDs:  req.SourceClusterIdFilter,
		MirrorNames:       req.MirrorNameFilter,
		IncludeTopicNames: req.IncludeTopicNames,
	}
	for _, s := range req.DesiredMirrorStateFilter {
		d, err := statemachine.ParseDesired(s)
		if err != nil {
			return nil, admin.Errorf(admin.CodeInvalidRequest, "desired state filter: %v", err)
		}
		f.DesiredStates = append(f.DesiredStates, d)
	}
	ls, err := h.m.ListClusterMirrors(ctx, f)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	resp := admin.NewPtrListClusterMirrorsResponse()
	for _, l := range ls {
		rm := admin.NewListClusterMirrorsResponseMirror()
		rm.MirrorName = l.Name
		rm.SourceBootstrap = l.SourceBootstrap
		rm.SourceClusterId = l.SourceClusterID
		rm.TopicCount = int32(l.TopicCount)
		if req.IncludeTopicNames {
			rm.TopicNames = append([]string{}, l.TopicNames...)
		}
		resp.Mirrors = append(resp.Mirrors, rm)
	}
	return resp, nil
}

// DescribeClusterMirrors implements admin.Handler (spec §11.4). A named mirror that
// does not exist is answered with a per-mirror UNKNOWN_CLUSTER_MIRROR; the others are
// still described. Partitions carry their RetryAttempt (-1 = non-retryable).
func (h *handler) DescribeClusterMirrors(ctx context.Context, rc *admin.RequestContext, req *admin.DescribeClusterMirrorsRequest) (*admin.DescribeClusterMirrorsResponse, error) {
	ctx, cancel := withTimeout(ctx, req.TimeoutMs)
	defer cancel()
	o := mirror.DescribeOptions{
		IncludeStates: req.IncludeMirrorStates,
		IncludeLags:   req.IncludeMirrorLags,
	}
	if req.ClusterId != nil {
		o.ClusterID = *req.ClusterId
	}
	if req.TopicPartitions != nil {
		o.TopicPartitions = make(map[string][]int32, len(req.TopicPartitions))
		for _, tp := range req.TopicPartitions {
			o.TopicPartitions[tp.Topic] = append(o.TopicPartitions[tp.Topic], tp.Partitions...)
		}
	}
	resp := admin.NewPtrDescribeClusterMirrorsResponse()
	var descs []mirror.MirrorDescription
	if req.MirrorNames == nil {
		ds, err := h.m.DescribeClusterMirrors(ctx, nil, o)
		if err != nil {
			return nil, h.wireError(rc, err)
		}
		descs = ds
	} else {
		// One call per name (repeats answered once), so that an unknown name fails alone.
		seen := make(map[string]bool, len(req.MirrorNames))
		for _, name := range req.MirrorNames {
			if seen[name] {
				continue
			}
			seen[name] = true
			ds, err := h.m.DescribeClusterMirrors(ctx, []string{name}, o)
			if err != nil {
				if admin.CodeOf(err) != admin.CodeUnknownClusterMirror {
					return nil, h.wireError(rc, err)
				}
				rm := admin.NewDescribeClusterMirrorsResponseMirror()
				rm.MirrorName = name
				rm.ErrorCode, rm.ErrorMessage = h.codeAndMessage(rc, err)
				resp.Mirrors = append(resp.Mirrors, rm)
				continue
			}
			descs = append(descs, ds...)
		}
	}
	for _, d := range descs {
		resp.Mirrors = append(resp.Mirrors, describeMirror(d))
	}
	return resp, nil
}

// describeMirror converts one mirror.MirrorDescription to its wire form.
func describeMirror(d mirror.MirrorDescription) admin.DescribeClusterMirrorsResponseMirror {
	rm := admin.NewDescribeClusterMirrorsResponseMirror()
	rm.MirrorName = d.Name
	rm.SourceBootstrap = strPtr(d.SourceBootstrap)
	rm.SourceClusterId = strPtr(d.SourceClusterID)
	for _, t := range d.Topics {
		rt := admin.NewDescribeClusterMirrorsResponseMirrorTopic()
		rt.TopicName = t.Topic
		for _, p := range t.Partitions {
			rp := admin.NewDescribeClusterMirrorsResponseMirrorTopicPartition()
			rp.PartitionIndex = p.Partition
			rp.ErrorCode = int16(p.ErrorCode)
			rp.State = int8(p.State)
			rp.ErrorMessage = strPtr(p.ErrorMessage)
			rp.SourceOffset = p.SourceOffset
			rp.DestinationOffset = p.DestinationOffset
			rp.LastMirrorEpoch = p.LastMirrorEpoch
			rp.LastMirrorOffset = p.LastMirrorOffset
			describeHealthWire(&rp, p)
			rp.RetryAttempt = p.RetryAttempt
			rt.Partitions = append(rt.Partitions, rp)
		}
		rm.Topics = append(rm.Topics, rt)
	}
	return rm
}

// StartMirrorTopics implements admin.Handler (spec §11.5). The facade reads topic ids
// and partition counts from the source itself, so only the requested names are
// forwarded; NumPartitions is not checked. A non-zero TopicId that differs from the id
// of an existing destination topic of that name is refused with TOPIC_ALREADY_EXISTS
// for that topic (spec §14.2 step 4).
func (h *handler) StartMirrorTopics(ctx context.Context, rc *admin.RequestContext, req *admin.StartMirrorTopicsRequest) (*admin.StartMirrorTopicsResponse, error) {
	ctx, cancel := withTimeout(ctx, req.TimeoutMs)
	defer cancel()
	resp := admin.NewPtrStartMirrorTopicsResponse()
	names := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if id := records.UUID(t.TopicId); id != (records.UUID{}) {
			if spec, ok := h.m.Destination().Topic(t.Name); ok && spec.TopicID != id {
				rt := admin.NewStartMirrorTopicsResponseTopic()
				rt.Name, rt.ErrorCode = t.Name, int16(admin.CodeTopicAlreadyExists)
				rt.ErrorMessage = strPtr(fmt.Sprintf("topic %q exists with id %s, not %s", t.Name, spec.TopicID, id))
				resp.Topics = append(resp.Topics, rt)
				continue
			}
		}
		names = append(names, t.Name)
	}
	res, err := h.m.StartMirrorTopics(ctx, req.MirrorName, names, mirror.StartOptions{
		IncludePatterns: req.IncludePatterns, ExcludePatterns: req.ExcludePatterns})
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	for _, r := range res {
		rt := admin.NewStartMirrorTopicsResponseTopic()
		rt.Name = r.Topic
		rt.ErrorCode, rt.ErrorMessage = h.codeAndMessage(rc, r.Err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

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

// ReadMirrorStates implements admin.Handler (spec §11.8) with Mirror.ReadMirrorStates.
func (h *handler) ReadMirrorStates(ctx context.Context, rc *admin.RequestContext, req *admin.ReadMirrorStatesRequest) (*admin.ReadMirrorStatesResponse, error) {
	resp, err := h.m.ReadMirrorStates(ctx, req)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	return resp, nil
}

// WriteMirrorStates implements admin.Handler (spec §11.9) with Mirror.WriteMirrorStates.
func (h *handler) WriteMirrorStates(ctx context.Context, rc *admin.RequestContext, req *admin.WriteMirrorStatesRequest) (*admin.WriteMirrorStatesResponse, error) {
	resp, err := h.m.WriteMirrorStates(ctx, req)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	return resp, nil
}

// ReadMirrorOffsets implements admin.Handler (spec §11.10) with Mirror.ReadMirrorOffsets.
func (h *handler) ReadMirrorOffsets(ctx context.Context, rc *admin.RequestContext, req *admin.ReadMirrorOffsetsRequest) (*admin.ReadMirrorOffsetsResponse, error) {
	resp, err := h.m.ReadMirrorOffsets(ctx, req)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	return resp, nil
}

// BumpLeaderEpochs implements admin.Handler (spec §11.11) with Mirror.BumpLeaderEpochs.
func (h *handler) BumpLeaderEpochs(ctx context.Context, rc *admin.RequestContext, req *admin.BumpLeaderEpochsRequest) (*admin.BumpLeaderEpochsResponse, error) {
	resp, err := h.m.BumpLeaderEpochs(ctx, req)
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	return resp, nil
}

// describeHealthWire copies the lag and source-health fields of p to their tagged wire
// fields (-1 or null when unknown; mirror's AdminPeer reads them back).
func describeHealthWire(rp *admin.DescribeClusterMirrorsResponseMirrorTopicPartition, p mirror.PartitionDescription) {
	rp.TimeLagMs = -1
	if p.TimeLag >= 0 {
		rp.TimeLagMs = p.TimeLag.Milliseconds()
	}
	rp.LastFetchTimestamp = unixMilliOr(p.LastFetch)
	rp.SourceErrorCode = int16(p.SourceErrorCode)
	rp.SourceErrorMessage = strPtr(p.SourceErrorMessage)
	rp.SourceUnreachableSince = unixMilliOr(p.SourceUnreachableSince)
}

// unixMilliOr is t in Unix milliseconds, -1 for the zero time.
func unixMilliOr(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
