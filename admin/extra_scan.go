package admin

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The pre-scan of Extra frames. kmsg decodes without limits: an array of
// empty elements or a run of tagged fields decodes to many times its bytes
// (tags 80 times: each struct's unknown tags are a map). Before kmsg sees an
// Extra frame, scanExtra walks it with the key's schema (extraSchemas),
// counting array elements and tagged fields and adding up what kmsg's
// decoding allocates for them: the frame is refused when a count is over its
// limit, and charged its bytes plus that bound otherwise. Record batches
// (bytes fields) are aliased by kmsg, not copied, so a large Produce costs
// its frame and little more.

// skind is the wire type of a schema field.
type skind uint8

const (
	kInt8 skind = iota + 1
	kInt16
	kInt32
	kInt64
	kUUID
	kFloat64
	kString     // non-nullable string (copied by kmsg)
	kNullString // nullable string
	kBytes      // non-nullable bytes (aliased by kmsg)
	kNullBytes  // nullable bytes
	kArray      // array (nullable or not) of structs: elem, each followed by its tags when flexible
	kPrimArray  // array of a fixed-size or string primitive: prim
)

// sfield is one field of a schema: its kind and the versions that carry it.
type sfield struct {
	kind     skind
	min, max int16 // versions holding the field; max < 0: no upper bound
	// Arrays: elemSize is the Go size of one decoded element (a struct or
	// the primitive); elem the fields of a struct element; prim the kind of
	// a primitive element.
	elemSize int
	elem     []sfield
	prim     skind
	// tags lists the known tagged fields of a struct element.
	tags []stag
}

// stag is a known tagged field of a struct: kmsg decodes its content into
// fields (the others are kept as unknown tags, aliased).
type stag struct {
	id       uint32
	fields   []sfield
	withTags bool // the content is a struct with its own tag section
}

// schema is the wire layout of one Extra request key.
type schema struct {
	// minVersion and maxVersion are the versions the schema was written and
	// tested for; other versions of the key use the fallback bound.
	minVersion, maxVersion int16
	flexibleFrom           int16 // first flexible version; < 0: none
	fields                 []sfield
	// rootTags are the known tagged fields of the request struct.
	rootTags []stag
}

// Costs of kmsg's decoding, in bytes, beyond the fields' own Go sizes.
const (
	// tagSectionCost is the first allocation of a struct's unknown-tag map
	// (its header and first group of slots).
	tagSectionCost = 512
	// tagCost is what one more unknown tag adds to a map (its slot, grown
	// tables included).
	tagCost = 192
	// allocSlack covers the size-class rounding of one allocation.
	allocSlack = 64
)

// scanLimits are the limits of one scan.
type scanLimits struct {
	maxElements, maxTags int
}

// scanResult is what a scan counted and the decode bound it computed.
type scanResult struct {
	elements, tags int
	decoded        int64 // upper bound of what kmsg allocates decoding the frame
	rest           int   // bytes left after the schema's last field (kmsg ignores them)
}

// ErrScanLimit is wrapped by the pre-scan's error for a frame over the
// element or tagged-field limit.
var ErrScanLimit = errors.New("admin: request over the decoding limits")

// errScanMalformed is the pre-scan's error for a frame that does not parse.
var errScanMalformed = errors.New("admin: malformed request")

type scanner struct {
	r       kbin.Reader
	version int16
	flex    bool
	lim     scanLimits
	res     scanResult
	err     error
}

// scanExtra walks body (the request after its header, header tags
// included), of key's schema at version, and returns the counts and decode
// bound; the error wraps ErrScanLimit or is a malformed-frame error.
func scanExtra(sch *schema, version int16, body []byte, lim scanLimits) (scanResult, error) {
	s := &scanner{r: kbin.Reader{Src: body}, version: version, lim: lim,
		flex: sch.flexibleFrom >= 0 && version >= sch.flexibleFrom}
	s.fields(sch.fields)
	if s.flex {
		s.tagSection(sch.rootTags)
	}
	if s.err == nil && !s.r.Ok() {
		s.err = errScanMalformed
	}
	s.res.rest = len(s.r.Src)
	return s.res, s.err
}

func (s *scanner) ok() bool { return s.err == nil && s.r.Ok() }

func (s *scanner) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func has(f *sfield, v int16) bool { return v >= f.min && (f.max < 0 || v <= f.max) }

// length reads a string, bytes or array length: compact (length+1 as a
// uvarint) when flexible, else int16 (strings) or int32.
func (s *scanner) length(short bool) int {
	if s.flex {
		return int(s.r.Uvarint()) - 1
	}
	if short {
		return int(s.r.Int16())
	}
	return int(s.r.Int32())
}

