package controller

import (
	"fmt"
	"sort"
	"strings"
)

// keyDoc documents one row of the mirror-config tables of docs/CONFIG.md: one key,
// or several keys that share their meaning. It is the text half of the one config
// table (knownKeys holds the defaults and validators); ConfigDoc renders both.
type keyDoc struct {
	keys []string
	// def is the default as a reader should see it; "" shows the knownKeys default
	// (nothing when that is empty).
	def     string
	meaning string
	// conn puts the row in the connection table instead of the mirror table.
	conn bool
}

// keyDocs are the rows, in the order docs/CONFIG.md shows them.
var keyDocs = []keyDoc{
	{keys: []string{KeyBootstrapServers}, def: "required", meaning: "source cluster, `host:port,...`"},
	{keys: []string{KeyTopicsInclude}, def: "`\"\"` (only explicitly started topics)", meaning: "regexes of topics to auto-discover; exclude wins"},
	{keys: []string{KeyTopicsExclude}, def: "`__.*`", meaning: "regexes of topics never mirrored"},
	{keys: []string{KeyGroupsInclude}, def: "`.*`", meaning: "consumer groups and share groups whose offsets are synced (see *Share groups* below)"},
	{keys: []string{KeyGroupsExclude}, def: "`\"\"`"},
	{keys: []string{KeyACLsInclude}, def: "`*`", meaning: "ACL rules `resourceType;resourceName;operation;permissionType;principal` (`*` or a missing trailing field matches anything, resourceName is a regex); validated at create, a bad rule is refused naming the rule. The metadata sync copies the matching source ACLs (DescribeAcls) to a destination implementing `ACLStore` (LocalDestination, durable); a removal on the source propagates. Enforcement is the host's / data plane's."},
	{keys: []string{KeyTopicPropertiesExcl}, def: "throttles, timestamp checks, `unclean.leader.election.enable`, `min.insync.replicas`, `mirror.*`", meaning: "topic configs never synced"},
	{keys: []string{KeyFetchWaitMaxMs}, meaning: "Fetch MaxWait"},
	{keys: []string{KeyFetchBackoffMs}, meaning: "back-off after a fetch error"},
	{keys: []string{KeyFetchMinBytes}, meaning: "Fetch MinBytes"},
	{keys: []string{KeyFetchResponseMaxBytes}, meaning: "Fetch MaxBytes"},
	{keys: []string{KeyFetchMaxBytes}, meaning: "per-partition MaxBytes"},
	{keys: []string{KeySocketTimeoutMs}, meaning: "how long the source may stay unreachable before the mirror's partitions go FAILED (retryable)"},
	{keys: []string{KeySocketReceiveBufferBytes}, meaning: "receive buffer of the franz-go connections to the source (-1: system default)"},
	{keys: []string{KeyRequestTimeoutMs}},
	{keys: []string{KeyUncleanLeaderElection}, meaning: "spec §7.4; also honoured as a config of the destination topic (as in the prototype); `mirror.*` topic configs are never synced from the source while `topic.properties.exclude` keeps `mirror.*`"},
	{keys: []string{KeyStopOpenTransactions}, meaning: "`abort` or `truncate` (spec §8.1)"},

	{conn: true, keys: []string{KeySecurityProtocol}, meaning: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; `ssl.*` is read only with SSL/SASL_SSL, `sasl.*` only with SASL_* (as in Kafka)"},
	{conn: true, keys: []string{KeySASLMechanism}, meaning: "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; OAUTHBEARER and AWS_MSK_IAM are accepted only with a mechanism given in Go (`WithConnections`)"},
	{conn: true, keys: []string{KeySASLUsername, KeySASLPassword}, meaning: "the credentials of PLAIN and SCRAM"},
	{conn: true, keys: []string{KeySASLJAASConfig}, meaning: "`...PlainLoginModule required username=\"u\" password=\"p\";` or `...ScramLoginModule ...`: the credentials, when `sasl.username`/`sasl.password` are not set; the module must match the mechanism"},
	{conn: true, keys: []string{KeySSLTruststoreType}, meaning: "PEM only; JKS and PKCS12 are refused (kmirror does not parse Java keystores: convert with `keytool -exportcert -rfc` / `openssl pkcs12 -nodes`)"},
	{conn: true, keys: []string{KeySSLCAFile}, meaning: "a PEM file of trusted certificates (none: the system roots)"},
	{conn: true, keys: []string{KeySSLTruststoreCerts}, meaning: "the same, inline PEM (not with `ssl.truststore.location`)"},
	{conn: true, keys: []string{KeySSLKeystoreType}, meaning: "PEM only, as for the trust store"},
	{conn: true, keys: []string{KeySSLCertFile}, meaning: "a PEM file with the client certificate chain and its private key (Kafka's PEM key store), or the chain alone with `ssl.key.location`"},
	{conn: true, keys: []string{KeySSLKeyFile}, meaning: "the private key as a PEM file (kmirror's own key, kept from earlier versions)"},
	{conn: true, keys: []string{KeySSLKeystoreChain, KeySSLKeystoreKey}, meaning: "the chain and the key, inline PEM"},
	{conn: true, keys: []string{KeySSLKeyPassword}, meaning: "decrypts an `ENCRYPTED PRIVATE KEY` (PKCS#8, PBES2 with PBKDF2-HMAC-SHA1/256/512 and AES-CBC, what `openssl pkcs8 -topk8` writes)"},
	{conn: true, keys: []string{KeySSLTruststorePassword, KeySSLKeystorePassword}, meaning: "refused: a PEM store has no store password"},
	{conn: true, keys: []string{KeySSLEndpointIdent}, meaning: "`\"\"` skips the host name check but still verifies the chain"},
}

// ConfigDoc renders the two config tables of docs/CONFIG.md from the one config
// table: the mirror-level keys (canonical key, the spellings also accepted, default,
// meaning) and the connection keys (key, default, meaning). It fails when a known key
// has no row, or a row names a key that is not known, so the document cannot drift
// from what CreateClusterMirror accepts.
func ConfigDoc() (mirrorTable, connTable string, err error) {
	seen := map[string]bool{}
	var m, c strings.Builder
	m.WriteString("| canonical key | also accepted | default | meaning |\n|---|---|---|---|\n")
	c.WriteString("| key | default | meaning |\n|---|---|---|\n")
	for _, d := range keyDocs {
		var names, aliases, defs []string
		for _, k := range d.keys {
			ck, ok := knownKeys[k]
			if !ok {
				return "", "", fmt.Errorf("controller: docs name unknown config key %q", k)
			}
			if seen[k] {
				return "", "", fmt.Errorf("controller: config key %q documented twice", k)
			}
			seen[k] = true
			names = append(names, "`"+k+"`")
			for alias, canon := range keyAliases {
				if canon == k {
					aliases = append(aliases, "`"+alias+"`")
				}
			}
			if ck.def != "" {
				defs = append(defs, ck.def)
			}
		}
		sort.Strings(aliases)
		def := d.def
		if def == "" {
			def = strings.Join(defs, ", ")
		}
		row := []string{strings.Join(names, ", ")}
		if !d.conn {
			row = append(row, strings.Join(aliases, ", "))
		}
		row = append(row, def, d.meaning)
		b := &m
		if d.conn {
			b = &c
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
	}
	for k := range knownKeys {
		if !seen[k] {
			return "", "", fmt.Errorf("controller: config key %q has no row in keyDocs", k)
		}
	}
	return m.String(), c.String(), nil
}
