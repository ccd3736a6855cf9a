package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWrappedHandlerErrorNamesItsCodeOnce: a handler error that wraps an *Error
// reaches the client with its code and context, the code named once.
func TestWrappedHandlerErrorNamesItsCodeOnce(t *testing.T) {
	h := &funcHandler{fn: func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
		return nil, fmt.Errorf("delete m1: %w", Errorf(CodeInvalidClusterMirrorStates, "topic %q is MIRRORING", "orders"))
	}}
	_, addr := startServer(t, ServerConfig{Handler: h})
	_, err := newKgo(t, addr).DeleteClusterMirrors(context.Background(), NewPtrDeleteClusterMirrorsRequest())
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, CodeInvalidClusterMirrorStates, ae.Code)
	require.Equal(t, `delete m1: topic "orders" is MIRRORING`, ae.Message)
	require.Equal(t, 1, strings.Count(err.Error(), CodeInvalidClusterMirrorStates.String()), err.Error())
}
