package admin

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclSet allows exactly the listed "principal op resource name" entries.
type aclSet struct {
	mu      sync.Mutex
	allowed map[string]bool
	asked   []string
}

func (a *aclSet) Authorize(_ context.Context, principal string, op Operation, rt ResourceType, name string) bool {
	k := fmt.Sprintf("%s %s %s %s", principal, op, rt, name)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, k)
	return a.allowed[k]
}

func allow(entries ...string) *aclSet {
	a := &aclSet{allowed: map[string]bool{}}
	for _, e := range entries {
		a.allowed["User:ANONYMOUS "+e] = true
	}
	return a
}

func TestAuthorizationOverTheWire(t *testing.T) {
	var mu sync.Mutex
	var got []kmsg.Request
	h := &funcHandler{fn: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		switch r := req.(type) {
		case *PauseMirrorTopicsRequest:
			resp := NewPtrPauseMirrorTopicsResponse()
			for _, tp := range r.Topics {
				resp.Topics = append(resp.Topics, PauseMirrorTopicsResponseTopic{TopicName: tp.TopicName})
			}
			return resp, nil
		case *ListClusterMirrorsRequest:
			resp := NewPtrListClusterMirrorsResponse()
			for _, n := range []string{"m1", "m2"} {
				m := NewListClusterMirrorsResponseMirror()
				m.MirrorName = n
				resp.Mirrors = append(resp.Mirrors, m)
			}
			return resp, nil
		case *DescribeClusterMirrorsRequest:
			resp := NewPtrDescribeClusterMirrorsResponse()
			names := r.MirrorNames
			if names == nil {
				names = []string{"m1", "m2"}
			}
			for _, n := range names {
				m := NewDescribeClusterMirrorsResponseMirror()
				m.MirrorName = n
				resp.Mirrors = append(resp.Mirrors, m)
			}
			return resp, nil
		}
		return req.ResponseKind(), nil
	}}
	acl := allow(
		"ALTER CLUSTER_MIRROR m1", "READ TOPIC t1",
		"DESCRIBE CLUSTER_MIRROR m1", "ALTER_CONFIGS CLUSTER_MIRROR m1",
	)
	_, addr := startServer(t, ServerConfig{Handler: h, Authorizer: acl})
	c := newKgo(t, addr)
	ctx := context.Background()
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}

	// Mirror-level denial: no handler call.
	cr := NewPtrCreateClusterMirrorRequest()
	cr.MirrorName = "m1"
	_, err := c.CreateClusterMirror(ctx, cr)
	require.ErrorIs(t, err, CodeClusterMirrorAuthorizationFailed.Err())
	require.Equal(t, 0, calls())

	// Cluster-level denial for broker-to-broker RPCs.
	_, err = c.WriteMirrorStates(ctx, NewPtrWriteMirrorStatesRequest())
	require.ErrorIs(t, err, CodeClusterAuthorizationFailed.Err())
	require.Equal(t, 0, calls())

	// Per-topic denial: t2 answered by the server, t1 by the handler.
	pr := NewPtrPauseMirrorTopicsRequest()
	pr.MirrorName = "m1"
	pr.Topics = []PauseMirrorTopicsRequestTopic{{TopicName: "t1"}, {TopicName: "t2"}}
	presp, err := c.PauseMirrorTopics(ctx, pr)
	require.NoError(t, err)
	require.Equal(t, 1, calls())
	require.Len(t, got[0].(*PauseMirrorTopicsRequest).Topics, 1)
	require.Len(t, presp.Topics, 2)
	codes := map[string]int16{}
	for _, tp := range presp.Topics {
		codes[tp.TopicName] = tp.ErrorCode
	}
	require.Equal(t, map[string]int16{"t1": 0, "t2": int16(CodeTopicAuthorizationFailed)}, codes)

	// All topics denied: the handler is not called.
	pr.Topics = []PauseMirrorTopicsRequestTopic{{TopicName: "t2"}}
	presp, err = c.PauseMirrorTopics(ctx, pr)
	require.NoError(t, err)
	require.Equal(t, 1, calls())
	require.Equal(t, int16(CodeTopicAuthorizationFailed), presp.Topics[0].ErrorCode)

	// List leaves out m2 and says so: CLUSTER_MIRROR_AUTHORIZATION_FAILED, with
	// the describable mirror still listed (JR74.2: never a silently shorter list).
	lresp, err := c.ListClusterMirrors(ctx, NewPtrListClusterMirrorsRequest())
	require.ErrorIs(t, err, CodeClusterMirrorAuthorizationFailed.Err())
	require.ErrorContains(t, err, "DESCRIBE on 1 CLUSTER_MIRROR(s)")
	require.NotContains(t, err.Error(), "m2", "a mirror the caller did not name is not revealed")
	require.Len(t, lresp.Mirrors, 1)
	require.Equal(t, "m1", lresp.Mirrors[0].MirrorName)
	lreq := NewPtrListClusterMirrorsRequest()
	lreq.MirrorNameFilter = []string{"m2"}
	_, err = c.ListClusterMirrors(ctx, lreq)
	require.ErrorContains(t, err, "including m2")

	// Describe all: filtered; describe by name: per-mirror error; authorized
	// operations filled when asked (bit = operation code).
	dr := NewPtrDescribeClusterMirrorsRequest()
	dr.IncludeAuthorizedOperations = true
	dresp, err := c.DescribeClusterMirrors(ctx, dr)
	require.NoError(t, err)
	require.Len(t, dresp.Mirrors, 1)
	require.Equal(t, int32(1<<OpAlter|1<<OpDescribe|1<<OpAlterConfigs), dresp.Mirrors[0].AuthorizedOperations)
	dr.MirrorNames = []string{"m2", "m1"}
	dr.IncludeAuthorizedOperations = false
	dresp, err = c.DescribeClusterMirrors(ctx, dr)
	require.NoError(t, err)
	require.Len(t, dresp.Mirrors, 2)
	require.Equal(t, "m1", dresp.Mirrors[0].MirrorName)
	require.Equal(t, int16(0), dresp.Mirrors[0].ErrorCode)
	require.Equal(t, int32(-2147483648), dresp.Mirrors[0].AuthorizedOperations)
	require.Equal(t, "m2", dresp.Mirrors[1].MirrorName)
	require.Equal(t, int16(CodeClusterMirrorAuthorizationFailed), dresp.Mirrors[1].ErrorCode)
	dr.MirrorNames = []string{"m2"}
	before := calls()
	dresp, err = c.DescribeClusterMirrors(ctx, dr)
	require.NoError(t, err)
	require.Equal(t, before, calls())
	require.Equal(t, int16(CodeClusterMirrorAuthorizationFailed), dresp.Mirrors[0].ErrorCode)
}

