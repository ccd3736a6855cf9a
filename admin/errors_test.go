package admin

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodeTable(t *testing.T) {
	names := map[string]bool{}
	codes := map[Code]bool{}
	for _, ci := range Codes() {
		require.False(t, codes[ci.Code], "duplicate code %d", ci.Code)
		require.False(t, names[ci.Name], "duplicate name %s", ci.Name)
		codes[ci.Code], names[ci.Name] = true, true
		require.NotEmpty(t, ci.Description)
		require.Equal(t, ci.Name, ci.Code.String())
		require.Equal(t, ci.Retriable, ci.Code.Retriable())
		require.True(t, ci.Code.Known())
	}
	// The spec §12 codes: the prototype numbers plus 10000 for the new
	// KIP-1279 errors, Kafka's numbers for the others.
	spec := map[string]Code{
		"READ_ONLY_TOPIC": 10134, "CLUSTER_MIRROR_ALREADY_EXISTS": 10136, "UNKNOWN_CLUSTER_MIRROR": 10137,
		"CLUSTER_MIRROR_AUTHORIZATION_FAILED": 10144, "INVALID_CLUSTER_MIRROR_STATES": 10145,
		"TOPIC_ALREADY_IN_CLUSTER_MIRROR": 10138, "TOPIC_NOT_IN_CLUSTER_MIRROR": 10139,
		"MIRROR_TOPIC_ALREADY_PAUSED": 10140, "MIRROR_TOPIC_NOT_PAUSED": 10141, "MIRROR_TOPIC_BEING_STOPPED": 10142,
		"CLUSTER_MIRROR_NOT_EMPTY": 10143, "MIRROR_TOPIC_NOT_STOPPED": 10146,
		"TOPIC_ALREADY_EXISTS": 36, "INCONSISTENT_TOPIC_ID": 103, "INVALID_REPLICATION_FACTOR": 38,
		"INVALID_REQUEST": 42, "NOT_CONTROLLER": 41, "FENCED_LEADER_EPOCH": 74, "FENCED_STATE_EPOCH": 124,
		"NOT_COORDINATOR": 16, "COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15,
		"UNKNOWN_TOPIC_OR_PARTITION": 3, "UNSUPPORTED_VERSION": 35,
	}
	for name, c := range spec {
		require.Equal(t, name, c.String())
	}
	require.True(t, CodeNotCoordinator.Retriable())
	require.True(t, CodeCoordinatorLoadInProgress.Retriable())
	require.False(t, CodeFencedStateEpoch.Retriable())
	require.False(t, CodeInvalidClusterMirrorStates.Retriable())
	require.Equal(t, "UNKNOWN_CODE_999", Code(999).String())
	require.False(t, Code(999).Known())
	require.False(t, Code(999).Retriable())
}

func TestErrorIs(t *testing.T) {
	require.NoError(t, CodeNone.Err())
	err := fmt.Errorf("coordinator: write: %w", NewError(CodeFencedStateEpoch, "stored 4, got 3"))
	require.ErrorIs(t, err, CodeFencedStateEpoch.Err())
	require.NotErrorIs(t, err, CodeFencedLeaderEpoch.Err())
	require.Equal(t, "coordinator: write: admin: FENCED_STATE_EPOCH (124): stored 4, got 3", err.Error())
	require.Equal(t, CodeFencedStateEpoch, CodeOf(err))
	require.Equal(t, CodeNone, CodeOf(nil))
	require.Equal(t, CodeUnknownServerError, CodeOf(errors.New("boom")))
	require.Same(t, CodeNotCoordinator.Err(), CodeNotCoordinator.Err())
	require.ErrorIs(t, Code(999).Err(), Code(999).Err())
	require.Equal(t, "admin: UNKNOWN_CLUSTER_MIRROR (10137)", CodeUnknownClusterMirror.Err().Error())
	require.True(t, Errorf(CodeNotController, "x %d", 1).Retriable())
	msg := "m"
	require.NoError(t, ErrorFromResponse(0, &msg))
	e := ErrorFromResponse(10137, &msg)
	require.ErrorIs(t, e, CodeUnknownClusterMirror.Err())
	require.Equal(t, "admin: UNKNOWN_CLUSTER_MIRROR (10137): m", e.Error())
}

// TestRPCErrorTable: every RPC has an error list, an auth requirement, and
// lists only known codes; the denial codes are allowed for their RPC.
func TestRPCErrorTable(t *testing.T) {
	require.Len(t, rpcErrors, len(apiTable))
	require.Len(t, authTable, len(apiTable))
	for _, a := range apiTable {
		allowed := AllowedErrors(a.Key)
		require.NotEmpty(t, allowed, a.Name)
		for _, c := range allowed {
			require.True(t, c.Known(), "%s lists unknown code %d", a.Name, c)
		}
		req, ok := RequirementFor(a.Key)
		require.True(t, ok)
		require.True(t, ErrorAllowed(a.Key, req.Denied), a.Name)
		if req.TopicOp != 0 {
			require.True(t, ErrorAllowed(a.Key, CodeTopicAuthorizationFailed), a.Name)
		}
	}
	require.Nil(t, AllowedErrors(3))
	require.False(t, ErrorAllowed(KeyCreateClusterMirror, CodeInvalidClusterMirrorStates), "JR60: not for Create")
	require.True(t, ErrorAllowed(KeyWriteMirrorStates, CodeFencedStateEpoch))
}

// responseCodes collects every ErrorCode field anywhere in a response.
func responseCodes(v any) []Code {
	var out []Code
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).Name == "ErrorCode" {
					out = append(out, Code(v.Field(i).Int()))
				} else if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
	return out
}

func TestResponseCodesWalker(t *testing.T) {
	r := NewDescribeClusterMirrorsResponse()
	r.ErrorCode = 1
	m := NewDescribeClusterMirrorsResponseMirror()
	m.ErrorCode = 2
	tp := NewDescribeClusterMirrorsResponseMirrorTopic()
	p := NewDescribeClusterMirrorsResponseMirrorTopicPartition()
	p.ErrorCode = 3
	tp.Partitions = append(tp.Partitions, p)
	m.Topics = append(m.Topics, tp)
	r.Mirrors = append(r.Mirrors, m)
	require.Equal(t, []Code{1, 2, 3}, responseCodes(&r))
}

// TestMessageOfNamesTheCodeOnce checks that the response message of an error never
// repeats the "admin: NAME (n)" that its ErrorCode already carries, and that the
// client-side error built from code and message names the code once.
func TestMessageOfNamesTheCodeOnce(t *testing.T) {
	inner := Errorf(CodeInvalidClusterMirrorStates, "cannot pause topic %q partition 0 in state PAUSED", "t")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{inner, `cannot pause topic "t" partition 0 in state PAUSED`},
		{fmt.Errorf("pause: %w", inner), `pause: cannot pause topic "t" partition 0 in state PAUSED`},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", inner)), `a: b: cannot pause topic "t" partition 0 in state PAUSED`},
		{fmt.Errorf("persist: %w", NewError(CodeNotController, "")), "persist"},
		{errors.New("plain"), "plain"},
		{fmt.Errorf("x: %w", errors.New("plain")), "x: plain"},
	} {
		msg := MessageOf(tc.err)
		require.Equal(t, tc.want, msg)
		if tc.err == nil {
			continue
		}
		code := CodeOf(tc.err)
		back := ErrorFromResponse(int16(code), &msg)
		require.Equal(t, 1, strings.Count(back.Error(), code.String()), back.Error())
	}
}