func (s *scanner) fields(fs []sfield) {
	for i := range fs {
		if !s.ok() {
			return
		}
		f := &fs[i]
		if has(f, s.version) {
			s.field(f)
		}
	}
}

func (s *scanner) field(f *sfield) {
	switch f.kind {
	case kInt8:
		s.r.Int8()
	case kInt16:
		s.r.Int16()
	case kInt32:
		s.r.Int32()
	case kInt64, kFloat64:
		s.r.Int64()
	case kUUID:
		s.r.Span(16)
	case kString, kNullString:
		s.str(f.kind == kNullString)
	case kBytes, kNullBytes:
		n := s.length(false)
		if n < -1 || n == -1 && f.kind == kBytes && s.flex {
			s.fail(errScanMalformed)
			return
		}
		if n > 0 {
			s.r.Span(n) // aliased by kmsg: the frame's charge covers it
		}
	case kArray, kPrimArray:
		n := s.length(false)
		if n < -1 || !s.r.Ok() {
			s.fail(errScanMalformed)
			return
		}
		if n <= 0 {
			return
		}
		if n > len(s.r.Src) { // every element is at least one byte
			s.fail(errScanMalformed)
			return
		}
		s.res.elements += n
		if s.res.elements > s.lim.maxElements {
			s.fail(fmt.Errorf("%w: more than %d array elements", ErrScanLimit, s.lim.maxElements))
			return
		}
		s.res.decoded += int64(n)*int64(f.elemSize)*9/8 + allocSlack
		for range n {
			if !s.ok() {
				return
			}
			if f.kind == kPrimArray {
				s.field(&sfield{kind: f.prim})
				continue
			}
			s.fields(f.elem)
			if s.flex {
				s.tagSection(f.tags)
			}
		}
	default:
		s.fail(fmt.Errorf("admin: schema field of kind %d", f.kind))
	}
}

// str reads a string; kmsg copies it.
func (s *scanner) str(nullable bool) {
	n := s.length(true)
	switch {
	case n < -1 || n == -1 && !nullable:
		s.fail(errScanMalformed)
	case n > 0:
		s.r.Span(n)
		s.res.decoded += int64(n) + allocSlack
	case n == 0 && nullable:
		s.res.decoded += allocSlack // the *string
	}
}

// tagSection reads a struct's tagged fields: known ones (known) are scanned
// as their content, others are charged as entries of the unknown-tag map.
func (s *scanner) tagSection(known []stag) {
	n := int(s.r.Uvarint())
	if !s.r.Ok() || n > len(s.r.Src) {
		s.fail(errScanMalformed)
		return
	}
	unknown := 0
	for range n {
		if !s.ok() {
			return
		}
		id := s.r.Uvarint()
		size := int(s.r.Uvarint())
		content := s.r.Span(size)
		if !s.r.Ok() {
			return
		}
		s.res.tags++
		if s.res.tags > s.lim.maxTags {
			s.fail(fmt.Errorf("%w: more than %d tagged fields", ErrScanLimit, s.lim.maxTags))
			return
		}
		if t := findTag(known, id); t != nil {
			sub := &scanner{r: kbin.Reader{Src: content}, version: s.version, flex: true, lim: s.lim, res: s.res}
			sub.fields(t.fields)
			if t.withTags {
				sub.tagSection(nil)
			}
			if sub.err != nil {
				s.fail(sub.err)
				return
			}
			s.res = sub.res
			continue
		}
		unknown++
	}
	if unknown > 0 {
		s.res.decoded += tagSectionCost + int64(unknown)*tagCost
	}
}

func findTag(known []stag, id uint32) *stag {
	for i := range known {
		if known[i].id == id {
			return &known[i]
		}
	}
	return nil
}

// Schema constructors: version ranges are inclusive, -1 is open.

func fv(kind skind, min, max int16) sfield { return sfield{kind: kind, min: min, max: max} }

// f is a field present in every version.
func f(kind skind) sfield { return fv(kind, 0, -1) }

// arr is an array of struct elements of Go type T.
func arr[T any](min, max int16, elem ...sfield) sfield {
	return sfield{kind: kArray, min: min, max: max, elemSize: int(reflect.TypeFor[T]().Size()), elem: elem}
}

// withTags sets the known tagged fields of an array's elements.
func (f sfield) withTags(tags ...stag) sfield {
	f.tags = tags
	return f
}

// parr is an array of primitives (int32, int64 or strings).
func parr(kind skind, min, max int16) sfield {
	size := map[skind]int{kInt32: 4, kInt64: 8, kString: 16, kNullString: 8, kUUID: 16, kInt8: 1, kInt16: 2}[kind]
	return sfield{kind: kPrimArray, min: min, max: max, elemSize: size, prim: kind}
}

// decodeBase is what decoding any request allocates besides its fields:
// the request struct itself.
const decodeBase = 1024
