package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// message is one Kafka-style JSON message definition.
type message struct {
	APIKey           int16    `json:"apiKey"`
	Type             string   `json:"type"`
	Listeners        []string `json:"listeners"`
	Name             string   `json:"name"`
	About            string   `json:"about"`
	ValidVersions    string   `json:"validVersions"`
	FlexibleVersions string   `json:"flexibleVersions"`
	Fields           []*field `json:"fields"`

	file  string
	valid verRange
}

// field is one field of a message or of a nested struct.
type field struct {
	Name             string          `json:"name"`
	Type             string          `json:"type"`
	Versions         string          `json:"versions"`
	NullableVersions string          `json:"nullableVersions"`
	TaggedVersions   string          `json:"taggedVersions"`
	Tag              *int            `json:"tag"`
	Default          json.RawMessage `json:"default"`
	About            string          `json:"about"`
	MapKey           bool            `json:"mapKey"`
	Ignorable        bool            `json:"ignorable"`
	EntityType       string          `json:"entityType"`
	Fields           []*field        `json:"fields"`

	versions verRange
	nullable verRange
	tagged   verRange
	kind     string // primitive type name or "struct"
	isArray  bool
	elemName string // Go type name of a struct element
	def      string // default as a Go literal; "" = zero value
}

// verRange is an inclusive version range; empty when lo > hi.
type verRange struct{ lo, hi int16 }

var noVersions = verRange{lo: 1, hi: 0}

func (r verRange) empty() bool { return r.lo > r.hi }

// covers reports whether r contains every version of all.
func (r verRange) covers(all verRange) bool { return !r.empty() && r.lo <= all.lo && r.hi >= all.hi }

// intersect returns the intersection of r and o.
func (r verRange) intersect(o verRange) verRange {
	lo, hi := max(r.lo, o.lo), min(r.hi, o.hi)
	if lo > hi {
		return noVersions
	}
	return verRange{lo, hi}
}

// cond returns a Go boolean expression on the variable "version" that is
// true inside r, given that version is always within all; "" means always.
func (r verRange) cond(all verRange) string {
	r = r.intersect(all)
	switch {
	case r.empty():
		return "false"
	case r.covers(all):
		return ""
	case r.lo > all.lo && r.hi < all.hi:
		return fmt.Sprintf("version >= %d && version <= %d", r.lo, r.hi)
	case r.lo > all.lo:
		return fmt.Sprintf("version >= %d", r.lo)
	default:
		return fmt.Sprintf("version <= %d", r.hi)
	}
}

// parseVersions parses Kafka version strings: "", "none", "N", "N+", "N-M".
func parseVersions(s string) (verRange, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return noVersions, nil
	}
	num := func(t string) (int16, error) {
		n, err := strconv.ParseInt(t, 10, 16)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad version %q", t)
		}
		return int16(n), nil
	}
	if strings.HasSuffix(s, "+") {
		lo, err := num(strings.TrimSuffix(s, "+"))
		return verRange{lo, math.MaxInt16}, err
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		l, err := num(lo)
		if err != nil {
			return noVersions, err
		}
		h, err := num(hi)
		if err != nil {
			return noVersions, err
		}
		if l > h {
			return noVersions, fmt.Errorf("bad version range %q", s)
		}
		return verRange{l, h}, nil
	}
	n, err := num(s)
	return verRange{n, n}, err
}

var primitives = map[string]string{
	"bool":   "bool",
	"int8":   "int8",
	"int16":  "int16",
	"uint16": "uint16",
	"int32":  "int32",
	"int64":  "int64",
	"string": "string",
	"bytes":  "[]byte",
	"uuid":   "[16]byte",
}

// minWire is the smallest flexible encoding of one value of each kind.
var minWire = map[string]int{
	"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8,
	"string": 1, "bytes": 1, "uuid": 16,
}

