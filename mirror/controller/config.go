package controller

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// Mirror-level configuration keys (the CLUSTER_MIRROR resource, spec §13.2). The
// constants are the canonical spelling, the prototype's latest one. Each per-mirror key of
// the prototype is also accepted with a "mirror." prefix (mirror.topics.include is
// topics.include, mirror.fetch.wait.max.ms is fetch.wait.max.ms); see CanonicalConfigKey.
const (
	KeyBootstrapServers    = "bootstrap.servers"
	KeyTopicsInclude       = "topics.include"
	KeyTopicsExclude       = "topics.exclude"
	KeyGroupsInclude       = "groups.include"
	KeyGroupsExclude       = "groups.exclude"
	KeyTopicPropertiesExcl = "topic.properties.exclude"
	// KeyACLsInclude holds the ACL rules to sync from the source,
	// resourceType;resourceName;operation;permissionType;principal each (see
	// ParseACLRule): the metadata sync copies the matching source ACLs to a
	// destination that implements ACLStore (acl.go).
	KeyACLsInclude = "acls.include"
	// KeySocketTimeoutMs is how long the source may stay unreachable before the
	// mirror's partitions go FAILED (retryable) with the cause.
	KeySocketTimeoutMs = "socket.timeout.ms"
	// KeySocketReceiveBufferBytes sets the receive buffer of every connection to the
	// source used by the data path; -1 keeps the operating system's default.
	KeySocketReceiveBufferBytes = "socket.receive.buffer.bytes"
	KeySecurityProtocol         = "security.protocol"
	KeySASLMechanism            = "sasl.mechanism"
	KeySASLUsername             = "sasl.username"
	KeySASLPassword             = "sasl.password"
	KeySSLCAFile                = "ssl.truststore.location"
	KeySSLCertFile              = "ssl.keystore.location"
	KeySSLKeyFile               = "ssl.key.location"
	KeySSLEndpointIdent         = "ssl.endpoint.identification.algorithm"
	KeyRequestTimeoutMs         = "request.timeout.ms"
	KeyFetchWaitMaxMs           = "fetch.wait.max.ms"
	KeyFetchBackoffMs           = "fetch.backoff.ms"
	KeyFetchMinBytes            = "fetch.min.bytes"
	KeyFetchResponseMaxBytes    = "fetch.response.max.bytes"
	KeyFetchMaxBytes            = "fetch.max.bytes"
	KeyUncleanLeaderElection    = "mirror.support.unclean.leader.election"
	// KeyStopOpenTransactions says how STOPPING closes the transactions left
	// open in the destination: "abort" (the default, spec §8.1) appends an
	// ABORT marker for each and keeps every mirrored record; "truncate" cuts
	// the log at its last stable offset, so the destination holds only
	// completed transactions, at the price of every record after the first
	// open transaction (committed records of other producers included).
	KeyStopOpenTransactions = "mirror.stop.open.transactions"
	// KeyFidelityCheckIntervalMs is the period of the continuous fidelity check: every
	// interval, each MIRRORING or PAUSED partition re-reads a small range of already
	// mirrored offsets from the source and compares the batch headers with its own;
	// 0 turns the check off.
	KeyFidelityCheckIntervalMs = "fidelity.check.interval.ms"
	// KeyFidelityCheckMaxBytes bounds what one check reads from the source per
	// partition.
	KeyFidelityCheckMaxBytes = "fidelity.check.max.bytes"
)

// defaultTopicPropertiesExclude are the topic configs never synced from the source.
var defaultTopicPropertiesExclude = []string{
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
	"log.message.timestamp.after.max.ms", "message.timestamp.type",
	"unclean.leader.election.enable", "min.insync.replicas", "mirror.*",
}

// configKey describes one known mirror-level key: its default and its validator.
type configKey struct {
	def      string
	validate func(string) error
}

