package admin

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var update = flag.Bool("update", false, "rewrite testdata/golden files")

// message is what every generated request and response implements.
type message interface {
	Key() int16
	MaxVersion() int16
	SetVersion(int16)
	GetVersion() int16
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

// allMessages returns a fresh, defaulted instance of every message at
// version v, requests and responses, in key order.
func allMessages(v int16) []message {
	var out []message
	for _, a := range apiTable {
		req, resp := a.newRequest(), a.newResponse()
		req.SetVersion(v)
		resp.SetVersion(v)
		out = append(out, req, resp)
	}
	return out
}

func typeName(m any) string { return reflect.TypeOf(m).Elem().Name() }

// fresh returns a new empty instance of m's type at m's version.
func fresh(m message) message {
	n := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
	n.SetVersion(m.GetVersion())
	return n
}

// populate fills every exported field of the struct v points to with
// non-default values derived from seed: two elements per list, set nullable
// strings, non-zero ids; UnknownTags get one unknown tag.
func populate(v reflect.Value, seed int) {
	v = v.Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		name := t.Field(i).Name
		if skipFields[name] {
			continue
		}
		seed++
		switch {
		case name == "Version":
		case name == "UnknownTags":
			tags := f.Addr().Interface().(*kmsg.Tags)
			tags.Set(uint32(90+seed%5), []byte{byte(seed), 0xee})
		default:
			fill(f, seed, name)
		}
	}
}

func fill(f reflect.Value, seed int, name string) {
	switch f.Kind() {
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(int64(seed*7 + 1))
	case reflect.Uint16:
		f.SetUint(uint64(seed + 1))
	case reflect.String:
		f.SetString(fmt.Sprintf("%s-%d", strings.ToLower(name), seed))
	case reflect.Pointer: // *string
		s := fmt.Sprintf("%s?%d", strings.ToLower(name), seed)
		f.Set(reflect.ValueOf(&s))
	case reflect.Array: // uuid
		for j := 0; j < f.Len(); j++ {
			f.Index(j).SetUint(uint64(seed + j))
		}
	case reflect.Slice:
		s := reflect.MakeSlice(f.Type(), 2, 2)
		for j := 0; j < 2; j++ {
			e := s.Index(j)
			if e.Kind() == reflect.Struct {
				populate(e.Addr(), seed*10+j)
			} else {
				fill(e, seed*10+j, name)
			}
		}
		f.Set(s)
	}
}

func fullInstance(m message) message {
	n := fresh(m)
	if n.GetVersion() < 1 && maxVersion(n) >= 1 {
		skipFields = v1Fields
		defer func() { skipFields = nil }()
	}
	populate(reflect.ValueOf(n), int(m.Key()))
	return n
}

// skipFields are left at their defaults by populate (fields a version does not have),
// without using a seed, so that the encodings of older versions stay as they were.
var skipFields map[string]bool

// v1Fields are the fields the version 1 of the lifecycle RPCs (the only APIs with a
// version 1) added, the plan:
// left at their defaults in a version 0 instance.
var v1Fields = map[string]bool{"ValidateOnly": true, "AllowTruncation": true, "Partitions": true}

// maxVersion is the highest version of message m's API.
func maxVersion(m message) int16 {
	for _, a := range apiTable {
		if a.Key == m.Key() {
			return a.MaxVersion
		}
	}
	return -1
}

// v1Messages are full instances of the messages with a version 1, at version 1.
func v1Messages() []message {
	var out []message
	for _, m := range allMessages(1) {
		if maxVersion(m) >= 1 {
			out = append(out, m)
		}
	}
	return out
}

func roundTrip(t *testing.T, m message) []byte {
	t.Helper()
	enc := m.AppendTo(nil)
	got := fresh(m)
	require.NoError(t, got.ReadFrom(enc), "%s", typeName(m))
	require.Equal(t, m, got, "%s", typeName(m))
	require.Equal(t, enc, got.AppendTo(nil), "%s re-encode", typeName(m))
	return enc
}

