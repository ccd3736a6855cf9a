// Package scram implements the server side of SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802, RFC 7677) as Kafka brokers speak it, and the credentials a server
// keeps: a salt, an iteration count, and the StoredKey and ServerKey derived
// from the salted password, never the password itself.
//
// The package is pure: it does no I/O, reads no clock and takes its randomness
// (the server nonce) as a parameter. admin.Server runs its Conversation on a
// connection; a credential store (mirror/auth) persists Credential values.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is one SCRAM mechanism.
type Mechanism struct {
	// Name is the SASL mechanism name: "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Name string
	// Type is Kafka's ScramMechanism number used by
	// DescribeUserScramCredentials and AlterUserScramCredentials (1 or 2).
	Type int8
	hash func() hash.Hash
	size int
}

// The two mechanisms Kafka supports.
var (
	SHA256 = Mechanism{Name: "SCRAM-SHA-256", Type: 1, hash: sha256.New, size: sha256.Size}
	SHA512 = Mechanism{Name: "SCRAM-SHA-512", Type: 2, hash: sha512.New, size: sha512.Size}
)

// Iteration bounds, Kafka's (ScramMechanism's minimum and maximum): a
// credential outside them is refused when stored and when used, so no client
// can make the server compute more than MaxIterations rounds per login.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Bounds on what a client may send (the whole message is also bounded by the
// server's token size).
const (
	// MaxNonce bounds the client nonce (Kafka's clients send 20-30 bytes).
	MaxNonce = 512
	// MaxUsername bounds the decoded user name.
	MaxUsername = 1024
	// MaxSalt bounds the salt of a stored credential.
	MaxSalt = 1024
)

// ServerNonceSize is the length of the random bytes a server nonce is made
// of (before base64).
const ServerNonceSize = 24

// ByName returns the mechanism of a SASL mechanism name.
func ByName(name string) (Mechanism, bool) {
	switch name {
	case SHA256.Name:
		return SHA256, true
	case SHA512.Name:
		return SHA512, true
	}
	return Mechanism{}, false
}

// ByType returns the mechanism of Kafka's ScramMechanism number.
func ByType(t int8) (Mechanism, bool) {
	switch t {
	case SHA256.Type:
		return SHA256, true
	case SHA512.Type:
		return SHA512, true
	}
	return Mechanism{}, false
}

// Mechanisms lists both mechanisms, SHA-256 first.
func Mechanisms() []Mechanism { return []Mechanism{SHA256, SHA512} }

// KeySize is the size of the mechanism's keys and salted password.
func (m Mechanism) KeySize() int { return m.size }

// Credential is what a server keeps of one user's password for one
// mechanism (RFC 5802 §3).
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// ErrBadCredential is wrapped by the error of a credential outside the
// bounds (iterations, salt, key sizes).
var ErrBadCredential = errors.New("scram: unacceptable credential")

// Check reports whether c is within the bounds: iterations in
// [MinIterations, MaxIterations], a salt of 1 to MaxSalt bytes, keys of the
// mechanism's size.
func (c Credential) Check() error {
	switch {
	case c.Mechanism.hash == nil:
		return fmt.Errorf("%w: unknown mechanism", ErrBadCredential)
	case c.Iterations < MinIterations:
		return fmt.Errorf("%w: %d iterations, fewer than %d", ErrBadCredential, c.Iterations, MinIterations)
	case c.Iterations > MaxIterations:
		return fmt.Errorf("%w: %d iterations, more than %d", ErrBadCredential, c.Iterations, MaxIterations)
	case len(c.Salt) == 0 || len(c.Salt) > MaxSalt:
		return fmt.Errorf("%w: salt of %d bytes (1-%d)", ErrBadCredential, len(c.Salt), MaxSalt)
	case len(c.StoredKey) != c.Mechanism.size || len(c.ServerKey) != c.Mechanism.size:
		return fmt.Errorf("%w: keys of %d and %d bytes, %s needs %d", ErrBadCredential, len(c.StoredKey), len(c.ServerKey), c.Mechanism.Name, c.Mechanism.size)
	}
	return nil
}

// SaltedPassword is Hi(password, salt, iterations) of RFC 5802 (PBKDF2 with
// the mechanism's HMAC), what AlterUserScramCredentials carries.
func (m Mechanism) SaltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	if iterations < 1 || iterations > MaxIterations {
		return nil, fmt.Errorf("%w: %d iterations", ErrBadCredential, iterations)
	}
	return pbkdf2.Key(m.hash, password, salt, iterations, m.size)
}

// FromSaltedPassword derives the credential of a salted password: StoredKey
// = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted, "Server Key").
// It checks the bounds (Check).
func (m Mechanism) FromSaltedPassword(salt, salted []byte, iterations int) (Credential, error) {
	if len(salted) != m.size {
		return Credential{}, fmt.Errorf("%w: salted password of %d bytes, %s needs %d", ErrBadCredential, len(salted), m.Name, m.size)
	}
	clientKey := m.hmac(salted, []byte("Client Key"))
	c := Credential{Mechanism: m, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: m.sum(clientKey), ServerKey: m.hmac(salted, []byte("Server Key"))}
	return c, c.Check()
}

// NewCredential derives the credential of a password with the given salt and
// iterations.
func (m Mechanism) NewCredential(password string, salt []byte, iterations int) (Credential, error) {
	if iterations < MinIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations, fewer than %d", ErrBadCredential, iterations, MinIterations)
	}
	salted, err := m.SaltedPassword(password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return m.FromSaltedPassword(salt, salted, iterations)
}

// VerifyPassword reports whether password is the one c was made from (SASL
// PLAIN against a SCRAM credential), in constant time over the keys. It
// refuses a credential outside the bounds.
func (c Credential) VerifyPassword(password string) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	got, err := c.Mechanism.NewCredential(password, c.Salt, c.Iterations)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) == 1, nil
}

func (m Mechanism) hmac(key, msg []byte) []byte {
	h := hmac.New(m.hash, key)
	h.Write(msg)
	return h.Sum(nil)
}

func (m Mechanism) sum(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}
