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
//   - -enforce-acls: the data plane checks every request against the ACLs
//     the mirrors synced to this site (acls.include), with Kafka's semantics
//     and error codes (dataplane.Config.EnforceACLs). Off by default: every
//     client may do everything, as on a broker without an authorizer. The
//     listener is plaintext without SASL, so every client is User:ANONYMOUS.
//   - -super-users P1,P2: principals allowed everything with -enforce-acls.
//   - -mirror.metadata.refresh.interval.ms (or -sync-interval as a duration), the FAILED
//     retry -mirror.failed.retry.initial.backoff.ms, -mirror.failed.retry.max.backoff.ms
//     and -mirror.failed.retry.max.attempts (the prototype's names; a mirror's own
//     configs of the same names override them, docs/CONFIG.md), -log-level,
//     -log-format, -cpuprofile: see -help.
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
