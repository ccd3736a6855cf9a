package records

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// field is one field of a coordinator or controller record, defined once
// and used by both the encoder and the decoder. ptr points into the record
// struct: *int8, *int16, *int32, *int64, *UUID, *string, **string (nullable) or
// *[]ConfigEntry or *[]RemovalApproval.
type field struct {
	name  string
	since int16 // first value version that carries the field
	ptr   any
}

// encodeFields appends fs at version v. Keys are non-flexible (int16-length
// strings, no tagged fields); values are flexible (compact strings and
// arrays, an empty tagged-field section after every struct).
func encodeFields(dst []byte, fs []field, v int16, flexible bool) ([]byte, error) {
	for _, f := range fs {
		if v < f.since {
			continue
		}
		switch p := f.ptr.(type) {
		case *int8:
			dst = kbin.AppendInt8(dst, *p)
		case *int16:
			dst = kbin.AppendInt16(dst, *p)
		case *int32:
			dst = kbin.AppendInt32(dst, *p)
		case *int64:
			dst = kbin.AppendInt64(dst, *p)
		case *UUID:
			dst = kbin.AppendUuid(dst, *p)
		case *string:
			if flexible {
				dst = kbin.AppendCompactString(dst, *p)
			} else {
				if len(*p) > math.MaxInt16 {
					return nil, fmt.Errorf("%s: string of %d bytes exceeds %d", f.name, len(*p), math.MaxInt16)
				}
				dst = kbin.AppendString(dst, *p)
			}
		case **string:
			dst = kbin.AppendCompactNullableString(dst, *p)
		case *[]ConfigEntry:
			dst = kbin.AppendCompactArrayLen(dst, len(*p))
			for i := range *p {
				e := &(*p)[i]
				dst = kbin.AppendCompactString(dst, e.Name)
				dst = kbin.AppendCompactNullableString(dst, e.Value)
				dst = append(dst, 0) // no tagged fields
			}
		case *[]RemovalApproval:
			dst = kbin.AppendCompactArrayLen(dst, len(*p))
			for _, a := range *p {
				dst = kbin.AppendInt32(dst, a.Partition)
				dst = kbin.AppendInt64(dst, a.RemovedFrom)
				dst = kbin.AppendInt64(dst, a.RemovedTo)
				dst = append(dst, 0) // no tagged fields
			}
		default:
			return nil, fmt.Errorf("%s: unsupported field type %T", f.name, f.ptr)
		}
	}
	if flexible {
		dst = append(dst, 0) // no tagged fields
	}
	return dst, nil
}

// decodeFields reads fs at version v from r, skipping unknown tagged
// fields, and fails on short input or trailing bytes.
func decodeFields(r *kbin.Reader, fs []field, v int16, flexible bool) error {
	for _, f := range fs {
		if v < f.since {
			continue
		}
		switch p := f.ptr.(type) {
		case *int8:
			*p = r.Int8()
		case *int16:
			*p = r.Int16()
		case *int32:
			*p = r.Int32()
		case *int64:
			*p = r.Int64()
		case *UUID:
			*p = r.Uuid()
		case *string:
			if flexible {
				*p = r.CompactString()
			} else {
				*p = r.String()
			}
		case **string:
			*p = r.CompactNullableString()
		case *[]ConfigEntry:
			n := r.CompactArrayLen()
			// Each entry takes at least 3 bytes.
			if n < 0 || int(n)*3 > len(r.Src) {
				return fmt.Errorf("%s: array length %d with %d bytes left", f.name, n, len(r.Src))
			}
			var es []ConfigEntry
			if n > 0 {
				es = make([]ConfigEntry, n)
			}
			for i := range es {
				es[i].Name = r.CompactString()
				es[i].Value = r.CompactNullableString()
				kmsg.SkipTags(r)
			}
			*p = es
		case *[]RemovalApproval:
			n := r.CompactArrayLen()
			// Each entry takes 21 bytes.
			if n < 0 || int(n)*21 > len(r.Src) {
				return fmt.Errorf("%s: array length %d with %d bytes left", f.name, n, len(r.Src))
			}
			var as []RemovalApproval
			if n > 0 {
				as = make([]RemovalApproval, n)
			}
			for i := range as {
				as[i] = RemovalApproval{Partition: r.Int32(), RemovedFrom: r.Int64(), RemovedTo: r.Int64()}
				kmsg.SkipTags(r)
			}
			*p = as
		default:
			return fmt.Errorf("%s: unsupported field type %T", f.name, f.ptr)
		}
		if !r.Ok() {
			return fmt.Errorf("%s: truncated", f.name)
		}
	}
	if flexible {
		kmsg.SkipTags(r)
		if !r.Ok() {
			return fmt.Errorf("tagged fields truncated")
		}
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}

// recordDef is one record type of a key/value store: its id (the int16
// that starts the key) and the newest value version this code writes and
// reads.
type recordDef struct {
	name         string
	typ          int16
	valueVersion int16
}

// encodeKV writes key = int16 type + key fields (version 0, non-flexible),
// value = int16 version + value fields (flexible); valueFields nil means a
// tombstone (nil value).
func encodeKV(def recordDef, keyFields, valueFields []field) (key, value []byte, err error) {
	return encodeKVAt(def, def.valueVersion, keyFields, valueFields)
}

// encodeKVAt is encodeKV writing value version v (at most def.valueVersion): a record
// that needs none of the newer fields is written at the older version, so that a reader
// of that version still reads it.
func encodeKVAt(def recordDef, v int16, keyFields, valueFields []field) (key, value []byte, err error) {
	key = kbin.AppendInt16(nil, def.typ)
	if key, err = encodeFields(key, keyFields, 0, false); err != nil {
		return nil, nil, recordErr(ErrBadRecord, "key", def.typ, "%v", err)
	}
	if valueFields == nil {
		return key, nil, nil
	}
	value = kbin.AppendInt16(nil, v)
	if value, err = encodeFields(value, valueFields, v, true); err != nil {
		return nil, nil, recordErr(ErrBadRecord, "value", def.typ, "%v", err)
	}
	return key, value, nil
}

// readType reads the int16 record type at the start of a key.
func readType(key []byte) (int16, *kbin.Reader, error) {
	r := &kbin.Reader{Src: key}
	t := r.Int16()
	if !r.Ok() {
		return -1, nil, recordErr(ErrBadRecord, "key", -1, "%d bytes, too short for a record type", len(key))
	}
	return t, r, nil
}

// decodeValue reads the version and fields of a value for def.
func decodeValue(def recordDef, value []byte, fs []field) error {
	r := &kbin.Reader{Src: value}
	v := r.Int16()
	if !r.Ok() {
		return recordErr(ErrBadRecord, "value", def.typ, "%d bytes, too short for a version", len(value))
	}
	if v < 0 || v > def.valueVersion {
		return recordErr(ErrUnknownRecord, "value", def.typ, "%s value version %d not supported (max %d)", def.name, v, def.valueVersion)
	}
	if err := decodeFields(r, fs, v, true); err != nil {
		return recordErr(ErrBadRecord, "value", def.typ, "%s: %v", def.name, err)
	}
	return nil
}

func decodeKey(def recordDef, r *kbin.Reader, fs []field) error {
	if err := decodeFields(r, fs, 0, false); err != nil {
		return recordErr(ErrBadRecord, "key", def.typ, "%s: %v", def.name, err)
	}
	return nil
}