// minimalGolden are the hand-derived encodings of New<Msg>() at version 0:
// compact string "" = 01, empty compact array = 01, null = 00, int16 0 =
// 0000, int32 -1 = ffffffff, int32 60000 = 0000ea60, int64 -1 = 8×ff,
// bool false = 00, empty tag section = 00.
var minimalGolden = map[string]string{
	"CreateClusterMirrorRequest":     "01" + "01" + "00",
	"CreateClusterMirrorResponse":    trio + "00",
	"StartMirrorTopicsRequest":       "01" + "01" + "01" + "0000ea60" + "00",
	"StartMirrorTopicsResponse":      trio + "01" + "00",
	"StopMirrorTopicsRequest":        "01" + "01" + "ffffffffffffffff" + "0000ea60" + "00",
	"StopMirrorTopicsResponse":       trio + "01" + "00",
	"ListClusterMirrorsRequest":      "00" + "00" + "00" + "00" + "00",
	"ListClusterMirrorsResponse":     trio + "01" + "00",
	"DescribeClusterMirrorsRequest":  "00" + "00" + "00" + "00" + "00" + "00" + "0000ea60" + "00",
	"DescribeClusterMirrorsResponse": trio + "01" + "00",
	"ReadMirrorStatesRequest":        "01" + "01" + "00",
	"ReadMirrorStatesResponse":       trio + "01" + "00",
	"WriteMirrorStatesRequest":       "01" + "01" + "00",
	"WriteMirrorStatesResponse":      trio + "01" + "00",
	"PauseMirrorTopicsRequest":       "01" + "01" + "ffffffffffffffff" + "0000ea60" + "00",
	"PauseMirrorTopicsResponse":      trio + "01" + "00",
	"ResumeMirrorTopicsRequest":      "01" + "01" + "ffffffffffffffff" + "0000ea60" + "00",
	"ResumeMirrorTopicsResponse":     trio + "01" + "00",
	"DeleteClusterMirrorsRequest":    "01" + "ffffffffffffffff" + "0000ea60" + "00",
	"DeleteClusterMirrorsResponse":   trio + "00",
	"BumpLeaderEpochsRequest":        "01" + "00",
	"BumpLeaderEpochsResponse":       trio + "01" + "00",
	"ReadMirrorOffsetsRequest":       "01" + "01" + "00",
	"ReadMirrorOffsetsResponse":      trio + "01" + "00",
	"RecoverMirrorTopicsRequest":     "01" + "01" + "0000ea60" + "00",
	"RecoverMirrorTopicsResponse":    trio + "01" + "00",
}

// trio is ThrottleTimeMs 0, ErrorCode 0, ErrorMessage null.
const trio = "00000000" + "0000" + "00"

func TestMinimalGolden(t *testing.T) {
	msgs := allMessages(0)
	require.Len(t, minimalGolden, len(msgs))
	for _, m := range msgs {
		want, ok := minimalGolden[typeName(m)]
		require.True(t, ok, typeName(m))
		require.Equal(t, want, hex.EncodeToString(roundTrip(t, m)), typeName(m))
	}
}

// TestHandCheckedFull checks one populated message byte by byte.
func TestHandCheckedFull(t *testing.T) {
	m := NewStartMirrorTopicsRequest()
	m.MirrorName = "m"
	m.Topics = []StartMirrorTopicsRequestTopic{{Name: "t", TopicId: [16]byte{15: 7}, NumPartitions: 3}}
	m.IncludePatterns = []string{"a.*"}
	m.ExcludePatterns = []string{"b"}
	m.TimeoutMs = 5
	m.UnknownTags.Set(5, []byte{0xab})
	want := "02" + "6d" + // MirrorName "m"
		"02" + "02" + "74" + "00000000000000000000000000000007" + "00000003" + "00" + // Topics[1]
		"02" + "04" + "612e2a" + // IncludePatterns ["a.*"]
		"00000005" + // TimeoutMs
		"02" + // two tags, ascending: known tag 0 then unknown tag 5
		"00" + "03" + "02" + "0262" + // tag 0 = ExcludePatterns ["b"], 3 bytes
		"05" + "01" + "ab" // unknown tag 5
	require.Equal(t, want, hex.EncodeToString(roundTrip(t, &m)))

	// An absent tagged field decodes to its default; a known tag sorting
	// after an unknown one is still placed in order.
	m.ExcludePatterns = nil
	m.UnknownTags = kmsg.Tags{}
	m.UnknownTags.Set(0x7f, nil)
	enc := roundTrip(t, &m)
	require.Equal(t, "01"+"7f"+"00", hex.EncodeToString(enc[len(enc)-3:]))
}

