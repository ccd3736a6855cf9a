// Package dataplane serves a mirror.Destination over the Kafka protocol, so
// that ordinary Kafka clients (kgo, sarama, the Java client) and kmirror's own
// fetcher.KafkaSource can read a site's partitions, produce to its writable
// ones and read the consumer-group offsets kmirror syncs.
//
// A DataPlane is mounted on the admin server's listener: APIs returns the
// admin.ExtraAPI list to put in admin.ServerConfig.Extra, so one port serves
// the mirror RPCs and the data plane with the same TLS and limits.
//
// It serves, as a one-broker Kafka cluster whose broker leads every partition:
//   - Metadata: topic ids, this node as leader, the log's leader epoch;
//   - Fetch (v4-v16): a partition leader's rules from fetcher.LocalSource
//     (CurrentLeaderEpoch fencing, DivergingEpoch, OFFSET_OUT_OF_RANGE, HW /
//     LSO bounds), read_committed with the AbortedTransactions list, byte
//     limits, and MaxWait long-polls woken by appends (fetch sessions are
//     answered as "no session");
//   - ListOffsets (earliest, latest, by timestamp with a header scan) and
//     OffsetForLeaderEpoch;
//   - Produce (acks 0, 1, all) through a Writer, which refuses read-only
//     partitions with READ_ONLY_TOPIC, with idempotent-producer sequence
//     checks and InitProducerId;
//   - CreateTopics for plain topics;
//   - FindCoordinator, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups
//     over mirror.GroupOffsets (offsets only: no group membership).
//
// Transactional producers are not served yet: InitProducerId with a
// transactional id and transactional Produce batches are refused.
//
// # Concurrency
//
// A DataPlane is safe for concurrent use; the admin server calls it from one
// goroutine per connection. Produce serializes per partition (sequence check
// and append are one step); reads take no data-plane lock.
package dataplane
