// Command bench runs kmirror's side-by-side throughput benchmark against real
// Kafka: a raw fetch-and-discard ceiling, kmirror (KafkaSource + Fetcher into
// FileLogs), a sarama consumer->producer copier and MirrorMaker 2, one after
// the other on the same data, and writes docs/bench/results.json, the table in
// docs/BENCHMARKS.md and docs/bench/throughput.png. Run it from the repository
// root after starting the clusters with scripts/kafka/kafka.sh:
//
//	bash scripts/kafka/kafka.sh start && source /tmp/kmirror-kafka/env
//	go run ./internal/bench/cmd/bench
//
// With -scale it runs the scale benchmark instead (no Kafka needed): two
// kmirrord processes on loopback, one mirroring 1,000 to 100,000 partitions
// from the other (docs/bench/scale.json, docs/bench/scale.png):
//
//	go run ./internal/bench/cmd/bench -scale -cpuprofile-dir docs/bench/scale-profiles
//
// See docs/BENCHMARKS.md for the method.
package main
