package metasync

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// ErrSCRAM is returned when a SCRAM exchange (RFC 5802) fails.
var ErrSCRAM = errors.New("mirror: scram")

type scramHash func() hash.Hash

var (
	scramSHA256 scramHash = sha256.New
	scramSHA512 scramHash = sha512.New
)

// scramClient is a minimal RFC 5802 SCRAM client (no channel binding) implementing
// sarama.SCRAMClient. One value serves one authentication; not safe for concurrent use.
type scramClient struct {
	h        scramHash
	user     string
	password string
	authz    string
	nonce    string // client nonce, set by Begin unless preset by tests

	step        int
	firstBare   string
	serverKey   []byte
	authMessage string
	done        bool
}

func newSCRAMClient(h scramHash) *scramClient { return &scramClient{h: h} }

// Begin implements sarama.SCRAMClient.
func (c *scramClient) Begin(user, password, authzID string) error {
	c.user, c.password, c.authz = user, password, authzID
	if c.nonce == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("%w: nonce: %w", ErrSCRAM, err)
		}
		c.nonce = base64.RawStdEncoding.EncodeToString(b)
	}
	return nil
}

func scramEscape(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// Step implements sarama.SCRAMClient.
func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		c.firstBare = "n=" + scramEscape(c.user) + ",r=" + c.nonce
		gs2 := "n,,"
		if c.authz != "" {
			gs2 = "n,a=" + scramEscape(c.authz) + ","
		}
		return gs2 + c.firstBare, nil
	case 2:
		attrs := scramAttrs(challenge)
		if e, ok := attrs["e"]; ok {
			return "", fmt.Errorf("%w: server error %q", ErrSCRAM, e)
		}
		nonce, salt64, iter := attrs["r"], attrs["s"], attrs["i"]
		if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
			return "", fmt.Errorf("%w: server nonce does not extend the client nonce", ErrSCRAM)
		}
		salt, err := base64.StdEncoding.DecodeString(salt64)
		if err != nil {
			return "", fmt.Errorf("%w: bad salt: %w", ErrSCRAM, err)
		}
		n, err := strconv.Atoi(iter)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("%w: bad iteration count %q", ErrSCRAM, iter)
		}
		salted, err := pbkdf2.Key(c.h, c.password, salt, n, c.h().Size())
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSCRAM, err)
		}
		clientKey := c.hmac(salted, "Client Key")
		hs := c.h()
		hs.Write(clientKey)
		storedKey := hs.Sum(nil)
		gs2 := "n,,"
		if c.authz != "" {
			gs2 = "n,a=" + scramEscape(c.authz) + ","
		}
		withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + nonce
		c.authMessage = c.firstBare + "," + challenge + "," + withoutProof
		sig := c.hmac(storedKey, c.authMessage)
		proof := make([]byte, len(clientKey))
		for i := range clientKey {
			proof[i] = clientKey[i] ^ sig[i]
		}
		c.serverKey = c.hmac(salted, "Server Key")
		return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
	case 3:
		attrs := scramAttrs(challenge)
		if e, ok := attrs["e"]; ok {
			return "", fmt.Errorf("%w: server error %q", ErrSCRAM, e)
		}
		want := base64.StdEncoding.EncodeToString(c.hmac(c.serverKey, c.authMessage))
		if !hmac.Equal([]byte(attrs["v"]), []byte(want)) {
			return "", fmt.Errorf("%w: server signature mismatch", ErrSCRAM)
		}
		c.done = true
		return "", nil
	}
	return "", fmt.Errorf("%w: unexpected step %d", ErrSCRAM, c.step)
}

// Done implements sarama.SCRAMClient.
func (c *scramClient) Done() bool { return c.done }

func (c *scramClient) hmac(key []byte, msg string) []byte {
	m := hmac.New(c.h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func scramAttrs(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if len(part) >= 2 && part[1] == '=' {
			out[part[:1]] = part[2:]
		}
	}
	return out
}
