package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// probeTimeout bounds the ApiVersions probe of explain.
const probeTimeout = 5 * time.Second

// notMirrorEndpointError says that --bootstrap-server answers the Kafka protocol but not
// the KIP-1279 mirror RPCs (a plain Kafka broker, say).
type notMirrorEndpointError struct {
	bootstrap string
	err       error // what the request failed with
}

func (e *notMirrorEndpointError) Error() string {
	return fmt.Sprintf("%s answers the Kafka protocol but does not serve the cluster mirror RPCs "+
		"(its ApiVersions lists none of them); point --bootstrap-server at the kmirror admin listener "+
		"of the destination, not at a plain Kafka broker", e.bootstrap)
}

func (e *notMirrorEndpointError) Unwrap() error { return e.err }

// explain replaces a request failure that is not a protocol error by a
// *notMirrorEndpointError when the endpoint answers ApiVersions without any mirror RPC
// (kgo then reports "broker is too old"). Anything else is returned unchanged.
func explain(cl *kgo.Client, bootstrap string, err error) error {
	var ae *admin.Error
	if errors.As(err, &ae) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	resp, perr := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if perr != nil || resp.ErrorCode != 0 {
		return err
	}
	for _, k := range resp.ApiKeys {
		if _, ok := admin.LookupAPI(k.ApiKey); ok {
			return err // a mirror endpoint: the failure is something else
		}
	}
	return &notMirrorEndpointError{bootstrap: bootstrap, err: err}
}
