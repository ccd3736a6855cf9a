// Package kafkatest is kmirror's harness for tests against real Apache Kafka brokers.
//
// What it owns: reading the environment that scripts/kafka/kafka.sh writes (cluster A, three
// combined KRaft broker+controller nodes, and cluster B, one node, all on 127.0.0.1), deciding
// whether a test skips or fails when that environment is missing, and small helpers built on
// franz-go's kgo and kmsg: creating topics, waiting for partition leaders, stopping and starting
// one broker through the script (for leader-failover tests), and running Kafka's
// DumpLogSegments tool on segment files.
//
// Who calls it: integration tests of the other kmirror packages (fetcher, mirror, coordinator
// stores) and the smoke test in this package. Nothing outside tests imports it. The command
// cmd/kafkaprobe is the script's Java-free readiness probe.
//
// How to run the tests against real Kafka:
//
//	bash scripts/kafka/kafka.sh install   # once; cached in $HOME/.cache/kmirror/kafka
//	bash scripts/kafka/kafka.sh start     # writes /tmp/kmirror-kafka/env
//	source /tmp/kmirror-kafka/env
//	go test ./internal/kafkatest/ -run . -v
//	bash scripts/kafka/kafka.sh stop
//
// Without the environment every test that asks for a cluster skips, except in CI with
// CI=true and KMIRROR_REQUIRE_KAFKA=1, where a missing cluster fails the test.
//
// Cluster B also has a SASL_SSL listener with SCRAM-SHA-512; the env file exports its address
// (KMIRROR_KAFKA_B_SASL_SSL), the CA (KMIRROR_KAFKA_B_CA) and the credentials
// (KMIRROR_KAFKA_B_USER, KMIRROR_KAFKA_B_PASSWORD).
//
// Cluster C is an older source: one Kafka 3.9 node with an authorizer (StandardAuthorizer,
// everything allowed), started by its own invocation of the script with its own work directory
// and ports (KMIRROR_KAFKA_CLUSTERS=c scripts/kafka/kafka.sh start, then source
// /tmp/kmirror-kafka-c/env). [ClusterC] skips without it, or fails with KMIRROR_REQUIRE_KAFKA_C=1.
//
// Private clusters: a test that kills, stops, restarts or freezes a broker, or needs a broker
// with a special configuration (tiered storage, no authorizer, extra server.properties lines),
// starts its own single-node cluster with [StartPrivate]. The script runs it as cluster C
// (KMIRROR_KAFKA_CLUSTERS=c) in a fresh work directory under the temporary directory, on a base
// port from 20000 up, below the kernel's ephemeral range, that a per-port flock reserves across
// test binaries and whose client and controller ports (base+30, base+130) are probed free,
// running Kafka 4.4.0 unless
// [PrivateOptions.Version] or KMIRROR_KAFKA_PRIVATE_VERSION says otherwise. [Private] has
// Kill (SIGKILL), Stop (orderly shutdown), Start (restart with its data), Freeze (SIGSTOP:
// connections are accepted, nothing answers) and Thaw (SIGCONT). The node is stopped and its
// work directory removed when the test ends, and a watchdog process kills it should the test
// binary die first. Private clusters take no cluster lock and may run beside the shared ones;
// each start costs about 7 s, a restart after Kill about 13 s. StartPrivate skips when Java or
// the version's jars are not installed (kafka.sh install) and fails instead with
// KMIRROR_REQUIRE_KAFKA=1. With [PrivateOptions.TieredStorage] the node runs tiered storage
// (KMIRROR_KAFKA_TIERED_STORAGE=1) on scripts/kafka/FileRemoteStorageManager.java, a remote
// storage manager that keeps uploaded segments in [Private.RemoteStorageDir] and that kafka.sh
// install compiles against the installed jars.
//
// Concurrency: a test that calls Brokers (or ClusterA/ClusterB) holds the clusters
// exclusively until it ends, through a flock on <workdir>/tests.lock that spans the test
// binaries `go test ./...` runs in parallel; StopBroker and StartBroker can therefore never
// disturb another package's test. Tests that use the clusters must not call t.Parallel.
package kafkatest
