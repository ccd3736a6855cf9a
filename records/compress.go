package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialMagic starts a snappy payload framed the way the Java xerial
// SnappyOutputStream frames it: magic, then int32 version and int32
// compatible version, then chunks of int32 length + raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16
	xerialBlockSize = 32 << 10
)

// kindOf returns the sentinel a decompression error carries.
func kindOf(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return ErrTooLarge
	}
	return nil
}

// decompress returns the record section of a batch, decoded with codec c,
// refusing output larger than limit. For CompressionNone it returns src.
func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		defer zr.Close()
		return readLimited(zr, limit, "gzip")
	case CompressionSnappy:
		return unsnappy(src, limit)
	case CompressionLZ4:
		zr := lz4.NewReader(bytes.NewReader(src))
		return readLimited(zr, limit, "lz4")
	case CompressionZstd:
		zr, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %v", err)
		}
		defer zr.Close()
		out, err := zr.DecodeAll(src, nil)
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return nil, fmt.Errorf("%w: zstd output exceeds %d bytes", ErrTooLarge, limit)
			}
			return nil, fmt.Errorf("zstd: %v", err)
		}
		if len(out) > limit {
			return nil, fmt.Errorf("%w: zstd output exceeds %d bytes", ErrTooLarge, limit)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", int8(c))
}

// readLimited reads r to the end, failing once more than limit bytes come
// out.
func readLimited(r io.Reader, limit int, name string) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: %s output exceeds %d bytes", ErrTooLarge, name, limit)
	}
	return buf.Bytes(), nil
}

// unsnappy decodes raw snappy or xerial-framed snappy; Kafka accepts both.
func unsnappy(src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(nil, src, limit)
	}
	if len(src) < xerialHeaderLen {
		return nil, fmt.Errorf("snappy: xerial header truncated")
	}
	src = src[xerialHeaderLen:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("snappy: xerial chunk length truncated")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, fmt.Errorf("snappy: xerial chunk of %d bytes with %d left", n, len(src))
		}
		var err error
		if out, err = snappyBlock(out, src[:n], limit); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst, checking
// the declared size against limit before allocating.
func snappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %v", err)
	}
	if n > limit-len(dst) {
		return nil, fmt.Errorf("%w: snappy output exceeds %d bytes", ErrTooLarge, limit)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	got, err := snappy.Decode(dst[start:], block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %v", err)
	}
	if len(got) != n {
		return nil, fmt.Errorf("snappy: decoded %d bytes, header said %d", len(got), n)
	}
	return dst, nil
}

// compress encodes raw with codec c the way Kafka's Java producer frames
// it: gzip stream, xerial-framed snappy, LZ4 frame with 64 KiB blocks, zstd
// frame.
func compress(c Compression, raw []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return raw, nil
	case CompressionGzip:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionSnappy:
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // minimum compatible version
		for len(raw) > 0 {
			chunk := raw[:min(len(raw), xerialBlockSize)]
			raw = raw[len(chunk):]
			enc := snappy.Encode(nil, chunk)
			out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
			out = append(out, enc...)
		}
		return out, nil
	case CompressionLZ4:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)); err != nil {
			return nil, err
		}
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		zw, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zw.Close()
		return zw.EncodeAll(raw, nil), nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", int8(c))
}
