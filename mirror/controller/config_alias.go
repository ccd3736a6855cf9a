package controller

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/admin"
)

// prefixedKeys are the per-mirror keys the prototype accepts both with and without the
// "mirror." prefix. The unprefixed spelling is canonical.
var prefixedKeys = []string{
	KeyFetchWaitMaxMs, KeyFetchBackoffMs, KeyFetchMinBytes, KeyFetchResponseMaxBytes,
	KeyFetchMaxBytes, KeySocketTimeoutMs, KeySocketReceiveBufferBytes,
	KeyTopicsInclude, KeyTopicsExclude, KeyGroupsInclude, KeyGroupsExclude,
	KeyACLsInclude, KeyTopicPropertiesExcl,
}

// keyAliases maps each accepted alternative spelling to its canonical key.
var keyAliases = func() map[string]string {
	m := make(map[string]string, len(prefixedKeys))
	for _, k := range prefixedKeys {
		m["mirror."+k] = k
	}
	return m
}()

// CanonicalConfigKey returns the canonical spelling of a mirror config key:
// "mirror.topics.include" becomes "topics.include"; a canonical or unknown key is
// returned as it is.
func CanonicalConfigKey(k string) string {
	if c, ok := keyAliases[k]; ok {
		return c
	}
	return k
}

// CanonicalMirrorConfigs returns raw with every key in its canonical spelling. A key
// given in two spellings with the same value is kept once; with different values it is
// refused with INVALID_CONFIG, naming both spellings.
func CanonicalMirrorConfigs(raw map[string]string) (map[string]string, error) {
	out, problems := canonicalConfigs(raw)
	if len(problems) > 0 {
		return nil, invalidConfig(problems)
	}
	return out, nil
}

// canonicalConfigs rewrites raw to canonical keys and reports every key given in two
// spellings with different values.
func canonicalConfigs(raw map[string]string) (map[string]string, []string) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(raw))
	from := make(map[string]string, len(raw))
	var problems []string
	for _, k := range keys {
		c := CanonicalConfigKey(k)
		if prev, ok := out[c]; ok {
			if prev != raw[k] {
				problems = append(problems, fmt.Sprintf("%s=%q and %s=%q name the same config with different values",
					from[c], prev, k, raw[k]))
			}
			continue
		}
		out[c], from[c] = raw[k], k
	}
	return out, problems
}

// invalidConfig is the INVALID_CONFIG error of problems; keyErrs, the *KeyError of
// each bad key, are wrapped too, so that a caller decides on errors.As, not on text.
func invalidConfig(problems []string, keyErrs ...error) error {
	ae := admin.NewError(admin.CodeInvalidConfig, "mirror config: "+strings.Join(problems, "; "))
	if len(keyErrs) == 0 {
		return ae
	}
	return &configError{ae: ae, keys: keyErrs}
}

// configError is an INVALID_CONFIG *admin.Error with the *KeyError of each bad key.
type configError struct {
	ae   *admin.Error
	keys []error
}

// Error implements error: the text of the admin error.
func (e *configError) Error() string { return e.ae.Error() }

// Unwrap returns the admin error, then the key errors.
func (e *configError) Unwrap() []error { return append([]error{e.ae}, e.keys...) }
