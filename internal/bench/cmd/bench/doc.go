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
// See docs/BENCHMARKS.md for the method.
package main
