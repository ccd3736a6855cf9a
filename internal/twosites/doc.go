// Package twosites is the cross-process proof of two kmirror sites: its tests
// build examples/kmirrord and examples/mirrorctl with `go build`, run kmirrord
// processes on loopback and drive them only over TCP, with mirrorctl, kgo,
// sarama and (when the harness's Kafka jars and a JDK are present) Kafka's own
// console producer and consumer. They cover mirroring, READ_ONLY_TOPIC until
// failover, failback after kill -9 (LME truncation, DivergingEpoch, byte-equal
// logs) twice, and a chain of three sites. The package has no non-test code.
package twosites
