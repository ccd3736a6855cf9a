package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseProperties(t *testing.T) {
	in := `# source cluster
! another comment
bootstrap.servers=localhost:9092
mirror.topics.include = orders.*, payments
  sasl.username: alice
key\=with\:seps value with spaces
multi=a,\
      b,\
      c
unicode=caf\u00e9
bootstrap.servers=other:9092
empty=
`
	got, err := parseProperties(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []property{
		{"bootstrap.servers", "other:9092"}, // last value wins, first position kept
		{"mirror.topics.include", "orders.*, payments"},
		{"sasl.username", "alice"},
		{"key=with:seps", "value with spaces"},
		{"multi", "a,b,c"},
		{"unicode", "café"},
		{"empty", ""},
	}, got)
}

func TestParsePropertiesErrors(t *testing.T) {
	for _, in := range []string{"=value\n", "bad=\\u12\n", "bad=\\uzzzz\n"} {
		_, err := parseProperties(strings.NewReader(in))
		require.Error(t, err, "input %q", in)
	}
}

// escapeProperty writes s so that parseProperties reads it back unchanged.
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		r := s[i] // byte-wise: every special character is ASCII, other bytes pass as is
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\f':
			b.WriteString(`\f`)
		case key && (r == '=' || r == ':' || r == ' ' || r == '#' || r == '!'):
			b.WriteByte('\\')
			b.WriteByte(r)
		case !key && i == 0 && r == ' ':
			b.WriteString(`\ `)
		default:
			b.WriteByte(r)
		}
	}
	return b.String()
}

func FuzzParseProperties(f *testing.F) {
	f.Add("a=b\n# c\n! d\nkey : value\\\n  continued\nx\\u0041=\\t\n")
	f.Add("bootstrap.servers=localhost:9092\nmirror.topics.include=.*\n")
	f.Add("k\\=1 v\\\\\n\n   \n=\n")
	f.Add("a=\\u00")
	f.Add("a\\\n")
	f.Fuzz(func(t *testing.T, in string) {
		props, err := parseProperties(strings.NewReader(in))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		var enc strings.Builder
		for _, p := range props {
			if p.Key == "" {
				t.Fatalf("empty key from %q", in)
			}
			if seen[p.Key] {
				t.Fatalf("duplicate key %q from %q", p.Key, in)
			}
			seen[p.Key] = true
			enc.WriteString(escapeProperty(p.Key, true) + "=" + escapeProperty(p.Value, false) + "\n")
		}
		back, err := parseProperties(strings.NewReader(enc.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", enc.String(), err)
		}
		if len(back) != len(props) {
			t.Fatalf("re-parse of %q: %d pairs, want %d", enc.String(), len(back), len(props))
		}
		for i := range props {
			if back[i] != props[i] {
				t.Fatalf("re-parse of %q: pair %d = %q, want %q", enc.String(), i, back[i], props[i])
			}
		}
	})
}
