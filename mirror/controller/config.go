package controller

import (
	"fmt"
	"math"
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
	// KeyMetadataRefreshIntervalMs is the period of the mirror's metadata sync (the
	// prototype's broker-level key, here also per mirror); unset: the host's.
	KeyMetadataRefreshIntervalMs = "mirror.metadata.refresh.interval.ms"
	// KeyFailedRetryInitialBackoffMs, KeyFailedRetryMaxBackoffMs and
	// KeyFailedRetryMaxAttempts are the automatic retry of FAILED partitions (the
	// prototype's later broker-level keys, here also per mirror); unset: the host's.
	KeyFailedRetryInitialBackoffMs = "mirror.failed.retry.initial.backoff.ms"
	KeyFailedRetryMaxBackoffMs     = "mirror.failed.retry.max.backoff.ms"
	KeyFailedRetryMaxAttempts      = "mirror.failed.retry.max.attempts"
	// KeySourceClusterID is the source cluster's id as kmirror recorded it when it
	// last reached the source (Controller.RecordSourceClusterID), so that it is known
	// after a restart before the source answers.
	KeySourceClusterID = "mirror.source.cluster.id"
	// KeyFidelityCheckIntervalMs is the period of the continuous fidelity check: every
	// interval, each MIRRORING or PAUSED partition re-reads a small range of already
	// mirrored offsets from the source and compares the batch headers with its own;
	// 0 turns the check off.
	KeyFidelityCheckIntervalMs = "fidelity.check.interval.ms"
	// KeyFidelityCheckMaxBytes bounds what one check reads from the source per
	// partition.
	KeyFidelityCheckMaxBytes = "fidelity.check.max.bytes"
)

// neverSyncedTopicProperties are the topic configs never synced from the source, in
// addition to a mirror's topic.properties.exclude: configs of the source's storage and
// placement (tiered storage, local retention of a tiered log, replication throttles), the
// checks a destination sets for its own writers (timestamps, min.insync.replicas, unclean
// election) and kmirror's own mirror.* topic configs. MirrorMaker 2's default
// config.properties.exclude is the precedent; unlike it, a mirror's list adds to this one
// and never replaces it. A '*' matches any run of characters.
var neverSyncedTopicProperties = []string{
	"remote.storage.enable", "remote.log.*", "local.retention.ms", "local.retention.bytes",
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
	"message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
	"log.message.timestamp.after.max.ms", "message.timestamp.type",
	"unclean.leader.election.enable", "min.insync.replicas", "mirror.*",
}

// NeverSyncedTopicProperties returns the topic config patterns the metadata sync never
// copies from the source, whatever a mirror's topic.properties.exclude ('*' matches any
// run of characters). The slice is a copy.
func NeverSyncedTopicProperties() []string {
	return append([]string(nil), neverSyncedTopicProperties...)
}

// NeverMirrored reports whether topic is one no mirror ever selects, whatever its
// patterns, an explicit start included: every name that starts with "__" (Kafka's
// internal topics __consumer_offsets, __transaction_state, __share_group_state,
// __remote_log_metadata, __cluster_metadata, and kmirror's __mirror_state). A source
// topic Kafka flags internal is never mirrored either (the metadata sync skips it).
func NeverMirrored(topic string) bool { return strings.HasPrefix(topic, "__") }

// configKey describes one known mirror-level key: its default, its validator and its
// line in docs/CONFIG.md.
type configKey struct {
	key      string
	def      string
	validate func(string) error
	// shown is the default as docs/CONFIG.md shows it ("" = def in backquotes) and doc
	// what the key does; a key without doc is documented elsewhere in CONFIG.md (the
	// connection keys).
	shown, doc string
}

