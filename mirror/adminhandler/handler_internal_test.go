package adminhandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/mirror"
)

func TestHandlerWireError(t *testing.T) {
	h := &handler{log: slog.New(slog.DiscardHandler)}
	inner := admin.NewError(admin.CodeUnknownClusterMirror, `cluster mirror "x" does not exist`)
	cases := []struct {
		name string
		err  error
		code admin.Code
		msg  string
	}{
		{"as is", inner, admin.CodeUnknownClusterMirror, `cluster mirror "x" does not exist`},
		{"wrapped", fmt.Errorf("start: %w", inner), admin.CodeUnknownClusterMirror, `start: cluster mirror "x" does not exist`},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), admin.CodeRequestTimedOut, "wait: context deadline exceeded"},
		{"config", fmt.Errorf("%w: Destination is required", mirror.ErrInvalidConfig), admin.CodeInvalidConfig, "mirror: invalid config: Destination is required"},
		{"other", errors.New("disk on fire"), admin.CodeUnknownServerError, "disk on fire"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := h.wireError(&admin.RequestContext{Key: admin.KeyStartMirrorTopics}, c.err)
			require.Equal(t, c.code, got.Code)
			require.Equal(t, c.msg, got.Message)
		})
	}
	require.Nil(t, h.wireError(nil, nil))
	code, msg := h.codeAndMessage(nil, nil)
	require.Zero(t, code)
	require.Nil(t, msg)
	code, msg = h.codeAndMessage(nil, admin.CodeInvalidClusterMirrorStates.Err())
	require.Equal(t, int16(admin.CodeInvalidClusterMirrorStates), code)
	require.Nil(t, msg, "an empty message stays null on the wire")
}
