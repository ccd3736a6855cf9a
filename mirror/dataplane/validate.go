package dataplane

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/records"
)

// Kafka's codes for the client-batch refusals of validateBatches.
const (
	codeInvalidTimestamp       int16 = 32
	codeUnsupportedCompression int16 = 76
)

// The topic configs a client batch is checked against (Kafka's names).
const (
	cfgMaxMessageBytes     = "max.message.bytes"
	cfgTimestampType       = "message.timestamp.type"
	cfgTimestampBeforeMax  = "message.timestamp.before.max.ms"
	cfgTimestampAfterMax   = "message.timestamp.after.max.ms"
	cfgCleanupPolicy       = "cleanup.policy"
	timestampLogAppendTime = "LogAppendTime"
)

// Decompression bound of a client batch: decodeFactor times the topic's
// max.message.bytes, at least minDecodeLimit and at most
// records.DefaultDecodeLimit. Kafka bounds only the compressed size
// (max.message.bytes); its producers bound the uncompressed bytes of a batch
// near that size (kgo's ProducerBatchMaxBytes counts uncompressed bytes; the
// Java producer fills batch.size by an estimated compression ratio), so a
// legitimate batch inflates far less than 64 times the limit, while a
// decompression bomb is refused after at most 64 MiB at the default limit.
const (
	decodeFactor   = 64
	minDecodeLimit = 64 << 20
)

// clientRules returns the rules of spec's configs for a client batch, and
// the size limit of one partition's records: max.message.bytes, or
// Config.MaxMessageBytes when the topic sets none (an unparsable value
// counts as unset, as do the other configs).
func (dp *DataPlane) clientRules(spec mirror.TopicSpec) (records.ClientRules, int) {
	maxBytes := dp.cfg.MaxMessageBytes
	if v, err := strconv.Atoi(spec.Configs[cfgMaxMessageBytes]); err == nil && v > 0 {
		maxBytes = v
	}
	r := records.ClientRules{
		NowMs:         time.Now().UnixMilli(),
		LogAppendTime: spec.Configs[cfgTimestampType] == timestampLogAppendTime,
		BeforeMaxMs:   configMs(spec.Configs, cfgTimestampBeforeMax),
		AfterMaxMs:    configMs(spec.Configs, cfgTimestampAfterMax),
		DecodeLimit:   min(max(maxBytes*decodeFactor, minDecodeLimit), records.DefaultDecodeLimit),
	}
	for _, p := range strings.Split(spec.Configs[cfgCleanupPolicy], ",") {
		if strings.TrimSpace(p) == "compact" {
			r.Compacted = true
		}
	}
	return r, maxBytes
}

// configMs reads a millisecond bound; unset or unparsable is Kafka's
// default, no bound.
func configMs(cfg map[string]string, key string) int64 {
	if v, err := strconv.ParseInt(cfg[key], 10, 64); err == nil && v >= 0 {
		return v
	}
	return records.NoTimestampBound
}

// validationCode is Kafka's code for a refusal of
// records.ValidateClientBatch: CORRUPT_MESSAGE for a CRC mismatch (Kafka's
// code, which clients retry: the bytes may have been damaged in transit),
// INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE for codec bits that name
// no codec, MESSAGE_TOO_LARGE for a decompression bomb, INVALID_RECORD for
// every other malformed batch or record (Kafka's InvalidRecordException;
// not retriable: the client built it that way).
func validationCode(err error) int16 {
	switch {
	case errors.Is(err, records.ErrCorrupt):
		return codeCorruptMessage
	case errors.Is(err, records.ErrInvalidTimestamp):
		return codeInvalidTimestamp
	case errors.Is(err, records.ErrUnsupportedCompression):
		return codeUnsupportedCompression
	case errors.Is(err, records.ErrDecodeLimit):
		return codeMessageTooLarge
	}
	return codeInvalidRecord
}
