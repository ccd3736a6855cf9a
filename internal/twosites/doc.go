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
// mirrored on with nothing lost. The disaster-recovery drills run real
// applications (Kafka's console consumer on the classic and the KIP-848 group
// protocols, kgo group and manually assigned consumers, a kgo producer) on a
// primary (a private Kafka 4.4 broker, or a kmirrord site with a failback),
// lose it, fail over and move the applications: they resume from the synced
// group offsets, skip nothing, read again at most what they processed after the
// last offset sync (nothing after a planned switchover), and the producer's
// writes are refused until the failover and land after its barrier; each
// group's figures are logged on a "drill:" line. The package has no non-test
// code.
package twosites
