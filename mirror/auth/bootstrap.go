package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/admin/scram"
)

// DefaultIterations is the iteration count ParseAddScram uses when none is
// given (Kafka's tools' default).
const DefaultIterations = scram.MinIterations

// defaultSaltSize is the size of a random salt.
const defaultSaltSize = 32

// ErrAddScram is wrapped by every ParseAddScram error.
var ErrAddScram = errors.New("auth: invalid SCRAM credential")

// ParseAddScram parses one credential in kafka-storage's --add-scram syntax,
// 'SCRAM-SHA-512=[name=alice,password=alice-secret]', with optional
// iterations=N (default DefaultIterations) and a random salt. A value may be
// quoted with double quotes (a password with ',' or ']'). The password is
// salted and hashed here and not kept.
func ParseAddScram(s string) (Change, error) {
	mechName, rest, ok := strings.Cut(s, "=")
	m, known := scram.ByName(strings.TrimSpace(mechName))
	if !ok || !known {
		return Change{}, fmt.Errorf("%w: %q does not start with SCRAM-SHA-256= or SCRAM-SHA-512=", ErrAddScram, mechName)
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return Change{}, fmt.Errorf("%w: expected [name=...,password=...] after %s=", ErrAddScram, m.Name)
	}
	fields, err := splitFields(rest[1 : len(rest)-1])
	if err != nil {
		return Change{}, err
	}
	var name, password string
	iterations := DefaultIterations
	for k, v := range fields {
		switch k {
		case "name":
			name = v
		case "password":
			password = v
		case "iterations":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Change{}, fmt.Errorf("%w: iterations %q", ErrAddScram, v)
			}
			iterations = n
		default:
			return Change{}, fmt.Errorf("%w: unknown key %q (name, password, iterations)", ErrAddScram, k)
		}
	}
	if name == "" || password == "" {
		return Change{}, fmt.Errorf("%w: name and password are required", ErrAddScram)
	}
	salt := make([]byte, defaultSaltSize)
	if _, err := rand.Read(salt); err != nil {
		return Change{}, fmt.Errorf("%w: random salt: %w", ErrAddScram, err)
	}
	c, err := m.NewCredential(password, salt, iterations)
	if err != nil {
		return Change{}, fmt.Errorf("%w: %w", ErrAddScram, err)
	}
	return Change{User: name, Mechanism: m, Credential: &c}, nil
}

// splitFields splits k=v pairs separated by commas; a value may be in
// double quotes.
func splitFields(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not key=value", ErrAddScram, s)
		}
		k = strings.TrimSpace(k)
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated quote in %s", ErrAddScram, k)
			}
			v, rest = rest[1:1+end], rest[2+end:]
			rest = strings.TrimSpace(rest)
			if rest != "" && !strings.HasPrefix(rest, ",") {
				return nil, fmt.Errorf("%w: text after the quoted value of %s", ErrAddScram, k)
			}
			rest = strings.TrimPrefix(rest, ",")
		} else {
			v, rest, _ = strings.Cut(rest, ",")
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: %s given twice", ErrAddScram, k)
		}
		out[k] = v
		s = strings.TrimSpace(rest)
	}
	return out, nil
}