// configTable is the one table of mirror-level keys, in the order docs/CONFIG.md lists
// them (TestConfigDocMatchesTable keeps the two the same).
var configTable = []configKey{
	{key: KeyBootstrapServers, validate: validateBootstrap, shown: "required", doc: "source cluster, `host:port,...`"},
	{key: KeyTopicsInclude, validate: validateRegexList, shown: "`\"\"` (only explicitly started topics)",
		doc: "regexes of topics to auto-discover; exclude wins"},
	{key: KeyTopicsExclude, validate: validateRegexList,
		doc: "regexes of topics not mirrored, in addition to the ones never mirrored whatever the patterns: every topic whose name starts with `__` (Kafka's internal topics, `__remote_log_metadata`, kmirror's `__mirror_state`) and every topic the source flags internal (an explicit start of one is INVALID_REQUEST; one an earlier version started is stopped by the next sync)"},
	{key: KeyGroupsInclude, def: ".*", validate: validateRegexList, doc: "consumer groups and share groups whose offsets are synced (see *Share groups* below)"},
	{key: KeyGroupsExclude, validate: validateRegexList, doc: "groups whose offsets are not synced; exclude wins"},
	{key: KeyACLsInclude, def: "*", validate: validateACLRules,
		doc: "ACL rules `resourceType;resourceName;operation;permissionType;principal` (`*` or a missing trailing field matches anything, resourceName is a regex); validated at create, a bad rule is refused naming the rule. The metadata sync copies the matching source ACLs (DescribeAcls) to a destination implementing `ACLStore` (LocalDestination, durable); a removal on the source propagates. Enforcement is the host's / data plane's. A source without an authorizer (SECURITY_DISABLED) is warned about once and skipped until its answer changes"},
	{key: KeyTopicPropertiesExcl,
		doc: "topic configs not synced (`*` matches any run of characters), in addition to the ones never synced (`controller.NeverSyncedTopicProperties`, after MirrorMaker 2's DefaultConfigPropertyFilter): the source's storage and placement (`remote.storage.enable`, `remote.log.*`, `local.retention.ms`, `local.retention.bytes`, `leader.replication.throttled.replicas`, `follower.replication.throttled.replicas`), the destination's own checks (timestamps, `min.insync.replicas`, `unclean.leader.election.enable`) and `mirror.*`. A tiered source topic is mirrored into a local topic; a `remote.storage.enable=true` an earlier version copied from the source is turned off by the sync"},
	{key: KeyFetchWaitMaxMs, def: "1000", validate: validateInt(0), doc: "Fetch MaxWait"},
	{key: KeyFetchBackoffMs, def: "1000", validate: validateInt(0), doc: "back-off after a fetch error"},
	{key: KeyFetchMinBytes, def: "1", validate: validateInt(0), doc: "Fetch MinBytes"},
	{key: KeyFetchResponseMaxBytes, def: "10485760", validate: validateInt(1), doc: "Fetch MaxBytes"},
	{key: KeyFetchMaxBytes, def: "1048576", validate: validateInt(1), doc: "per-partition MaxBytes"},
	{key: KeySocketTimeoutMs, def: "30000", validate: validateInt(1), doc: "how long the source may stay unreachable before the mirror's partitions go FAILED (retryable)"},
	{key: KeySocketReceiveBufferBytes, def: "65536", validate: validateIntOrMinusOne, doc: "receive buffer of the franz-go connections to the source (-1: system default)"},
	{key: KeyRequestTimeoutMs, def: "30000", validate: validateInt(1), doc: "timeout of a request to the source"},
	{key: KeyMetadataRefreshIntervalMs, validate: validateInt(0), shown: "the host's (kmirrord `-mirror.metadata.refresh.interval.ms`, 30000)",
		doc: "period of the mirror's metadata sync (discovery, topics, configs, groups, ACLs), spec §13.1; 0 skips the mirror's cycles. A host whose sync is off (kmirrord `-sync-interval` negative) syncs no mirror"},
	{key: KeyFailedRetryInitialBackoffMs, validate: validateInt(1), shown: "the host's (kmirrord flag of the same name, 1000)",
		doc: "first back-off of the automatic retry of a FAILED partition; it doubles per attempt, shared by the mirror's partitions"},
	{key: KeyFailedRetryMaxBackoffMs, validate: validateInt(1), shown: "the host's (kmirrord flag of the same name, 300000)",
		doc: "largest back-off of the FAILED retry; at least the initial back-off when both are set"},
	{key: KeyFailedRetryMaxAttempts, validate: validateIntRange(0, math.MaxInt16), shown: "the host's (kmirrord flag of the same name, 100)",
		doc: "automatic retries of a FAILED partition before it waits for `mirrorctl --recover`; 0: no automatic retry"},
	{key: KeySourceClusterID, validate: validateClusterID, shown: "recorded",
		doc: "the source cluster's id, recorded with the mirror when kmirror reaches the source (and again if it changes), so that `mirrorctl --list` shows it, and `--source-cluster-id` finds the mirror, after a restart before the source answers; given at create, it stands until the source answers"},
	{key: KeySecurityProtocol, def: "PLAINTEXT", validate: validateOneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")},
	{key: KeySASLMechanism, def: "PLAIN", validate: validateOneOf("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")},
	{key: KeySASLUsername}, {key: KeySASLPassword},
	{key: KeySSLCAFile}, {key: KeySSLCertFile}, {key: KeySSLKeyFile},
	{key: KeySSLEndpointIdent, def: "https", validate: validateOneOf("https", "")},
	// The connection keys of config_conn.go: their values are checked when the
	// connection is loaded (kafkaclient.Load, at CreateClusterMirror), where files
	// are read too, so that a stored mirror always replays.
	{key: KeySSLTruststoreType, def: "PEM"}, {key: KeySSLTruststoreCerts}, {key: KeySSLTruststorePassword},
	{key: KeySSLKeystoreType, def: "PEM"}, {key: KeySSLKeystoreChain}, {key: KeySSLKeystoreKey},
	{key: KeySSLKeystorePassword}, {key: KeySSLKeyPassword}, {key: KeySASLJAASConfig},
	{key: KeyFidelityCheckIntervalMs, def: "30000", validate: validateInt(0),
		doc: "period of the continuous fidelity check (0: off): each MIRRORING or PAUSED partition re-reads one small range of already mirrored offsets from the source (one Fetch per source leader) and compares the v2 batch headers and CRC-32C with its own; the next unverified range first, then, once caught up, a sweep of the verified offsets from the log start. Describe shows `VerifiedOffset`; a mismatch fails the partition (not retried) naming the offset and both CRCs. The check also reads the source end of PAUSED partitions (their lag). Compacted topics are passed over (the source's cleaner rewrites batches after they were mirrored)"},
	{key: KeyFidelityCheckMaxBytes, def: "65536", validate: validateInt(1), doc: "what one check reads of a partition from the source (at least one batch)"},
	{key: KeyUncleanLeaderElection, def: "false", validate: validateOneOf("true", "false"),
		doc: "spec §7.4; also honoured as a config of the destination topic (as in the prototype); `mirror.*` topic configs are never synced from the source"},
	{key: KeyStopOpenTransactions, def: "abort", validate: validateOneOf("abort", "truncate"), doc: "`abort` or `truncate` (spec §8.1)"},
}

// knownKeys is configTable by key.
var knownKeys = func() map[string]configKey {
	m := make(map[string]configKey, len(configTable))
	for _, k := range configTable {
		m[k.key] = k
	}
	return m
}()

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
	// MetadataRefreshInterval is KeyMetadataRefreshIntervalMs; MetadataRefreshSet
	// says whether it was given (else the host's interval applies; 0 skips the cycles).
	MetadataRefreshInterval time.Duration
	MetadataRefreshSet      bool
	// FailedRetry is the mirror's own FAILED retry (mirror.failed.retry.*).
	FailedRetry FailedRetry
	// SourceClusterID is the recorded id of the source cluster (KeySourceClusterID),
	// "" before kmirror first reached it.
	SourceClusterID string
	// FidelityCheckInterval is the period of the fidelity check, 0 = off
	// (KeyFidelityCheckIntervalMs); FidelityCheckMaxBytes what one check reads of a
	// partition (KeyFidelityCheckMaxBytes).
	FidelityCheckInterval time.Duration
	FidelityCheckMaxBytes int32

	topicsInclude, topicsExclude []*regexp.Regexp
	groupsInclude, groupsExclude []*regexp.Regexp
}

