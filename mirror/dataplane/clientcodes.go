package dataplane

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
)

// codeInvalidTopic is INVALID_TOPIC_EXCEPTION, Kafka's answer to a client
// write it refuses because of what the topic is (ReplicaManager:
// "Cannot append to internal topic", "Cannot delete records of internal
// topic").
const codeInvalidTopic = int16(admin.CodeInvalidTopic)

// Bounds of kmirror's block of error codes (admin/errors.go): no Kafka
// client knows a code in it.
const (
	mirrorCodeMin = 10000
	mirrorCodeMax = 10999
)

// forClient is the one mapping of a mirror refusal to the code an ordinary
// Kafka client gets, by request key and version. A Kafka client maps a code
// it does not know to UNKNOWN_SERVER_ERROR: kgo then retries Produce or
// drops the record with no cause, the Java client throws
// UnknownServerException and Kafka's kafka-delete-records prints no cause.
// So a code in kmirror's block (READ_ONLY_TOPIC, INVALID_CLUSTER_MIRROR_STATES,
// ...) answered to Produce (plain or transactional), DeleteRecords,
// CreatePartitions or DeleteTopics becomes INVALID_TOPIC_EXCEPTION, the code
// a Kafka broker answers a client write to an internal topic: every Kafka
// client knows it at every version of these keys and treats it as not
// retriable (kgo and Java fail the write at once; in a transaction the
// transaction must abort). The message keeps the mirror code's name in front
// ("READ_ONLY_TOPIC: ..."); it is returned only where the key's version has
// an ErrorMessage (Produce v8+, CreatePartitions, DeleteTopics v5+; never
// DeleteRecords). Other keys (the mirror RPCs, whose callers know the codes)
// and other codes pass unchanged. The Go API (mirror.Destination) keeps the
// mirror codes: errors.Is(err, admin.CodeReadOnlyTopic.Err()) still holds.
func forClient(key kmsg.Key, version int16, code int16, msg string) (int16, string) {
	if code >= mirrorCodeMin && code <= mirrorCodeMax {
		switch key {
		case kmsg.Produce, kmsg.DeleteRecords, kmsg.CreatePartitions, kmsg.DeleteTopics:
			name := admin.Code(code).String()
			if msg == "" {
				msg = name
			} else {
				msg = name + ": " + msg
			}
			code = codeInvalidTopic
		}
	}
	if !hasErrorMessage(key, version) {
		msg = ""
	}
	return code, msg
}

// txnCodesForClient applies forClient's rule to the transaction keys whose
// responses carry no message: a mirror code answered to AddPartitionsToTxn,
// TxnOffsetCommit or EndTxn becomes INVALID_TOPIC_EXCEPTION. The Java
// producer then fails the transaction naming INVALID_TOPIC_EXCEPTION for the
// partition (for a code it does not know it names UNKNOWN_SERVER_ERROR), and
// kgo, which retries neither, reports "INVALID_TOPIC_EXCEPTION" instead of
// "UNKNOWN_SERVER_ERROR". The Produce of the same transaction says
// READ_ONLY_TOPIC in its message.
func txnCodesForClient(resp kmsg.Response) {
	mapCode := func(code *int16) {
		if *code >= mirrorCodeMin && *code <= mirrorCodeMax {
			*code = codeInvalidTopic
		}
	}
	switch r := resp.(type) {
	case *kmsg.AddPartitionsToTxnResponse:
		mapCode(&r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				mapCode(&r.Topics[i].Partitions[j].ErrorCode)
			}
		}
		for i := range r.Transactions {
			for j := range r.Transactions[i].Topics {
				for k := range r.Transactions[i].Topics[j].Partitions {
					mapCode(&r.Transactions[i].Topics[j].Partitions[k].ErrorCode)
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				mapCode(&r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.EndTxnResponse:
		mapCode(&r.ErrorCode)
	}
}

// hasErrorMessage reports whether key's response at version carries a
// per-partition or per-topic ErrorMessage.
func hasErrorMessage(key kmsg.Key, version int16) bool {
	switch key {
	case kmsg.Produce:
		return version >= 8
	case kmsg.DeleteTopics:
		return version >= 5
	case kmsg.CreatePartitions:
		return true
	case kmsg.DeleteRecords:
		return false
	}
	return true
}
