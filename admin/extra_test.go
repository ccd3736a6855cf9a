package admin

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestExtraAPIs: extra keys are advertised next to the mirror RPCs, served
// over kgo with kmsg types (flexible and not), ErrNoResponse sends nothing,
// and an error or panic closes the connection.
func TestExtraAPIs(t *testing.T) {
	var calls atomic.Int32
	var hostPort atomic.Pointer[[2]string]
	extra := []ExtraAPI{
		{Key: int16(kmsg.Metadata), MinVersion: 1, MaxVersion: 12, Serve: func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
			calls.Add(1)
			resp := req.ResponseKind().(*kmsg.MetadataResponse)
			hp := hostPort.Load()
			port, _ := strconv.Atoi(hp[1])
			resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 7, Host: hp[0], Port: int32(port)}}
			id := "c-" + rc.Principal
			resp.ClusterID = &id
			return resp, nil
		}},
		{Key: int16(kmsg.Produce), MinVersion: 3, MaxVersion: 12, Serve: func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
			if req.(*kmsg.ProduceRequest).Acks == 0 {
				return nil, ErrNoResponse
			}
			return nil, errors.New("boom")
		}},
		{Key: int16(kmsg.ListGroups), MinVersion: 0, MaxVersion: 5, Serve: func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) {
			panic("handler bug")
		}},
	}
	_, addr := startServer(t, ServerConfig{Handler: UnimplementedHandler{}, Extra: extra})
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	hostPort.Store(&[2]string{host, port})

	rc := dialRaw(t, addr)
	av := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	var got []int16
	for _, k := range av.ApiKeys {
		got = append(got, k.ApiKey)
		if k.ApiKey == int16(kmsg.Metadata) {
			require.Equal(t, [2]int16{1, 12}, [2]int16{k.MinVersion, k.MaxVersion})
		}
	}
	want := []int16{apiVersionsKey, int16(kmsg.Produce), int16(kmsg.Metadata), int16(kmsg.ListGroups)}
	for _, a := range APIs() {
		want = append(want, a.Key)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	require.Equal(t, want, got)

	for _, v := range []int16{1, 8, 9, 12} { // header v1 and v2
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		require.Equal(t, int32(7), resp.Brokers[0].NodeID)
		if v >= 2 {
			require.Equal(t, "c-User:ANONYMOUS", *resp.ClusterID)
		}
	}
	// acks 0: no response, the connection stays usable.
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = 9, 0
	rc.send(p)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	require.Len(t, rc.roundTrip(req).(*kmsg.MetadataResponse).Brokers, 1)
	// An error closes the connection; so does a version out of range.
	p.Acks = 1
	rc.send(p)
	rc.expectClosed()
	rc = dialRaw(t, addr)
	req.Version = 13
	rc.send(req)
	rc.expectClosed()
	rc = dialRaw(t, addr)
	rc.send(kmsg.NewPtrListGroupsRequest())
	rc.expectClosed()
	require.Equal(t, int32(5), calls.Load())

	// A kgo client sees the extra keys and the mirror RPCs on one port.
	cl, err := kgo.NewClient(append(ClientOpts(), kgo.SeedBrokers(addr), kgo.RequestRetries(0))...)
	require.NoError(t, err)
	defer cl.Close()
	mresp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Equal(t, int32(7), mresp.Brokers[0].NodeID)
	_, err = NewClient(cl).ListClusterMirrors(context.Background(), &ListClusterMirrorsRequest{})
	require.ErrorIs(t, err, CodeInvalidRequest.Err()) // UnimplementedHandler
}

func TestExtraAPIValidation(t *testing.T) {
	ok := func(context.Context, *RequestContext, kmsg.Request) (kmsg.Response, error) { return nil, nil }
	for name, e := range map[string][]ExtraAPI{
		"api versions": {{Key: apiVersionsKey, MaxVersion: 1, Serve: ok}},
		"mirror key":   {{Key: KeyListClusterMirrors, Serve: ok}},
		"unknown key":  {{Key: 9999, Serve: ok}},
		"nil serve":    {{Key: int16(kmsg.Fetch), MaxVersion: 12}},
		"reversed":     {{Key: int16(kmsg.Fetch), MinVersion: 5, MaxVersion: 4, Serve: ok}},
		"too new":      {{Key: int16(kmsg.Fetch), MaxVersion: 999, Serve: ok}},
		"negative":     {{Key: int16(kmsg.Fetch), MinVersion: -1, MaxVersion: 4, Serve: ok}},
		"twice":        {{Key: int16(kmsg.Fetch), MaxVersion: 4, Serve: ok}, {Key: int16(kmsg.Fetch), MaxVersion: 4, Serve: ok}},
	} {
		_, err := NewServer(ServerConfig{Handler: UnimplementedHandler{}, Extra: e})
		require.ErrorIs(t, err, ErrBadExtraAPI, name)
	}
}
