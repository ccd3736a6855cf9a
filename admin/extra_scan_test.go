package admin

import (
	"math/rand"
	"reflect"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var tagsType = reflect.TypeFor[kmsg.Tags]()

// fillRandom sets every field of the struct v points to at random: slices
// of up to maxLen elements (at the top level; 2 below), strings and bytes of up to 6 bytes, and, with
// tags > 0, up to tags unknown tagged fields per struct.
func fillRandom(rng *rand.Rand, v reflect.Value, maxLen, tags int) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.String {
			if rng.Intn(3) > 0 {
				s := randString(rng)
				v.Set(reflect.ValueOf(&s))
			}
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillRandom(rng, v.Elem(), maxLen, tags)
	case reflect.Struct:
		if v.Type() == tagsType {
			t := v.Addr().Interface().(*kmsg.Tags)
			for range rng.Intn(tags + 1) {
				t.Set(uint32(100+rng.Intn(200)), []byte(randString(rng)))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "Version" || !v.Field(i).CanSet() {
				continue
			}
			fillRandom(rng, v.Field(i), maxLen, tags)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if rng.Intn(3) > 0 {
				v.SetBytes([]byte(randString(rng)))
			}
			return
		}
		n := rng.Intn(maxLen + 1)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fillRandom(rng, v.Index(i), min(maxLen, 2), tags)
		}
	case reflect.Array:
		rng.Read(v.Slice(0, v.Len()).Bytes())
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 0)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rng.Int63n(1000) - 10)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.Intn(1000)))
	case reflect.Float64:
		v.SetFloat(rng.Float64())
	}
}

func randString(rng *rand.Rand) string {
	b := make([]byte, rng.Intn(7))
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	return string(b)
}

// countElements sums the lengths of every slice (not bytes) under v.
func countElements(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return countElements(v.Elem())
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += countElements(v.Field(i))
		}
		return n
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 0
		}
		n := v.Len()
		for i := range v.Len() {
			n += countElements(v.Index(i))
		}
		return n
	}
	return 0
}

// decodeAlloc decodes enc as a request of key at version and returns the
// heap bytes it allocated.
func decodeAlloc(t *testing.T, key, version int16, enc []byte) uint64 {
	t.Helper()
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := req.ReadFrom(enc)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	runtime.KeepAlive(req)
	return after.TotalAlloc - before.TotalAlloc
}

// minDecodeAlloc is the least of three decodeAlloc measures: a goroutine of
// the runtime or the test framework allocating at the same moment only adds.
// Under the race detector, whose instrumented allocations are not those of
// a normal build (measured: 3-40% more), it returns 0: the bound is checked
// in normal builds only.
func minDecodeAlloc(t *testing.T, key, version int16, enc []byte) uint64 {
	t.Helper()
	if raceBuild {
		return 0
	}
	return min(decodeAlloc(t, key, version, enc), decodeAlloc(t, key, version, enc), decodeAlloc(t, key, version, enc))
}

var noScanLimits = scanLimits{maxElements: 1 << 30, maxTags: 1 << 30}

// TestExtraSchemasMatchKmsg: for every key and version of extraSchemas,
// random requests encoded by kmsg are consumed exactly by the pre-scan,
// which counts the array elements kmsg decodes, and kmsg's decoding
// allocates no more than the scan's bound.
func TestExtraSchemasMatchKmsg(t *testing.T) {
	rng := rand.New(rand.NewSource(1279))
	for key, sch := range extraSchemas {
		require.NotNil(t, kmsg.RequestForKey(key), "key %d", key)
		require.LessOrEqual(t, sch.maxVersion, kmsg.RequestForKey(key).MaxVersion(), "key %d", key)
		for v := sch.minVersion; v <= sch.maxVersion; v++ {
			for i := range 60 {
				req := kmsg.RequestForKey(key)
				fillRandom(rng, reflect.ValueOf(req), 3, 3)
				req.SetVersion(v)
				enc := req.AppendTo(nil)
				dec := kmsg.RequestForKey(key)
				dec.SetVersion(v)
				require.NoError(t, dec.ReadFrom(enc), "key %d v%d #%d", key, v, i)
				res, err := scanExtra(sch, v, enc, noScanLimits)
				require.NoError(t, err, "key %d v%d #%d", key, v, i)
				require.Zero(t, res.rest, "key %d v%d #%d: the scan must consume the request exactly", key, v, i)
				require.Equal(t, countElements(reflect.ValueOf(dec)), res.elements, "key %d v%d #%d", key, v, i)
				if i%10 == 0 {
					got := minDecodeAlloc(t, key, v, enc)
					require.LessOrEqual(t, got, uint64(res.decoded)+decodeBase, "key %d v%d #%d", key, v, i)
				}
			}
		}
	}
}

