// Package integration runs kmirror's end-to-end scenarios against real Apache Kafka brokers:
// the two KRaft clusters that scripts/kafka/kafka.sh starts on 127.0.0.1 (cluster A, three
// nodes, is the mirror source; cluster B, one node, holds the coordinator's compacted state
// topic, also over a SASL_SSL listener with SCRAM-SHA-512).
//
// What it owns: only tests. Each scenario is one Test: mirroring transactional, multi-codec and
// log-cleaned partitions byte for byte into FileLogs (fetcher.KafkaSource + fetcher.Fetcher)
// with the mirror state on B (coordinator.KafkaStore); Kafka's DumpLogSegments on kmirror's
// segments and on the source leader's; a source leader stopped mid-mirror; an unclean leader
// election that makes the source answer with a DivergingEpoch; a zombie coordinator owner
// fenced by Kafka's transactional producer epoch; and the state store over TLS + SASL/SCRAM.
// Through the mirror facade (mirror.New, memory destination, default KafkaSource and source
// admin): mirroring from cluster C, Kafka 3.9 (every codec byte for byte, group offsets, a
// config change, stop), ACL sync from C (its authorizer; A and B have none), and a source topic
// deleted on A and on C. The oracle of every byte comparison is a raw kmsg Fetch from the source partition's leader,
// written here independently of package fetcher.
//
// Who calls it: go test, locally and in CI (.ci/run):
//
//	bash scripts/kafka/kafka.sh start
//	source /tmp/kmirror-kafka/env
//	go test -race -count=1 ./internal/integration/ -v
//
// Without the env file every test skips, unless CI=true and KMIRROR_REQUIRE_KAFKA=1, where a
// missing cluster fails (see package kafkatest).
//
// Concurrency: the tests do not run in parallel: the failover and unclean-election tests stop
// and start brokers of cluster A, which every test shares. Every goroutine a test starts
// (fetch loops, producers) is stopped before the test returns.
package integration
