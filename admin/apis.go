package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// APIInfo describes one RPC of the package: its key, name, versions and the
// listeners it is served on in Kafka (broker, controller).
type APIInfo struct {
	Key        int16
	Name       string // e.g. "ReadMirrorStates"
	MinVersion int16
	MaxVersion int16
	Listeners  []string

	newRequest  func() kmsg.Request
	newResponse func() kmsg.Response
}

// APIs returns the RPCs this package implements, sorted by key (a copy).
func APIs() []APIInfo {
	out := make([]APIInfo, len(apiTable))
	copy(out, apiTable)
	for i := range out {
		out[i].Listeners = append([]string(nil), out[i].Listeners...)
	}
	return out
}

// LookupAPI returns the APIInfo of key.
func LookupAPI(key int16) (APIInfo, bool) {
	for _, a := range apiTable {
		if a.Key == key {
			return a, true
		}
	}
	return APIInfo{}, false
}

// NewRequest returns an empty request with defaults for key at version, or
// false when the key or version is not implemented.
func NewRequest(key, version int16) (kmsg.Request, bool) {
	a, ok := LookupAPI(key)
	if !ok || version < a.MinVersion || version > a.MaxVersion {
		return nil, false
	}
	r := a.newRequest()
	r.SetVersion(version)
	return r, true
}

// NewResponse returns an empty response with defaults for key at version, or
// false when the key or version is not implemented.
func NewResponse(key, version int16) (kmsg.Response, bool) {
	a, ok := LookupAPI(key)
	if !ok || version < a.MinVersion || version > a.MaxVersion {
		return nil, false
	}
	r := a.newResponse()
	r.SetVersion(version)
	return r, true
}

// Versions returns kversion.Stable() with the max version of every mirror
// RPC added, for kgo.MaxVersions: kgo refuses to send keys it does not know.
func Versions() *kversion.Versions {
	v := kversion.Stable()
	for _, a := range apiTable {
		v.SetMaxKeyVersion(a.Key, a.MaxVersion)
	}
	return v
}
