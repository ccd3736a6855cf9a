package records

import (
	"math"
	"strconv"
	"unicode/utf16"
)

// JavaStringHash returns Java's String.hashCode of s: h = 31*h + c over the
// UTF-16 code units of s (a code point above U+FFFF counts as its two
// surrogates), with int32 wrap-around. Invalid UTF-8 bytes count as U+FFFD,
// as Java's decoder would replace them.
func JavaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// Abs is Kafka's Utils.abs: the absolute value, except that MinInt32 maps
// to 0 (not to itself), so the result is never negative.
func Abs(n int32) int32 {
	if n == math.MinInt32 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}

// StateKey returns the key string that routes a mirror partition to its
// __mirror_state partition: "<mirror>:<topicId text>:<partition>".
func StateKey(mirror string, topicID UUID, partition int32) string {
	return mirror + ":" + topicID.String() + ":" + strconv.FormatInt(int64(partition), 10)
}

// PartitionFor returns Abs(JavaStringHash(key)) % numPartitions, the
// __mirror_state partition a Java broker picks for key. numPartitions must
// be positive; otherwise it returns -1.
func PartitionFor(key string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return -1
	}
	return Abs(JavaStringHash(key)) % numPartitions
}
