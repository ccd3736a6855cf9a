package adminhandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

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

// TestDescribeHealthWire: the lag and source-health fields of a description travel in
// their tagged wire fields, -1 or null when unknown.
func TestDescribeHealthWire(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	known := mirror.PartitionDescription{Partition: 3, TimeLag: 1500 * time.Millisecond, LastFetch: at,
		SourceErrorCode: admin.CodeNetworkException, SourceErrorMessage: "dial: refused", SourceUnreachableSince: at.Add(-time.Second)}
	unknown := mirror.PartitionDescription{Partition: 4, TimeLag: -1}
	rm := describeMirror(mirror.MirrorDescription{Name: "m", Topics: []mirror.TopicDescription{
		{Topic: "t", Partitions: []mirror.PartitionDescription{known, unknown}}}})
	require.Equal(t, "m", rm.MirrorName)
	require.Nil(t, rm.SourceBootstrap, "an empty string is null on the wire")
	k, u := rm.Topics[0].Partitions[0], rm.Topics[0].Partitions[1]
	require.Equal(t, int32(3), k.PartitionIndex)
	require.Equal(t, int64(1500), k.TimeLagMs)
	require.Equal(t, at.UnixMilli(), k.LastFetchTimestamp)
	require.Equal(t, int16(admin.CodeNetworkException), k.SourceErrorCode)
	require.Equal(t, "dial: refused", *k.SourceErrorMessage)
	require.Equal(t, at.Add(-time.Second).UnixMilli(), k.SourceUnreachableSince)
	require.Equal(t, int64(-1), u.TimeLagMs)
	require.Equal(t, int64(-1), u.LastFetchTimestamp)
	require.Zero(t, u.SourceErrorCode)
	require.Nil(t, u.SourceErrorMessage)
	require.Equal(t, int64(-1), u.SourceUnreachableSince)
}
