// Package compacted keeps a replicated state log on a compacted Kafka topic: the one
// implementation behind coordinator.KafkaStore (the __mirror_state partitions) and
// controller.KafkaControllerLog (the single-partition __mirror_controller topic).
//
// A Log checks its topic and produces with sarama; its replay reads raw record batches
// with franz-go kmsg requests over a kgo client that takes over the TLS and SASL settings
// of the sarama config (Config.Sarama; a setting it cannot take over is refused at Open
// with a *ConnSettingError). At Open the Log ensures its topic: a missing topic is
// created (the configured partition count and replication factor, cleanup.policy=compact,
// min.insync.replicas when set) and an existing one is validated. An existing topic is
// refused with a typed error wrapping ErrTopic when its partition count differs, when a
// partition has fewer replicas than configured, or when its cleanup.policy is anything but
// compact alone. compact,delete is refused like delete: retention (retention.ms,
// retention.bytes, DeleteRecords) would remove the latest value of a key once its segment
// ages out, which a state log must never lose. Kafka holds its own state logs
// (__consumer_offsets, __transaction_state, __share_group_state) to cleanup.policy=compact
// for the same reason.
//
// Log.Replay reads one partition from its log start up to the last stable offset seen
// when the replay starts, with read_committed semantics: control batches are skipped,
// and so are the batches of aborted transactions (from the fetch response's aborted
// transaction list up to the ABORT marker). Batches are read in place with the records
// package; a batch without records moves the replay past its last offset, and a corrupt
// batch is an error, never skipped. Leadership errors (NOT_LEADER_OR_FOLLOWER,
// LEADER_NOT_AVAILABLE, ...), network errors to the leader and OFFSET_OUT_OF_RANGE are
// retried with a bounded exponential backoff that honours the context.
//
// A Producer is the transactional writer of one partition. Opening it initialises its
// transactional id (InitProducerId), which bumps the producer epoch and so fences every
// earlier producer of the same id and aborts its open transaction. Each Append is one
// transaction.
package compacted