func TestFullGolden(t *testing.T) {
	for _, m0 := range allMessages(0) {
		for v := int16(0); v <= m0.MaxVersion(); v++ {
			m := fresh(m0)
			m.SetVersion(v)
			testFullGolden(t, m)
		}
	}
}

// testFullGolden round-trips a fully populated m at its version (the fields of other
// versions dropped by one decode) and compares the encoding with its golden file.
func testFullGolden(t *testing.T, m message) {
	t.Helper()
	full := fullInstance(m)
	if m.MaxVersion() > 0 {
		norm := fresh(m)
		require.NoError(t, norm.ReadFrom(full.AppendTo(nil)), "%s", typeName(m))
		full = norm
	}
	enc := roundTrip(t, full)
	path := filepath.Join("testdata", "golden", fmt.Sprintf("%s.v%d.hex", typeName(m), m.GetVersion()))
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(enc)+"\n"), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run TestFullGolden -update")
	require.Equal(t, strings.TrimSpace(string(want)), hex.EncodeToString(enc), typeName(m))
}

// TestTruncatedAndTrailing: every strict prefix of a full encoding fails
// with ErrTruncated or ErrMalformed, and a trailing byte fails with
// ErrMalformed.
func TestTruncatedAndTrailing(t *testing.T) {
	for _, m := range append(allMessages(0), v1Messages()...) {
		enc := fullInstance(m).AppendTo(nil)
		for n := 0; n < len(enc); n++ {
			err := fresh(m).ReadFrom(enc[:n])
			require.Error(t, err, "%s prefix %d", typeName(m), n)
			require.True(t, errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed), "%s: %v", typeName(m), err)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, typeName(m), de.Message)
		}
		err := fresh(m).ReadFrom(append(enc, 0))
		require.ErrorIs(t, err, ErrMalformed, typeName(m))
	}
}

func TestUnsupportedVersion(t *testing.T) {
	for _, m := range allMessages(0) {
		m.SetVersion(m.MaxVersion() + 1)
		require.ErrorIs(t, m.ReadFrom([]byte{0}), ErrUnsupportedVersion, typeName(m))
	}
	for _, m := range allMessages(-1) {
		require.ErrorIs(t, m.ReadFrom([]byte{0}), ErrUnsupportedVersion, typeName(m))
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		m    message
		hex  string
	}{
		{"null non-nullable string", NewPtrCreateClusterMirrorRequest(), "00" + "01" + "00"},
		{"null non-nullable array", NewPtrCreateClusterMirrorRequest(), "01" + "00" + "00"},
		{"array longer than input", NewPtrCreateClusterMirrorRequest(), "01" + "7f" + "00"},
		{"huge array length", NewPtrReadMirrorOffsetsRequest(), "01" + "ffffffff0f" + "00"},
		{"string longer than input", NewPtrCreateClusterMirrorRequest(), "05" + "6162" + "00"},
		{"tagged field with trailing bytes", NewPtrStartMirrorTopicsRequest(), "01010100000000" + "01" + "00" + "02" + "0100"},
		{"tagged field truncated", NewPtrStartMirrorTopicsRequest(), "01010100000000" + "01" + "00" + "01" + "02"},
		{"tag size past end", NewPtrStartMirrorTopicsRequest(), "01010100000000" + "01" + "07" + "09" + "00"},
		{"bad uvarint", NewPtrCreateClusterMirrorRequest(), "ffffffffffff"},
		{"empty", NewPtrCreateClusterMirrorRequest(), ""},
	}
	for _, c := range cases {
		b, err := hex.DecodeString(c.hex)
		require.NoError(t, err)
		err = c.m.ReadFrom(b)
		require.Error(t, err, c.name)
		require.True(t, errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed), "%s: %v", c.name, err)
	}
}

// TestUnknownTagsNested: unknown tags at every level survive a round trip
// through a decoder that does not know them.
func TestUnknownTagsNested(t *testing.T) {
	m := NewReadMirrorStatesResponse()
	p := NewReadMirrorStatesResponseTopicPartition()
	p.UnknownTags.Set(3, []byte("x"))
	tp := NewReadMirrorStatesResponseTopic()
	tp.Partitions = []ReadMirrorStatesResponseTopicPartition{p}
	tp.UnknownTags.Set(9, nil)
	m.Topics = []ReadMirrorStatesResponseTopic{tp}
	m.UnknownTags.Set(1, []byte{1, 2, 3})
	roundTrip(t, &m)
}