// stripComments drops whole-line // comments, as Kafka's JSON files carry a
// license header in that form.
func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("//")) {
			out.WriteByte('\n')
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// load reads and validates every *.json definition in dir, sorted by file
// name so that the output does not depend on directory order.
func load(dir string) ([]*message, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.json definitions in %s", dir)
	}
	var msgs []*message
	names := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(stripComments(raw)))
		dec.DisallowUnknownFields()
		m := new(message)
		if err := dec.Decode(m); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		m.file = filepath.Base(f)
		if err := m.validate(names); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		msgs = append(msgs, m)
	}
	// Every request needs exactly one response with the same key and
	// versions, and vice versa.
	type pair struct{ req, resp *message }
	byKey := map[int16]*pair{}
	for _, m := range msgs {
		p := byKey[m.APIKey]
		if p == nil {
			p = new(pair)
			byKey[m.APIKey] = p
		}
		slot := &p.req
		if m.Type == "response" {
			slot = &p.resp
		}
		if *slot != nil {
			return nil, fmt.Errorf("api key %d: two %ss (%s, %s)", m.APIKey, m.Type, (*slot).Name, m.Name)
		}
		*slot = m
	}
	for k, p := range byKey {
		if p.req == nil || p.resp == nil {
			return nil, fmt.Errorf("api key %d: needs both a request and a response", k)
		}
		if p.req.valid != p.resp.valid {
			return nil, fmt.Errorf("api key %d: request and response validVersions differ", k)
		}
		if strings.TrimSuffix(p.req.Name, "Request") != strings.TrimSuffix(p.resp.Name, "Response") {
			return nil, fmt.Errorf("api key %d: names %s and %s do not match", k, p.req.Name, p.resp.Name)
		}
	}
	return msgs, nil
}

func (m *message) validate(names map[string]string) error {
	switch m.Type {
	case "request":
		if !strings.HasSuffix(m.Name, "Request") {
			return fmt.Errorf("request name %q must end in Request", m.Name)
		}
	case "response":
		if !strings.HasSuffix(m.Name, "Response") {
			return fmt.Errorf("response name %q must end in Response", m.Name)
		}
	default:
		return fmt.Errorf("type %q: want request or response", m.Type)
	}
	if m.APIKey < 0 {
		return fmt.Errorf("negative apiKey %d", m.APIKey)
	}
	var err error
	if m.valid, err = parseVersions(m.ValidVersions); err != nil {
		return err
	}
	if m.valid.empty() || m.valid.hi == math.MaxInt16 {
		return fmt.Errorf("validVersions %q must be a closed range", m.ValidVersions)
	}
	flex, err := parseVersions(m.FlexibleVersions)
	if err != nil {
		return err
	}
	if !flex.covers(m.valid) {
		return fmt.Errorf("flexibleVersions %q must cover every valid version: only flexible encodings are generated", m.FlexibleVersions)
	}
	if prev, ok := names[m.Name]; ok {
		return fmt.Errorf("name %s already defined in %s", m.Name, prev)
	}
	names[m.Name] = m.file
	return validateFields(m, m.Name, m.Fields, names)
}

