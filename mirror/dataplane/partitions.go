package dataplane

import (
	"errors"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Kafka protocol error codes the data plane answers that fetcher and admin do
// not name.
const (
	codeCorruptMessage            int16 = 2
	codeMessageTooLarge           int16 = 10
	codeInvalidRequiredAcks       int16 = 21
	codeUnknownMemberID           int16 = 25
	codeOutOfOrderSequence        int16 = 45
	codeInvalidProducerEpoch      int16 = 47
	codeInvalidTxnState           int16 = 48
	codeUnsupportedForMessageFmt  int16 = 43
	codeFetchSessionIDNotFound    int16 = 70
	codeInvalidRecord             int16 = 87
	codeInvalidProducerIDMapping  int16 = 49
	codeInvalidTransactionTimeout int16 = 50
	codeConcurrentTransactions    int16 = 51
	codeOperationNotAttempted     int16 = 55
	codeProducerFenced            int16 = 90
	codeTransactionAbortable      int16 = 120
	codeKafkaStorageError               = fetcher.CodeKafkaStorageError
)

// partition is a resolved topic partition of the destination.
type partition struct {
	topic   string
	topicID records.UUID
	index   int32
	log     fetcher.Log
}

// resolve finds a partition by topic name and index. code is
// UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or index, and
// KAFKA_STORAGE_ERROR when the log cannot be opened.
func (dp *DataPlane) resolve(spec mirror.TopicSpec, index int32) (partition, int16) {
	if index < 0 || index >= spec.Partitions {
		return partition{}, fetcher.CodeUnknownTopicOrPartition
	}
	l, err := dp.dst.Log(spec.Name, index)
	if err != nil {
		return partition{}, codeKafkaStorageError
	}
	return partition{topic: spec.Name, topicID: spec.TopicID, index: index, log: l}, fetcher.CodeNone
}

// topicByID finds a topic by id.
func (dp *DataPlane) topicByID(id records.UUID) (mirror.TopicSpec, bool) {
	if id == (records.UUID{}) {
		return mirror.TopicSpec{}, false
	}
	for _, t := range dp.dst.Topics() {
		if t.TopicID == id {
			return t, true
		}
	}
	return mirror.TopicSpec{}, false
}

// localSource serves exactly the given partitions with a Kafka leader's rules
// at one isolation level (fetcher.LocalSource is the one implementation of
// those rules; the data plane only puts a wire in front of it).
func localSource(isolation int8, ps ...partition) *fetcher.LocalSource {
	s := fetcher.NewLocalSource(isolation)
	for _, p := range ps {
		s.Add(p.topic, p.topicID, p.index, p.log)
	}
	return s
}

// scanChunk is how many bytes a header scan reads from a log at a time.
const scanChunk = 1 << 20

// scanBatches calls fn for each whole batch of log from offset on, in order,
// until fn returns false or the log end. It reads headers from the log's
// Read (whole batches) and stops at a corrupt or partial batch.
func scanBatches(log fetcher.Log, from int64, fn func(b records.Batch) bool) error {
	next := max(from, log.LogStartOffset())
	for next < log.LogEndOffset() {
		buf, err := log.Read(next, scanChunk)
		if errors.Is(err, fetcher.ErrOffsetOutOfRange) {
			return nil // truncated under us: nothing more to scan
		}
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		it := records.NewIterator(buf)
		advanced := false
		for it.Next() {
			b := it.Batch()
			if !fn(b) {
				return nil
			}
			next, advanced = b.NextOffset(), true
		}
		if err := it.Err(); err != nil {
			return err
		}
		if !advanced {
			return nil
		}
	}
	return nil
}
