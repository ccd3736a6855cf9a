// Package twosites is the cross-process proof of two kmirror sites: its tests
// build examples/kmirrord and examples/mirrorctl with `go build`, run kmirrord
// processes on loopback and drive them only over TCP, with mirrorctl, kgo,
// sarama and (when the harness's Kafka jars and a JDK are present) Kafka's own
// console producer and consumer. They cover mirroring, READ_ONLY_TOPIC until
// failover, failback after kill -9 (LME truncation, DivergingEpoch, byte-equal
// logs) twice, and a chain of three sites. Against a real Kafka 4.4 source of
// their own (kafkatest.StartPrivate, tiered storage on), they check that internal
// and __ topics are never mirrored, that a tiered topic is mirrored byte for byte
// (records only in remote storage too) without its storage configs, and that a
// killed or frozen source is shown unreachable through FAILED retries and then
// mirrored on with nothing lost. The package has no non-test code.
package twosites
