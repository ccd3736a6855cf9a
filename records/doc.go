// Package records owns kmirror's view of Kafka bytes: the v2 record batch
// and the records kmirror itself writes.
//
// What it owns:
//   - Batch, a zero-copy view over one v2 record batch, and Iterator, which
//     walks the batches of a fetch response or log segment. The mirror path
//     uses only these: read the header fields, verify the CRC-32C, restamp
//     the base offset and partition leader epoch (both outside the CRC).
//     It never decompresses or re-encodes, so mirrored bytes stay
//     byte-identical to the source.
//   - Records/RecordsLimit (decode on request, all five codecs, bounded
//     against decompression bombs) and BuildBatch (build batches with any
//     codec) for verification, tests and the simulator.
//   - ValidateClientBatch and StampClientBatch: a client-produced batch
//     checked as a Kafka leader's LogValidator does (counts, offset deltas,
//     record lengths, codec and decode bound, timestamps; *ValidationError
//     naming the Kafka error) and its header stamped (max timestamp,
//     LogAppendTime). The data plane's Produce uses them; mirrored batches
//     never pass through them.
//   - Control batches: ABORT (0), COMMIT (1) and MIRROR_PID_RESET (7), built
//     byte-identical to Kafka (BuildControlBatch) and read (ControlType).
//   - The key/value codecs of the __mirror_state records
//     (MirrorPartitionState, LastMirrorEpochs) and of the controller records
//     (MirrorTopicStateChangeRecord, ClusterMirrorRecord). Each record's
//     fields are defined once, in its fields methods; keys are non-flexible,
//     values flexible (compact strings, tagged fields).
//   - The Java-compatible partitioner that routes a mirror partition to its
//     __mirror_state partition (JavaStringHash, Abs, StateKey,
//     PartitionFor), and Kafka's UUID text form.
//
// Who calls it: the fetcher (Iterator, VerifyCRC, restamping), the logs
// (batch boundaries, offsets, epochs), the coordinator and its stores (state
// records, partitioner), the controller store (controller records), the
// mirror facade (BuildControlBatch for the PID-reset barrier and ABORT
// markers) and tests.
//
// Concurrency contract: the package is pure. It does no I/O, reads no
// clock, starts no goroutines and has no mutable package state, so every
// function may be called from any goroutine. A Batch aliases the caller's
// buffer: the setters write into it, so concurrent use of the same bytes
// needs the caller's synchronisation. An Iterator is not safe for
// concurrent use.
//
// Errors: corrupt batches return *CorruptError (errors.Is ErrCorrupt);
// record codecs return *RecordError (ErrBadRecord or ErrUnknownRecord).
// Nothing here panics on bytes from the wire or disk.
package records