var knownKeys = map[string]configKey{
	KeyBootstrapServers:         {"", validateBootstrap},
	KeyTopicsInclude:            {"", validateRegexList},
	KeyTopicsExclude:            {"__.*", validateRegexList},
	KeyGroupsInclude:            {".*", validateRegexList},
	KeyGroupsExclude:            {"", validateRegexList},
	KeyTopicPropertiesExcl:      {strings.Join(defaultTopicPropertiesExclude, ","), nil},
	KeyACLsInclude:              {"*", validateACLRules},
	KeySocketTimeoutMs:          {"30000", validateInt(1)},
	KeySocketReceiveBufferBytes: {"65536", validateIntOrMinusOne},
	KeySecurityProtocol:         {"PLAINTEXT", validateOneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")},
	KeySASLMechanism:            {"PLAIN", validateOneOf("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")},
	KeySASLUsername:             {"", nil},
	KeySASLPassword:             {"", nil},
	KeySSLCAFile:                {"", nil},
	KeySSLCertFile:              {"", nil},
	KeySSLKeyFile:               {"", nil},
	KeySSLEndpointIdent:         {"https", validateOneOf("https", "")},
	KeyRequestTimeoutMs:         {"30000", validateInt(1)},
	KeyFetchWaitMaxMs:           {"1000", validateInt(0)},
	KeyFetchBackoffMs:           {"1000", validateInt(0)},
	KeyFetchMinBytes:            {"1", validateInt(0)},
	KeyFetchResponseMaxBytes:    {"10485760", validateInt(1)},
	KeyFetchMaxBytes:            {"1048576", validateInt(1)},
	KeyUncleanLeaderElection:    {"false", validateOneOf("true", "false")},
	KeyStopOpenTransactions:     {"abort", validateOneOf("abort", "truncate")},
	KeyFidelityCheckIntervalMs:  {"30000", validateInt(0)},
	KeyFidelityCheckMaxBytes:    {"65536", validateInt(1)},
	// The connection keys of config_conn.go: their values are checked when the
	// connection is loaded (kafkaclient.Load, at CreateClusterMirror), where files
	// are read too, so that a stored mirror always replays.
	KeySSLTruststoreType:     {"PEM", nil},
	KeySSLTruststoreCerts:    {"", nil},
	KeySSLTruststorePassword: {"", nil},
	KeySSLKeystoreType:       {"PEM", nil},
	KeySSLKeystoreChain:      {"", nil},
	KeySSLKeystoreKey:        {"", nil},
	KeySSLKeystorePassword:   {"", nil},
	KeySSLKeyPassword:        {"", nil},
	KeySASLJAASConfig:        {"", nil},
}

// MirrorConfig is the parsed, validated configuration of one cluster mirror.
type MirrorConfig struct {
	BootstrapServers       []string
	TopicsInclude          []string
	TopicsExclude          []string
	GroupsInclude          []string
	GroupsExclude          []string
	TopicPropertiesExclude []string
	SecurityProtocol       string
	SASLMechanism          string
	SASLUsername           string
	SASLPassword           string
	TLSCAFile              string
	TLSCertFile            string
	TLSKeyFile             string
	TLSVerifyHostname      bool
	// TLS material in Kafka's other spellings (config_conn.go): the store types,
	// inline PEM and the key password; the store passwords are kept only to be
	// refused with a PEM store.
	TLSTruststoreType     string
	TLSTruststoreCerts    string
	TLSTruststorePassword string
	TLSKeystoreType       string
	TLSKeystoreChain      string
	TLSKeystoreKey        string
	TLSKeystorePassword   string
	TLSKeyPassword        string
	// SASLJAASConfig is sasl.jaas.config (username and password of a Plain or Scram
	// login module).
	SASLJAASConfig         string
	RequestTimeout         time.Duration
	FetchMaxWait           time.Duration
	FetchBackoff           time.Duration
	FetchMinBytes          int32
	FetchResponseMaxBytes  int32
	FetchPartitionMaxBytes int32
	// ACLsInclude are the parsed acls.include rules.
	ACLsInclude []ACLRule
	// SocketTimeout is how long the source may stay unreachable before the
	// partitions of the mirror go FAILED (retryable).
	SocketTimeout time.Duration
	// SocketReceiveBufferBytes is the receive buffer of the data path's source
	// connections; -1 keeps the operating system's default.
	SocketReceiveBufferBytes int
	SupportUncleanLeaderElec bool
	// StopMode is how STOPPING closes open transactions (KeyStopOpenTransactions).
	StopMode statemachine.StopMode
	// FidelityCheckInterval is the period of the fidelity check, 0 = off
	// (KeyFidelityCheckIntervalMs); FidelityCheckMaxBytes what one check reads of a
	// partition (KeyFidelityCheckMaxBytes).
	FidelityCheckInterval time.Duration
	FidelityCheckMaxBytes int32

	topicsInclude, topicsExclude []*regexp.Regexp
	groupsInclude, groupsExclude []*regexp.Regexp
}

// ParseMirrorConfig validates raw mirror configs and fills in defaults. Unknown keys are
// refused so that a typo never silently falls back to a default. Every problem is
// reported, not only the first, as an INVALID_CONFIG error.
func ParseMirrorConfig(raw map[string]string) (MirrorConfig, error) {
	raw, problems := canonicalConfigs(raw)
	var keyErrs []error
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ck, ok := knownKeys[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown config %q", k))
			continue
		}
		if ck.validate != nil {
			if err := ck.validate(raw[k]); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", k, err))
				keyErrs = append(keyErrs, &KeyError{Key: k, Err: err})
			}
		}
	}
	get := func(k string) string {
		if v, ok := raw[k]; ok {
			return v
		}
		return knownKeys[k].def
	}
	if strings.TrimSpace(get(KeyBootstrapServers)) == "" {
		problems = append(problems, KeyBootstrapServers+" is required")
		keyErrs = append(keyErrs, NewKeyError(KeyBootstrapServers, ErrNoSeeds, "required"))
	}
	if len(problems) > 0 {
		return MirrorConfig{}, invalidConfig(problems, keyErrs...)
	}
	c := MirrorConfig{
		BootstrapServers:         splitList(get(KeyBootstrapServers)),
		TopicsInclude:            splitList(get(KeyTopicsInclude)),
		TopicsExclude:            splitList(get(KeyTopicsExclude)),
		GroupsInclude:            splitList(get(KeyGroupsInclude)),
		GroupsExclude:            splitList(get(KeyGroupsExclude)),
		TopicPropertiesExclude:   splitList(get(KeyTopicPropertiesExcl)),
		SecurityProtocol:         get(KeySecurityProtocol),
		SASLMechanism:            get(KeySASLMechanism),
		SASLUsername:             get(KeySASLUsername),
		SASLPassword:             get(KeySASLPassword),
		TLSCAFile:                get(KeySSLCAFile),
		TLSCertFile:              get(KeySSLCertFile),
		TLSKeyFile:               get(KeySSLKeyFile),
		TLSVerifyHostname:        get(KeySSLEndpointIdent) == "https",
		TLSTruststoreType:        get(KeySSLTruststoreType),
		TLSTruststoreCerts:       get(KeySSLTruststoreCerts),
		TLSTruststorePassword:    get(KeySSLTruststorePassword),
		TLSKeystoreType:          get(KeySSLKeystoreType),
		TLSKeystoreChain:         get(KeySSLKeystoreChain),
		TLSKeystoreKey:           get(KeySSLKeystoreKey),
		TLSKeystorePassword:      get(KeySSLKeystorePassword),
		TLSKeyPassword:           get(KeySSLKeyPassword),
		SASLJAASConfig:           get(KeySASLJAASConfig),
		RequestTimeout:           ms(get(KeyRequestTimeoutMs)),
		FetchMaxWait:             ms(get(KeyFetchWaitMaxMs)),
		FetchBackoff:             ms(get(KeyFetchBackoffMs)),
		FetchMinBytes:            int32(atoi(get(KeyFetchMinBytes))),
		FetchResponseMaxBytes:    int32(atoi(get(KeyFetchResponseMaxBytes))),
		FetchPartitionMaxBytes:   int32(atoi(get(KeyFetchMaxBytes))),
		ACLsInclude:              mustACLRules(get(KeyACLsInclude)),
		SocketTimeout:            ms(get(KeySocketTimeoutMs)),
		SocketReceiveBufferBytes: int(atoi(get(KeySocketReceiveBufferBytes))),
		SupportUncleanLeaderElec: get(KeyUncleanLeaderElection) == "true",
		FidelityCheckInterval:    ms(get(KeyFidelityCheckIntervalMs)),
		FidelityCheckMaxBytes:    int32(min(atoi(get(KeyFidelityCheckMaxBytes)), 1<<30)),
	}
	if get(KeyStopOpenTransactions) == "truncate" {
		c.StopMode = statemachine.StopTruncateToLSO
	}
	c.topicsInclude = compileList(c.TopicsInclude)
	c.topicsExclude = compileList(c.TopicsExclude)
	c.groupsInclude = compileList(c.GroupsInclude)
	c.groupsExclude = compileList(c.GroupsExclude)
	return c, nil
}

