package admin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// describeAnswers answers DescribeClusterMirrors with a top-level error in the response.
type describeAnswers struct{ UnimplementedHandler }

func (describeAnswers) DescribeClusterMirrors(context.Context, *RequestContext, *DescribeClusterMirrorsRequest) (*DescribeClusterMirrorsResponse, error) {
	resp := NewPtrDescribeClusterMirrorsResponse()
	resp.ErrorCode = int16(CodeUnknownClusterMirror)
	return resp, nil
}

func TestObserveHandlerReportsAPICodeAndLatency(t *testing.T) {
	var got []RequestObservation
	h := ObserveHandler(describeAnswers{}, func(o RequestObservation) { got = append(got, o) })
	ctx := context.Background()
	_, err := h.ListClusterMirrors(ctx, &RequestContext{}, NewPtrListClusterMirrorsRequest())
	require.ErrorIs(t, err, CodeInvalidRequest.Err())
	resp, err := h.DescribeClusterMirrors(ctx, &RequestContext{}, NewPtrDescribeClusterMirrorsRequest())
	require.NoError(t, err)
	require.Equal(t, int16(CodeUnknownClusterMirror), resp.ErrorCode)
	require.Len(t, got, 2)
	require.Equal(t, RequestObservation{Key: KeyListClusterMirrors, API: "ListClusterMirrors", Code: CodeInvalidRequest, Latency: got[0].Latency}, got[0])
	require.Equal(t, "DescribeClusterMirrors", got[1].API)
	require.Equal(t, CodeUnknownClusterMirror, got[1].Code)
	require.GreaterOrEqual(t, got[1].Latency.Nanoseconds(), int64(0))
}