// TestExtraScanBoundsHostileFrames: requests of every key and version made
// of many empty elements and many unknown tagged fields (the shapes that
// decode to 20-80 times their size) are bounded by the scan: what kmsg
// allocates never exceeds the bound, and the limits refuse them.
func TestExtraScanBoundsHostileFrames(t *testing.T) {
	rng := rand.New(rand.NewSource(94))
	for key, sch := range extraSchemas {
		for v := sch.minVersion; v <= sch.maxVersion; v++ {
			for _, shape := range []struct{ maxLen, tags int }{{2000, 0}, {40, 40}, {8, 300}} {
				req := kmsg.RequestForKey(key)
				fillRandom(rng, reflect.ValueOf(req), shape.maxLen, shape.tags)
				req.SetVersion(v)
				enc := req.AppendTo(nil)
				res, err := scanExtra(sch, v, enc, noScanLimits)
				require.NoError(t, err, "key %d v%d", key, v)
				got := minDecodeAlloc(t, key, v, enc)
				require.LessOrEqual(t, got, uint64(res.decoded)+decodeBase, "key %d v%d %+v: %d bytes", key, v, shape, len(enc))
				if res.elements > 10 {
					_, err = scanExtra(sch, v, enc, scanLimits{maxElements: res.elements - 1, maxTags: 1 << 30})
					require.ErrorIs(t, err, ErrScanLimit)
				}
				if res.tags > 10 {
					_, err = scanExtra(sch, v, enc, scanLimits{maxElements: 1 << 30, maxTags: res.tags - 1})
					require.ErrorIs(t, err, ErrScanLimit)
				}
			}
		}
	}
}

// TestFallbackDecodeFactor: for keys and versions without a schema (here,
// every key of extraSchemas with its schema ignored, and the keys other
// parts of a site may mount: SASL, ACLs, SCRAM credentials, ApiVersions),
// hostile requests (many empty elements, many unknown tags) decode to at
// most fallbackDecodeFactor times their size.
func TestFallbackDecodeFactor(t *testing.T) {
	rng := rand.New(rand.NewSource(36))
	keys := []int16{int16(kmsg.ApiVersions), int16(kmsg.SASLHandshake), int16(kmsg.SASLAuthenticate),
		int16(kmsg.CreateACLs), int16(kmsg.DeleteACLs), int16(kmsg.DescribeACLs),
		int16(kmsg.DescribeUserSCRAMCredentials), int16(kmsg.AlterUserSCRAMCredentials)}
	for key := range extraSchemas {
		keys = append(keys, key)
	}
	worst := 0.0
	for _, key := range keys {
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v++ {
			for _, shape := range []struct{ maxLen, tags int }{{2000, 0}, {40, 40}, {8, 300}, {1, 1}, {0, 1}} {
				req := kmsg.RequestForKey(key)
				fillRandom(rng, reflect.ValueOf(req), shape.maxLen, shape.tags)
				req.SetVersion(v)
				enc := req.AppendTo(nil)
				// the header a frame adds (key, version, correlation, client id, tags)
				size := len(enc) + 11
				got := minDecodeAlloc(t, key, v, enc)
				worst = max(worst, float64(got)/float64(size))
				require.LessOrEqual(t, got, uint64(fallbackDecodeFactor*size), "key %d v%d %+v: %d bytes", key, v, shape, len(enc))
			}
		}
	}
	t.Logf("worst decode factor seen: %.1f (fallback bound %d)", worst, fallbackDecodeFactor)
}