// IncludesTopic reports whether auto-discovery selects topic: it matches an include
// pattern and no exclude pattern (exclude wins). Patterns match the whole name, as Java's
// String.matches does.
func (c MirrorConfig) IncludesTopic(topic string) bool {
	return matchAny(c.topicsInclude, topic) && !matchAny(c.topicsExclude, topic)
}

// ExcludesTopic reports whether topic matches an exclude pattern.
func (c MirrorConfig) ExcludesTopic(topic string) bool { return matchAny(c.topicsExclude, topic) }

// IncludesGroup reports whether consumer-group offsets of group are synced.
func (c MirrorConfig) IncludesGroup(group string) bool {
	return matchAny(c.groupsInclude, group) && !matchAny(c.groupsExclude, group)
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func compileList(pats []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(pats))
	for _, p := range pats {
		out = append(out, regexp.MustCompile(anchor(p))) // validated before
	}
	return out
}

func anchor(p string) string { return "^(?:" + p + ")$" }

func validateRegexList(v string) error {
	for _, p := range splitList(v) {
		if _, err := regexp.Compile(anchor(p)); err != nil {
			return fmt.Errorf("invalid pattern %q: %v", p, err)
		}
	}
	return nil
}

func validateBootstrap(v string) error {
	for _, hp := range splitList(v) {
		i := strings.LastIndexByte(hp, ':')
		if i <= 0 || i == len(hp)-1 {
			return fmt.Errorf("%w: %q", ErrBadAddress, hp)
		}
		if p, err := strconv.Atoi(hp[i+1:]); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("%w: %q has an invalid port", ErrBadAddress, hp)
		}
	}
	return nil
}

func validateOneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("%w: %q is not one of %q", ErrUnsupportedValue, v, allowed)
	}
}

func validateInt(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an int32", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func validateIntOrMinusOne(v string) error {
	if v == "-1" {
		return nil
	}
	return validateInt(1)(v)
}

func atoi(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }

func ms(v string) time.Duration { return time.Duration(atoi(v)) * time.Millisecond }

// ValidMirrorName reports whether name is a valid mirror name: the rules of a Kafka topic
// name (non-empty, at most 249 characters of [A-Za-z0-9._-], not "." or "..").
func ValidMirrorName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return admin.Errorf(admin.CodeInvalidRequest, "invalid mirror name %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return admin.Errorf(admin.CodeInvalidRequest, "invalid mirror name %q: character %q not allowed", name, r)
		}
	}
	return nil
}
