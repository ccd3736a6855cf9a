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
//     and the KIP's mirror RPCs through the same decision
//     (dataplane.DataPlane.Authorizer: CREATE, ALTER or DESCRIBE on the
//     CLUSTER_MIRROR, CLUSTER_MIRROR_AUTHORIZATION_FAILED; CLUSTER_ACTION on
//     the cluster for the instance RPCs). Every key the listener serves has
//     a rule (the daemon refuses to start otherwise); ApiVersions,
//     SaslHandshake and SaslAuthenticate are the only keys without one.
//     Off by default: every client may do everything, as on a broker
//     without an authorizer, and the ACL RPCs answer SECURITY_DISABLED.
//   - -super-users P1,P2: principals allowed everything with -enforce-acls.
//   - -tls-cert FILE -tls-key FILE [-tls-client-ca FILE]: TLS on the
//     listener (PEM). With a client CA a client certificate is verified
//     when sent and names the principal, "User:" + its subject
//     (User:CN=alice); a client without one is User:ANONYMOUS.
//   - -sync-interval, -log-level, -log-format, -cpuprofile: see -help.
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