func TestNullableVersusEmpty(t *testing.T) {
	m := NewListClusterMirrorsRequest()
	m.MirrorNameFilter = []string{}
	enc := roundTrip(t, &m)
	require.Equal(t, "00"+"01"+"00"+"00"+"00", hex.EncodeToString(enc))
	var got ListClusterMirrorsRequest
	require.NoError(t, got.ReadFrom(enc))
	require.NotNil(t, got.MirrorNameFilter)
	require.Nil(t, got.SourceClusterIdFilter)
}

func TestDefaults(t *testing.T) {
	p := NewDescribeClusterMirrorsResponseMirrorTopicPartition()
	require.Equal(t, int8(-1), p.State)
	require.Equal(t, int64(-1), p.SourceOffset)
	require.Equal(t, int32(-1), p.LastMirrorEpoch)
	m := NewDescribeClusterMirrorsResponseMirror()
	require.Equal(t, int32(-2147483648), m.AuthorizedOperations)
	r := NewPtrStopMirrorTopicsRequest()
	require.Equal(t, int64(-1), r.StateOffset)
	require.Equal(t, int32(60000), r.Timeout())
	r.SetTimeout(5)
	require.Equal(t, int32(5), r.TimeoutMs)
}

func TestKmsgInterfaces(t *testing.T) {
	for _, a := range APIs() {
		req, ok := NewRequest(a.Key, 0)
		require.True(t, ok)
		resp := req.ResponseKind()
		require.Equal(t, a.Key, req.Key())
		require.Equal(t, a.Key, resp.Key())
		require.True(t, req.IsFlexible())
		require.Equal(t, a.MaxVersion, req.MaxVersion())
		require.Equal(t, a.Key, resp.RequestKind().Key())
		_, ok = resp.(kmsg.ThrottleResponse)
		require.True(t, ok, a.Name)
		_, ok = resp.(topLevel)
		require.True(t, ok, a.Name)
		_, ok = NewRequest(a.Key, a.MaxVersion+1)
		require.False(t, ok)
		v := Versions()
		mx, ok := v.LookupMaxKeyVersion(a.Key)
		require.True(t, ok)
		require.Equal(t, a.MaxVersion, mx)
	}
	_, ok := NewRequest(3, 0)
	require.False(t, ok)
}

func TestDecoderHelpers(t *testing.T) {
	d := newDecoder([]byte{0x03, 'a', 'b', 0x00}, DefaultMaxDecodedElements)
	require.Equal(t, []byte("ab"), d.compactBytes(false))
	require.Nil(t, d.compactBytes(true))
	require.NoError(t, d.finish("x"))

	d = newDecoder([]byte{0x00}, DefaultMaxDecodedElements)
	require.Nil(t, d.compactBytes(false))
	require.ErrorIs(t, d.finish("x"), ErrMalformed)

	d = newDecoder(nil, DefaultMaxDecodedElements)
	require.Nil(t, d.compactBytes(true))
	require.ErrorIs(t, d.finish("x"), ErrTruncated)

	// A semantic failure stops later reads.
	d = newDecoder([]byte{0x00, 0x01}, DefaultMaxDecodedElements)
	_ = d.compactString()
	require.False(t, d.Ok())
	require.Equal(t, int32(0), d.Int32())
	require.ErrorIs(t, d.finish("x"), ErrMalformed)

	// Big-length claims do not allocate: rejected against remaining input.
	d = newDecoder(kbin.AppendUvarint(nil, 1<<31), DefaultMaxDecodedElements)
	require.Equal(t, -2, d.arrayLen(true, 1))

	s := "x"
	require.Equal(t, "x", derefString(&s))
	require.Equal(t, "", derefString(nil))
}

// TestDescribeV0BytesUnchanged: a version 0 DescribeClusterMirrorsResponse as encoded
// before version 1 existed decodes and re-encodes to the same bytes.
func TestDescribeV0BytesUnchanged(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "DescribeClusterMirrorsResponse.v0.before-v1.hex"))
	require.NoError(t, err)
	enc, err := hex.DecodeString(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	m := NewPtrDescribeClusterMirrorsResponse()
	m.SetVersion(0)
	require.NoError(t, m.ReadFrom(enc))
	require.Equal(t, enc, m.AppendTo(nil))
	require.Equal(t, int64(-1), m.Mirrors[0].Topics[0].Partitions[0].VerifiedOffset, "absent in v0: the default")
}
