package admin

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchFrame encodes the frame of a Fetch response as buffers that hold the
// partitions' record batches as they are, so that record bytes read from a
// log go to the socket without being copied into the frame.
//
// kmsg encodes a whole message only, so the positions of the record fields
// are found by encoding the response twice without records: once with every
// record-bearing partition's RecordBatches empty and once with it null. The
// two encodings differ exactly in those fields' length prefixes (flexible:
// one byte, 0x01 against 0x00; otherwise four, 0x00000000 against
// 0xffffffff), in partition order. The frame is the empty-records encoding
// cut at those prefixes, with each prefix replaced by the real length and
// followed by the records. If the encodings do not differ as expected, the
// response is encoded whole instead (a copy, never a wrong frame).
func fetchFrame(correlation int32, flexibleHeader bool, resp *kmsg.FetchResponse) net.Buffers {
	var recs [][]byte
	var fields []*[]byte
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			if p := &t.Partitions[pi]; len(p.RecordBatches) > 0 {
				recs, fields = append(recs, p.RecordBatches), append(fields, &p.RecordBatches)
			}
		}
	}
	whole := func() net.Buffers {
		for i, f := range fields {
			*f = recs[i]
		}
		return net.Buffers{appendResponseFrame(make([]byte, 0, responseSizeHint(resp)), correlation, flexibleHeader, resp)}
	}
	if len(recs) == 0 {
		return whole()
	}
	for _, f := range fields {
		*f = []byte{}
	}
	empty := appendResponseFrame(nil, correlation, flexibleHeader, resp)
	for _, f := range fields {
		*f = nil
	}
	null := appendResponseFrame(nil, correlation, flexibleHeader, resp)
	at, ok := recordFieldPositions(empty, null, resp.IsFlexible(), len(recs))
	if !ok {
		return whole()
	}
	for i, f := range fields {
		*f = recs[i]
	}
	return spliceRecords(empty, at, recs, resp.IsFlexible())
}

// recordFieldPositions returns the offsets in empty of the n record-field
// length prefixes, where empty and null (the same frame with empty and with
// null record fields) differ; ok is false unless they differ exactly there.
func recordFieldPositions(empty, null []byte, flexible bool, n int) (at []int, ok bool) {
	if len(empty) != len(null) {
		return nil, false
	}
	width, emptyByte, nullByte := 4, byte(0x00), byte(0xff)
	if flexible {
		width, emptyByte, nullByte = 1, 0x01, 0x00
	}
	at = make([]int, 0, n)
	for i := 0; i < len(empty); i++ {
		if empty[i] == null[i] {
			continue
		}
		if len(at) == n || i+width > len(empty) {
			return nil, false
		}
		for j := i; j < i+width; j++ {
			if empty[j] != emptyByte || null[j] != nullByte {
				return nil, false
			}
		}
		at = append(at, i)
		i += width - 1
	}
	return at, len(at) == n
}

// spliceRecords builds the frame from empty (a frame whose record fields at
// the offsets at are empty) and the record batches recs: each empty length
// prefix is replaced by the length of its records, followed by them. The
// size prefix of the frame is rewritten for the spliced total.
func spliceRecords(empty []byte, at []int, recs [][]byte, flexible bool) net.Buffers {
	width := 4
	if flexible {
		width = 1
	}
	// Every prefix is appended to one buffer with room for all of them, so
	// the slices taken of it stay valid.
	prefixes := make([]byte, 0, 5*len(recs))
	out := make(net.Buffers, 0, 3*len(recs)+1)
	size, prev := 0, 0
	for i, pos := range at {
		start := len(prefixes)
		if flexible {
			prefixes = kbin.AppendUvarint(prefixes, uint32(len(recs[i])+1))
		} else {
			prefixes = kbin.AppendInt32(prefixes, int32(len(recs[i])))
		}
		out = append(out, empty[prev:pos], prefixes[start:], recs[i])
		size += pos - prev + len(prefixes) - start + len(recs[i])
		prev = pos + width
	}
	out = append(out, empty[prev:])
	size += len(empty) - prev
	binary.BigEndian.PutUint32(empty, uint32(size-4))
	return out
}
