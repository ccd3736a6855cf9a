// Package bench is kmirror's side-by-side throughput benchmark against real
// Kafka: on the same data on the same machine it runs, one after the other,
//
//   - raw: a fetch-and-discard loop of raw kmsg Fetch requests with kmirror's
//     fetch sizes (the ceiling any Kafka-protocol copier can reach);
//   - kmirror: fetcher.KafkaSource + fetcher.Fetcher into one FileLog per
//     partition (FsyncOnFlush, with a final Flush inside the measured time);
//   - sarama: a sarama consumer -> sarama async producer copier into a topic on
//     the destination cluster (what people build by hand), lz4 producer;
//   - mm2: Apache Kafka MirrorMaker 2 in dedicated mode copying the topic to the
//     destination cluster, measured until the target's end offsets reach the
//     source's.
//
// It prepares the data itself (a kgo lz4 producer), measures wall time, MB/s of
// source bytes, CPU seconds per GB (user+sys) and peak RSS per contender, and
// writes docs/bench/results.json, a markdown table into docs/BENCHMARKS.md and a
// PNG bar chart.
//
// RunScale (scale.go) is a second benchmark of the package, of kmirror alone:
// one kmirrord site mirroring P partitions from another kmirrord, timing the
// StartMirrorTopics answer, start and restart to every partition MIRRORING with
// lag 0, the failover to STOPPED, with peak RSS, descriptors and idle CPU of
// both processes, and the copy rate through 6 against 1,000 partitions.
//
// Who calls it: the program cmd/bench (go run ./internal/bench/cmd/bench
// -help) and this package's test, which runs the Go contenders on tiny data
// against kfake. Nothing else imports it.
//
// Process model: every Go contender runs in a child process, a re-exec of the
// running binary selected by the KMIRROR_BENCH_CHILD environment variable (see
// MaybeChild), so CPU time and peak RSS belong to that contender alone. MM2 is
// a java child process; its CPU and RSS are read from /proc at completion. The
// package is Linux-only in practice (/proc, getrusage).
//
// Concurrency: Run is not safe for concurrent use with itself (contenders run
// one after the other by design); the contenders start goroutines and stop all
// of them before they return.
package bench