// FailedRetry is a mirror's own automatic retry of FAILED partitions; each unset field
// keeps the host's value.
type FailedRetry struct {
	// InitialBackoff and MaxBackoff: 0 = unset.
	InitialBackoff, MaxBackoff time.Duration
	// MaxAttempts is used when MaxAttemptsSet (0 = no automatic retry).
	MaxAttempts    int
	MaxAttemptsSet bool
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
	if ib, mb := raw[KeyFailedRetryInitialBackoffMs], raw[KeyFailedRetryMaxBackoffMs]; ib != "" && mb != "" &&
		validateInt(1)(ib) == nil && validateInt(1)(mb) == nil && atoi(mb) < atoi(ib) {
		err := fmt.Errorf("%s is below %s=%s", mb, KeyFailedRetryInitialBackoffMs, ib)
		problems = append(problems, fmt.Sprintf("%s: %v", KeyFailedRetryMaxBackoffMs, err))
		keyErrs = append(keyErrs, &KeyError{Key: KeyFailedRetryMaxBackoffMs, Err: err})
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
		SourceClusterID:          get(KeySourceClusterID),
		FidelityCheckInterval:    ms(get(KeyFidelityCheckIntervalMs)),
		FidelityCheckMaxBytes:    int32(min(atoi(get(KeyFidelityCheckMaxBytes)), 1<<30)),
	}
	if v, ok := raw[KeyMetadataRefreshIntervalMs]; ok {
		c.MetadataRefreshInterval, c.MetadataRefreshSet = ms(v), true
	}
	if v, ok := raw[KeyFailedRetryInitialBackoffMs]; ok {
		c.FailedRetry.InitialBackoff = ms(v)
	}
	if v, ok := raw[KeyFailedRetryMaxBackoffMs]; ok {
		c.FailedRetry.MaxBackoff = ms(v)
	}
	if v, ok := raw[KeyFailedRetryMaxAttempts]; ok {
		c.FailedRetry.MaxAttempts, c.FailedRetry.MaxAttemptsSet = int(atoi(v)), true
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
// pattern, no exclude pattern (exclude wins) and is not NeverMirrored. Patterns match
// the whole name, as Java's String.matches does.
func (c MirrorConfig) IncludesTopic(topic string) bool {
	return matchAny(c.topicsInclude, topic) && !c.ExcludesTopic(topic)
}

// ExcludesTopic reports whether topic is excluded from the mirror: it is NeverMirrored
// or matches an exclude pattern.
func (c MirrorConfig) ExcludesTopic(topic string) bool {
	return NeverMirrored(topic) || matchAny(c.topicsExclude, topic)
}

// SyncsTopicProperty reports whether the metadata sync copies the source topic config
// name: it matches neither NeverSyncedTopicProperties nor topic.properties.exclude.
func (c MirrorConfig) SyncsTopicProperty(name string) bool {
	return !MatchProperty(neverSyncedTopicProperties, name) && !MatchProperty(c.TopicPropertiesExclude, name)
}

// MatchProperty reports whether name matches one of patterns, literal config names in
// which '*' matches any (possibly empty) run of characters ("mirror.*", "remote.log.*").
func MatchProperty(patterns []string, name string) bool {
	for _, p := range patterns {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// globMatch matches s against p where '*' matches any (possibly empty) run of bytes.
func globMatch(p, s string) bool {
	star, mark := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && p[i] == '*':
			star, mark = i, j
			i++
		case i < len(p) && p[i] == s[j]:
			i++
			j++
		case star >= 0:
			i = star + 1
			mark++
			j = mark
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}

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

func validateIntRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an int32", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is not in %d..%d", n, lo, hi)
		}
		return nil
	}
}

// validateClusterID accepts a Kafka cluster id: 1 to 255 printable characters without
// spaces.
func validateClusterID(v string) error {
	if v == "" || len(v) > 255 {
		return fmt.Errorf("a cluster id has 1 to 255 characters, got %d", len(v))
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("cluster id %q has a space or a control character", v)
		}
	}
	return nil
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