func TestAuthorizeNilAllowsAll(t *testing.T) {
	called := false
	req := NewPtrCreateClusterMirrorRequest()
	_, err := Authorize(context.Background(), nil, "User:x", req, func(kmsg.Request) (kmsg.Response, error) {
		called = true
		return req.ResponseKind(), nil
	})
	require.NoError(t, err)
	require.True(t, called)
}

func TestAuthTableMatchesSpec(t *testing.T) {
	// spec §16.2
	want := map[int16]string{
		KeyCreateClusterMirror: "CREATE CLUSTER_MIRROR", KeyDeleteClusterMirrors: "ALTER CLUSTER_MIRROR",
		KeyListClusterMirrors: "DESCRIBE CLUSTER_MIRROR", KeyDescribeClusterMirrors: "DESCRIBE CLUSTER_MIRROR",
		KeyStartMirrorTopics: "ALTER CLUSTER_MIRROR", KeyStopMirrorTopics: "ALTER CLUSTER_MIRROR",
		KeyPauseMirrorTopics: "ALTER CLUSTER_MIRROR", KeyResumeMirrorTopics: "ALTER CLUSTER_MIRROR",
		KeyReadMirrorStates: "CLUSTER_ACTION CLUSTER", KeyWriteMirrorStates: "CLUSTER_ACTION CLUSTER",
		KeyReadMirrorOffsets: "CLUSTER_ACTION CLUSTER", KeyBumpLeaderEpochs: "CLUSTER_ACTION CLUSTER",
	}
	for k, w := range want {
		r, ok := RequirementFor(k)
		require.True(t, ok)
		require.Equal(t, w, r.Op.String()+" "+r.Resource.String())
	}
	require.Equal(t, "UNKNOWN", Operation(0).String())
	require.Equal(t, "UNKNOWN", ResourceType(0).String())
}
