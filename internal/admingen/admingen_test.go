package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommittedOutputIsCurrent is the CI check `go generate ./admin && git
// diff --exit-code` as a test: generating from the definitions must give
// the committed file byte for byte, twice in a row.
func TestCommittedOutputIsCurrent(t *testing.T) {
	msgs, err := load("../../admin/definitions")
	require.NoError(t, err)
	a, err := generate(msgs, "definitions")
	require.NoError(t, err)
	msgs, err = load("../../admin/definitions")
	require.NoError(t, err)
	b, err := generate(msgs, "definitions")
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "generator output is not deterministic")
	committed, err := os.ReadFile("../../admin/zz_generated.go")
	require.NoError(t, err)
	require.True(t, bytes.Equal(committed, a), "admin/zz_generated.go is stale: run go generate ./admin")
}

func TestParseVersions(t *testing.T) {
	cases := map[string]verRange{
		"0": {0, 0}, "0+": {0, 32767}, "1-3": {1, 3}, "": noVersions, "none": noVersions,
	}
	for s, want := range cases {
		got, err := parseVersions(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"x", "-1", "3-1", "1+2", "99999"} {
		_, err := parseVersions(s)
		require.Error(t, err, s)
	}
	all := verRange{0, 3}
	require.Equal(t, "", verRange{0, 32767}.cond(all))
	require.Equal(t, "version >= 2", verRange{2, 32767}.cond(all))
	require.Equal(t, "version <= 1", verRange{0, 1}.cond(all))
	require.Equal(t, "version >= 1 && version <= 2", verRange{1, 2}.cond(all))
	require.Equal(t, "false", noVersions.cond(all))
}

func writeDefs(t *testing.T, defs map[string]string) string {
	dir := t.TempDir()
	for name, body := range defs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

const okReq = `// a Kafka-style license comment
{ "apiKey": 1, "type": "request", "name": "FooRequest", "validVersions": "0-1", "flexibleVersions": "0+",
  "fields": [
    { "name": "A", "type": "int32", "versions": "0+", "default": "-1", "about": "a" },
    { "name": "B", "type": "string", "versions": "1+", "nullableVersions": "1+", "about": "b" },
    { "name": "C", "type": "[]Item", "versions": "0+", "about": "c", "fields": [
      { "name": "D", "type": "bytes", "versions": "0+", "nullableVersions": "1+", "about": "d" },
      { "name": "E", "type": "uuid", "versions": "0+", "taggedVersions": "0+", "tag": 0, "about": "e" }
    ]}
  ]}`

const okResp = `{ "apiKey": 1, "type": "response", "name": "FooResponse", "validVersions": "0-1", "flexibleVersions": "0+",
  "fields": [ { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+", "about": "t" } ]}`

func TestGenerateVersionedDefinitions(t *testing.T) {
	dir := writeDefs(t, map[string]string{"FooRequest.json": okReq, "FooResponse.json": okResp})
	msgs, err := load(dir)
	require.NoError(t, err)
	src, err := generate(msgs, "x")
	require.NoError(t, err)
	s := string(src)
	for _, want := range []string{
		"if version >= 1 {", "v.B = d.CompactNullableString()",
		"kbin.AppendCompactNullableBytes", "d.compactBytes(version >= 1)",
		"if v.E != [16]byte{} {", "FooRequestItem struct", "v.A = -1",
	} {
		require.True(t, strings.Contains(s, want), "missing %q in:\n%s", want, s)
	}
}

func TestLoadRejects(t *testing.T) {
	cases := map[string]map[string]string{
		"not flexible": {"a.json": strings.Replace(okReq, `"0+",
  "fields"`, `"1+",
  "fields"`, 1), "b.json": okResp},
		"no response":                {"a.json": okReq},
		"unknown field":              {"a.json": strings.Replace(okReq, `"about": "a"`, `"about": "a", "bogus": 1`, 1), "b.json": okResp},
		"bad type":                   {"a.json": strings.Replace(okReq, `"type": "int32"`, `"type": "int33"`, 1), "b.json": okResp},
		"tag without taggedVersions": {"a.json": strings.Replace(okReq, `"taggedVersions": "0+", `, ``, 1), "b.json": okResp},
		"nullable int":               {"a.json": strings.Replace(okReq, `"default": "-1"`, `"nullableVersions": "0+"`, 1), "b.json": okResp},
		"bad default":                {"a.json": strings.Replace(okReq, `"default": "-1"`, `"default": "x"`, 1), "b.json": okResp},
		"open validVersions":         {"a.json": strings.Replace(okReq, `"0-1"`, `"0+"`, 1), "b.json": okResp},
		"empty":                      {},
	}
	for name, defs := range cases {
		_, err := load(writeDefs(t, defs))
		require.Error(t, err, name)
	}
}

func TestRunCheck(t *testing.T) {
	dir := writeDefs(t, map[string]string{"FooRequest.json": okReq, "FooResponse.json": okResp})
	out := filepath.Join(t.TempDir(), "zz.go")
	require.NoError(t, run(dir, out, false))
	require.NoError(t, run(dir, out, true))
	require.NoError(t, os.WriteFile(out, []byte("stale"), 0o644))
	require.Error(t, run(dir, out, true))
}

// TestVersionedOutputCompiles generates code for a multi-version definition
// (version-gated, partially nullable and tagged fields, bytes, uuid) next to
// copies of admin's hand-written helpers and type-checks it with go vet.
func TestVersionedOutputCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	defer os.Remove("testdata") // only if empty
	dir, err := os.MkdirTemp("testdata", "gen-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	defs := writeDefs(t, map[string]string{"FooRequest.json": okReq, "FooResponse.json": okResp})
	require.NoError(t, run(defs, filepath.Join(dir, "zz_generated.go"), false))
	for _, f := range []string{"codec.go", "apis.go", "errors.go"} {
		src, err := os.ReadFile(filepath.Join("../../admin", f))
		require.NoError(t, err)
		src = bytes.Replace(src, []byte("//go:generate"), []byte("// go:generate"), 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), src, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "foo_test.go"), []byte(fooTest), 0o644))
	out, err := exec.Command(goTool, "vet", "./"+dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(goTool, "test", "-count=1", "./"+dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// fooTest runs inside the generated package: version gating and the
// partially nullable fields behave per version.
const fooTest = `package admin

import (
	"bytes"
	"testing"
)

func TestFooVersions(t *testing.T) {
	b := "x"
	r := NewFooRequest()
	r.B = &b
	r.C = []FooRequestItem{{D: nil, E: [16]byte{1}}}
	r.Version = 0 // B absent, D not nullable (nil encodes as empty)
	v0 := r.AppendTo(nil)
	// A=-1, C=[1 element: D=empty bytes, tags{0: E}], no top-level tags.
	want0 := append([]byte{0xff, 0xff, 0xff, 0xff, 0x02, 0x01, 0x01, 0x00, 0x10, 0x01}, make([]byte, 15+1)...)
	if !bytes.Equal(v0, want0) {
		t.Fatalf("v0 % x, want % x", v0, want0)
	}
	var back FooRequest
	if err := back.ReadFrom(v0); err != nil || back.B != nil || back.C[0].D == nil || back.A != -1 {
		t.Fatalf("v0 decode: %v %+v", err, back)
	}
	r.Version = 1 // B present and nullable, D nullable
	v1 := r.AppendTo(nil)
	back = FooRequest{Version: 1}
	if err := back.ReadFrom(v1); err != nil || back.B == nil || *back.B != "x" || back.C[0].D != nil {
		t.Fatalf("v1 decode: %v %+v", err, back)
	}
	back = FooRequest{Version: 2}
	if err := back.ReadFrom(v1); err == nil {
		t.Fatal("version 2 accepted")
	}
}
`
