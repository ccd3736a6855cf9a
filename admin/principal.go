package admin

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"strings"
)

// CertificatePrincipal is the principal Kafka's default TLS principal
// mapping (ssl.principal.mapping.rules=DEFAULT) gives a client certificate:
// "User:" and the subject's distinguished name in RFC 2253 form as Java's
// X500Principal.getName() writes it: the RDNs last to first, in the order the
// certificate holds them; the keywords CN, C, L, ST, O, OU, STREET, DC and
// UID; any other attribute as its dotted OID and "#" with the hex of its DER
// value; the characters ,+"\<>; and a leading '#' or space or a trailing
// space escaped with a backslash.
func CertificatePrincipal(cert *x509.Certificate) string {
	return "User:" + rfc2253(cert.RawSubject)
}

// rdnAttribute is one attribute of a relative distinguished name, its value
// kept raw so that attributes without a keyword print as their DER.
type rdnAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one RDN (the SET suffix makes encoding/asn1 read a SET).
type rdnSET []rdnAttribute

// rfc2253Keywords are the attribute keywords of Java's RFC 2253 form.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// rfc2253 formats a DER-encoded Name; an undecodable one is its hex (it cannot
// be, for a certificate crypto/tls accepted).
func rfc2253(raw []byte) string {
	var seq []rdnSET
	if rest, err := asn1.Unmarshal(raw, &seq); err != nil || len(rest) > 0 {
		return "#" + hex.EncodeToString(raw)
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			b.WriteByte(',')
		}
		for j, a := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			kw, known := rfc2253Keywords[a.Type.String()]
			var s string
			if known {
				if _, err := asn1.Unmarshal(a.Value.FullBytes, &s); err != nil {
					known = false
				}
			}
			if !known {
				b.WriteString(a.Type.String())
				b.WriteString("=#")
				b.WriteString(hex.EncodeToString(a.Value.FullBytes))
				continue
			}
			b.WriteString(kw)
			b.WriteByte('=')
			writeRFC2253Value(&b, s)
		}
	}
	return b.String()
}

// writeRFC2253Value writes an attribute value with RFC 2253's escapes.
func writeRFC2253Value(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(",+\"\\<>;", c) >= 0,
			i == 0 && (c == '#' || c == ' '),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}