func validateFields(m *message, scope string, fields []*field, names map[string]string) error {
	seen := map[string]bool{}
	tags := map[int]bool{}
	for _, f := range fields {
		if f.Name == "" || strings.ToUpper(f.Name[:1]) != f.Name[:1] {
			return fmt.Errorf("%s: field name %q must be exported", scope, f.Name)
		}
		if seen[f.Name] || f.Name == "UnknownTags" || f.Name == "Version" {
			return fmt.Errorf("%s: duplicate or reserved field name %s", scope, f.Name)
		}
		seen[f.Name] = true
		var err error
		if f.versions, err = parseVersions(f.Versions); err != nil {
			return fmt.Errorf("%s.%s: %w", scope, f.Name, err)
		}
		if f.versions.intersect(m.valid).empty() {
			return fmt.Errorf("%s.%s: versions %q outside validVersions", scope, f.Name, f.Versions)
		}
		if f.nullable, err = parseVersions(f.NullableVersions); err != nil {
			return fmt.Errorf("%s.%s: %w", scope, f.Name, err)
		}
		if f.tagged, err = parseVersions(f.TaggedVersions); err != nil {
			return fmt.Errorf("%s.%s: %w", scope, f.Name, err)
		}
		if !f.tagged.empty() {
			if f.Tag == nil || *f.Tag < 0 {
				return fmt.Errorf("%s.%s: tagged field needs a non-negative tag", scope, f.Name)
			}
			if tags[*f.Tag] {
				return fmt.Errorf("%s.%s: duplicate tag %d", scope, f.Name, *f.Tag)
			}
			tags[*f.Tag] = true
			if f.tagged.intersect(m.valid) != f.versions.intersect(m.valid) {
				return fmt.Errorf("%s.%s: taggedVersions must equal versions", scope, f.Name)
			}
		} else if f.Tag != nil {
			return fmt.Errorf("%s.%s: tag without taggedVersions", scope, f.Name)
		}
		t := f.Type
		if strings.HasPrefix(t, "[]") {
			f.isArray = true
			t = t[2:]
		}
		if _, ok := primitives[t]; ok {
			f.kind = t
			if len(f.Fields) > 0 {
				return fmt.Errorf("%s.%s: primitive type with fields", scope, f.Name)
			}
			if !f.nullable.empty() && !f.isArray && t != "string" && t != "bytes" {
				return fmt.Errorf("%s.%s: type %s cannot be nullable", scope, f.Name, t)
			}
		} else {
			if !f.isArray {
				return fmt.Errorf("%s.%s: only arrays of structs are supported, got %s", scope, f.Name, f.Type)
			}
			if len(f.Fields) == 0 || strings.ToUpper(t[:1]) != t[:1] {
				return fmt.Errorf("%s.%s: struct type %q needs fields and an exported name", scope, f.Name, t)
			}
			f.kind = "struct"
			f.elemName = scope + t
			if prev, ok := names[f.elemName]; ok {
				return fmt.Errorf("%s.%s: struct %s already defined in %s", scope, f.Name, f.elemName, prev)
			}
			names[f.elemName] = m.file
			if err := validateFields(m, f.elemName, f.Fields, names); err != nil {
				return err
			}
		}
		if err := f.parseDefault(); err != nil {
			return fmt.Errorf("%s.%s: %w", scope, f.Name, err)
		}
	}
	return nil
}

// parseDefault turns the JSON default into a Go literal (f.def).
func (f *field) parseDefault() error {
	if len(f.Default) == 0 {
		return nil
	}
	var s string
	if err := json.Unmarshal(f.Default, &s); err != nil {
		// Kafka's files sometimes give numbers or booleans unquoted.
		s = string(f.Default)
	}
	if f.isArray {
		if s != "null" && s != "" {
			return fmt.Errorf("array default must be null, got %q", s)
		}
		if s == "null" && f.nullable.empty() {
			return fmt.Errorf("default null on a non-nullable field")
		}
		return nil
	}
	switch f.kind {
	case "bool":
		switch s {
		case "true":
			f.def = "true"
		case "false":
		default:
			return fmt.Errorf("bad bool default %q", s)
		}
	case "int8", "int16", "int32", "int64", "uint16":
		bits := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16}[f.kind]
		var err error
		if f.kind == "uint16" {
			_, err = strconv.ParseUint(s, 0, bits)
		} else {
			_, err = strconv.ParseInt(s, 0, bits)
		}
		if err != nil {
			return fmt.Errorf("bad %s default %q", f.kind, s)
		}
		if n, _ := strconv.ParseInt(s, 0, 64); n != 0 {
			f.def = s
		}
	case "string":
		if s == "null" {
			if f.nullable.empty() {
				return fmt.Errorf("default null on a non-nullable field")
			}
			return nil
		}
		if s != "" {
			f.def = strconv.Quote(s)
		}
	default:
		if s != "null" && s != "" {
			return fmt.Errorf("type %s cannot have a default", f.kind)
		}
	}
	return nil
}

// goType is the Go type of the field.
func (f *field) goType() string {
	var t string
	if f.kind == "struct" {
		t = f.elemName
	} else {
		t = primitives[f.kind]
		if f.kind == "string" && !f.isArray && !f.nullable.empty() {
			t = "*string"
		}
	}
	if f.isArray {
		return "[]" + t
	}
	return t
}

// minSize is the smallest flexible encoding of one element of the field's
// array (or of the field itself), used to reject array lengths that cannot
// fit in the remaining input before allocating.
func (f *field) minElemSize(valid verRange) int {
	if f.kind != "struct" {
		return minWire[f.kind]
	}
	return minStructSize(f.Fields, valid)
}

func minStructSize(fields []*field, valid verRange) int {
	n := 1 // tag buffer
	for _, f := range fields {
		if !f.tagged.empty() || !f.versions.covers(valid) {
			continue
		}
		if f.isArray {
			n++
		} else {
			n += minWire[f.kind]
		}
	}
	return n
}
