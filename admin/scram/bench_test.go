package scram

import (
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
)

// BenchmarkVerifyPassword is the CPU a SASL PLAIN log-in costs the server
// (one PBKDF2 of the stored iterations): what an unauthenticated client can
// make it spend per attempt.
func BenchmarkVerifyPassword(b *testing.B) {
	for _, m := range Mechanisms() {
		for _, it := range []int{MinIterations, MaxIterations} {
			b.Run(m.Name+"/"+strconv.Itoa(it), func(b *testing.B) {
				c, err := m.NewCredential("secret", []byte("salt"), it)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if ok, err := c.VerifyPassword("secret"); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			})
		}
	}
}

// BenchmarkConversation is the server side of one SCRAM log-in (two
// messages; the server computes no PBKDF2, the stored keys stand for it).
func BenchmarkConversation(b *testing.B) {
	c, err := SHA512.NewCredential("pencil", []byte("saltsalt"), MinIterations)
	if err != nil {
		b.Fatal(err)
	}
	lookup := lookupOf(map[string]Credential{"user": c})
	first := []byte("n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL")
	for b.Loop() {
		conv, err := NewConversation(SHA512, lookup, nonce)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := conv.Step(first); err != nil {
			b.Fatal(err)
		}
		// A wrong proof costs the server the same as a right one.
		if _, _, err := conv.Step([]byte("c=biws,r=fyko+d2lbbFgONRv9qkxdawL" + conv.snonce + ",p=" + zeroProof)); !errors.Is(err, ErrAuthFailed) {
			b.Fatal("not refused as a wrong proof:", err)
		}
	}
}

// zeroProof is a SHA-512-sized proof of zeros, base64.
var zeroProof = base64.StdEncoding.EncodeToString(make([]byte, 64))
