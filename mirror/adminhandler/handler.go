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

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
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
	case errors.Is(err, mirror.ErrTruncationRefused):
		return admin.NewError(admin.CodeMirrorTruncationRefused, err.Error())
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
		IncludePatterns: req.IncludePatterns, ExcludePatterns: req.ExcludePatterns,
		ValidateOnly: req.ValidateOnly, AllowTruncation: req.AllowTruncation})
	if err != nil {
		return nil, h.wireError(rc, err)
	}
	for _, r := range res {
		rt := admin.NewStartMirrorTopicsResponseTopic()
		rt.Name = r.Topic
		rt.ErrorCode, rt.ErrorMessage = h.codeAndMessage(rc, r.Err)
		rt.Partitions = wirePlan[admin.StartMirrorTopicsResponseTopicPartition, admin.StartMirrorTopicsResponseTopicPartitionOpenTransaction](r.Plan)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
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
