package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Serves reports whether the cluster the client reaches advertises request key key in
// its ApiVersions: false for a plain Kafka cluster (or kfake) asked for a mirror RPC.
// kgo refuses to send a key the broker does not advertise, with an error of its own
// that it does not export; a caller that got a client-side error from a mirror RPC asks
// Serves to decide, by type, whether the peer lacks the API.
func (c *Client) Serves(ctx context.Context, key int16) (bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror", "1"
	kresp, err := c.cl.Request(ctx, req)
	if err != nil {
		return false, err
	}
	resp, ok := kresp.(*kmsg.ApiVersionsResponse)
	if !ok {
		return false, fmt.Errorf("admin: unexpected ApiVersions response type %T", kresp)
	}
	if err := ErrorFromResponse(resp.ErrorCode, nil); err != nil {
		return false, fmt.Errorf("admin: ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true, nil
		}
	}
	return false, nil
}

// ServesVersion reports whether the cluster the client reaches advertises request key
// key at version or above. A caller that needs a field of a newer version (ValidateOnly
// of the lifecycle RPCs v1) asks first: an older server would decode the request
// without the field and carry it out.
func (c *Client) ServesVersion(ctx context.Context, key, version int16) (bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror", "1"
	kresp, err := c.cl.Request(ctx, req)
	if err != nil {
		return false, err
	}
	resp, ok := kresp.(*kmsg.ApiVersionsResponse)
	if !ok {
		return false, fmt.Errorf("admin: unexpected ApiVersions response type %T", kresp)
	}
	if err := ErrorFromResponse(resp.ErrorCode, nil); err != nil {
		return false, fmt.Errorf("admin: ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion >= version, nil
		}
	}
	return false, nil
}
