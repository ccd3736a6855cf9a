// Command kmirrord is kmirror's reference daemon: one site of a KIP-1279
// deployment in one process. It serves, on one port, the KIP's admin RPCs
// (what mirrorctl --bootstrap-server talks to) and a Kafka-protocol data
// plane (mirror/dataplane), so ordinary Kafka clients read and write the
// site's topics and another kmirrord mirrors it over TCP.
//
//	kmirrord -listen 127.0.0.1:9092 -data /var/lib/kmirror/a -cluster-id site-a
//
// Flags:
//   - -listen HOST:PORT: the listener of the admin RPCs and the data plane
//     (port 0 picks a free port; the log line "kmirrord listening" names it).
//   - -advertise HOST:PORT: the address Metadata gives clients (default: the
//     listen address with the bound port; the host name when HOST is empty
//     or unspecified).
//   - -data DIR: a file destination (mirror.OpenFileDestination) with the
//     durable default state stores under it (mirror.New with no stores). One
//     process per DIR: a second one fails at once.
//   - -cluster-id ID: the site's cluster id. Used on first start (a random id
//     when empty) and stored in DIR/kmirrord-cluster-id; a later start with
//     another ID is refused.
//   - -enforce-acls: every request is authorized against the site's ACLs,
//     its own (CreateAcls, kept in DIR/kmirror-local-acls.json) and those the
//     mirrors synced (acls.include), with Kafka's semantics and error codes:
//     the data plane's keys (dataplane.Config.EnforceACLs), DescribeConfigs,
//     the credential and quota keys, and the KIP's mirror RPCs through the
//     same decision (dataplane.DataPlane.Authorizer: CREATE, ALTER or
//     DESCRIBE on the CLUSTER_MIRROR, CLUSTER_MIRROR_AUTHORIZATION_FAILED;
//     CLUSTER_ACTION on the cluster for the instance RPCs). Every key the
//     listener serves has a rule (the daemon refuses to start otherwise);
//     ApiVersions, SaslHandshake and SaslAuthenticate are the only keys
//     without one. Off by default: every client may do everything, as on a
//     broker without an authorizer, and the ACL RPCs answer
//     SECURITY_DISABLED. The principal is the SASL user (User:alice), else
//     the client certificate's subject (User:CN=app,O=acme), else
//     User:ANONYMOUS.
//   - -super-users P1;P2: principals allowed everything with -enforce-acls
//     (';' as Kafka's super.users; ',' also separates, except inside a
//     certificate principal).
//   - -tls-cert FILE, -tls-key FILE: TLS on the listener (PEM).
//   - -tls-client-ca FILE: require client certificates of these CAs; the
//     principal is User: and the subject DN in RFC 2253 form, as Kafka's
//     default ssl.principal.mapping.rules.
//   - -sasl-mechanisms M1,M2: every client must authenticate with one of
//     SCRAM-SHA-512, SCRAM-SHA-256, PLAIN (SASL_SSL with -tls-cert,
//     SASL_PLAINTEXT without), against the SCRAM credentials stored salted
//     and hashed in DIR/kmirror-scram-credentials.json (mirror/auth). They
//     are managed with DescribeUserScramCredentials and
//     AlterUserScramCredentials (kafka-configs --entity-type users), which
//     with -enforce-acls need DESCRIBE and ALTER on the cluster.
//   - -add-scram 'SCRAM-SHA-512=[name=admin,password=secret]': store a
//     credential before listening (kafka-storage's --add-scram syntax;
//     repeatable), so the first user needs no network call.
//   - -allow-anonymous: serve unauthenticated clients on a listener that is
//     not loopback; without it kmirrord refuses such a listener unless
//     -sasl-mechanisms or -tls-client-ca is given. Loopback listeners serve
//     anonymous clients as before.
//   - failed authentications are logged at most once per client host and
//     minute, and counted in kmirror_auth_failures_total (-metrics).
//   - -mirror.metadata.refresh.interval.ms (or -sync-interval as a duration), the FAILED
//     retry -mirror.failed.retry.initial.backoff.ms, -mirror.failed.retry.max.backoff.ms
//     and -mirror.failed.retry.max.attempts (the prototype's names; a mirror's own
//     configs of the same names override them, docs/CONFIG.md), -log-level,
//     -log-format, -cpuprofile, -memprofile: see -help.
//
// Its mirrors use mirror.New's defaults: a fetcher.KafkaSource and a sarama
// source admin for the source cluster, and the admin-RPC peer (LME lookup)
// on it, so a kmirrord mirrors a Kafka cluster or another kmirrord alike.
// Besides the data plane's keys it answers DescribeConfigs for topics (the
// configs kept with each topic), which the metadata sync of a mirror of this
// site reads.
//
// SIGTERM or SIGINT stops it gracefully: the server closes its listener and
// connections, then the Mirror stops its reconcilers and fetchers and closes
// its state stores, then the destination closes its logs and releases DIR.
//
// Exit codes: 0 after a graceful stop, 1 on a runtime failure (a locked or
// unwritable DIR, a listener that cannot be opened, a failure while
// serving), 2 on bad usage (an unknown or invalid flag, a -cluster-id that
// differs from the one DIR holds).
//
// main calls run(ctx, args, stderr); main_test.go drives the same run.
package main
