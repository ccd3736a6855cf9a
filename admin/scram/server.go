package scram

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrAuthFailed is wrapped by the error of a conversation whose client gave
// wrong credentials or named an unknown user: the server answers both alike.
var ErrAuthFailed = errors.New("scram: invalid credentials")

// ErrProtocol is wrapped by the error of a malformed or out-of-bounds client
// message.
var ErrProtocol = errors.New("scram: malformed client message")

// Lookup returns the credential of a user for the conversation's mechanism:
// found false for an unknown user; an error for a store that cannot answer.
type Lookup func(user string) (c Credential, found bool, err error)

// Conversation is the server side of one SCRAM exchange: two client
// messages, two server messages. Not safe for concurrent use.
type Conversation struct {
	m      Mechanism
	lookup Lookup
	snonce string // the server's part of the nonce (printable)
	step   int

	gs2         string // the client's GS2 header ("n,,")
	clientFirst string // client-first-message-bare
	serverFirst string
	nonce       string // client nonce + server nonce
	user        string
	cred        Credential
}

// NewConversation starts a conversation; random are ServerNonceSize or more
// random bytes (the server nonce).
func NewConversation(m Mechanism, lookup Lookup, random []byte) (*Conversation, error) {
	if len(random) < ServerNonceSize {
		return nil, fmt.Errorf("scram: server nonce of %d random bytes, need %d", len(random), ServerNonceSize)
	}
	return &Conversation{m: m, lookup: lookup, snonce: base64.RawStdEncoding.EncodeToString(random)}, nil
}

// User is the authenticated user once Step returned done with no error.
func (c *Conversation) User() string { return c.user }

// Step takes the next client message and returns the server's answer; done
// is true with the server-final message, when the client is authenticated.
// An error (ErrAuthFailed, ErrProtocol, a Lookup error) ends the conversation.
func (c *Conversation) Step(msg []byte) (out []byte, done bool, err error) {
	switch c.step {
	case 0:
		c.step = 1
		out, err = c.first(msg)
		if err != nil {
			c.step = 3
		}
		return out, false, err
	case 1:
		c.step = 3
		out, err = c.final(msg)
		if err != nil {
			return nil, false, err
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%w: conversation already over", ErrProtocol)
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// printable reports whether s is a valid nonce: printable ASCII except ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// decodeName decodes a saslname (=2C is ',', =3D is '='; any other '=' is
// invalid).
func decodeName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, !strings.Contains(s, ",")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '=' && strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
			i += 2
		case s[i] == '=' && strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
			i += 2
		case s[i] == '=' || s[i] == ',':
			return "", false
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

// first parses client-first-message and answers server-first-message.
func (c *Conversation) first(msg []byte) ([]byte, error) {
	s := string(msg)
	// gs2-header: "n," or "y," (no channel binding here), then [a=authzid] ","
	var cb string
	switch {
	case strings.HasPrefix(s, "n,"), strings.HasPrefix(s, "y,"):
		cb, s = s[:2], s[2:]
	case strings.HasPrefix(s, "p="):
		return nil, protoErr("channel binding is not supported")
	default:
		return nil, protoErr("no GS2 header")
	}
	authz, rest, ok := strings.Cut(s, ",")
	if !ok {
		return nil, protoErr("no GS2 header")
	}
	var authzid string
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return nil, protoErr("bad authorization id")
		}
		if authzid, ok = decodeName(a); !ok {
			return nil, protoErr("bad authorization id")
		}
	}
	c.gs2 = cb + authz + ","
	c.clientFirst = rest
	fields := strings.Split(rest, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, protoErr("client-first-message needs n= then r=")
	}
	user, ok := decodeName(fields[0][2:])
	if !ok || user == "" || len(user) > MaxUsername {
		return nil, protoErr("bad user name")
	}
	cnonce := fields[1][2:]
	if cnonce == "" || len(cnonce) > MaxNonce || !printable(cnonce) {
		return nil, protoErr("client nonce of %d bytes (1-%d printable)", len(cnonce), MaxNonce)
	}
	for _, ext := range fields[2:] {
		k, v, ok := strings.Cut(ext, "=")
		if !ok || k == "" {
			return nil, protoErr("extension %q is not key=value", limit(ext))
		}
		if k == "tokenauth" && v == "true" {
			return nil, protoErr("delegation tokens are not supported")
		}
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("%w: authorization id %q differs from the user name", ErrAuthFailed, authzid)
	}
	cred, found, err := c.lookup(user)
	if err != nil {
		return nil, fmt.Errorf("scram: credential of %q: %w", user, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: no %s credential for the user", ErrAuthFailed, c.m.Name)
	}
	if cred.Mechanism.Name != c.m.Name {
		return nil, fmt.Errorf("scram: credential of %q is %s, not %s", user, cred.Mechanism.Name, c.m.Name)
	}
	if err := cred.Check(); err != nil {
		return nil, fmt.Errorf("scram: stored credential of %q: %w", user, err)
	}
	c.user, c.cred = user, cred
	c.nonce = cnonce + c.snonce
	c.serverFirst = "r=" + c.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(c.serverFirst), nil
}

// final checks client-final-message and answers server-final-message.
func (c *Conversation) final(msg []byte) ([]byte, error) {
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return nil, protoErr("client-final-message has no proof")
	}
	withoutProof, proofText := s[:i], s[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, protoErr("client-final-message needs c= then r=")
	}
	binding, err := base64.StdEncoding.DecodeString(fields[0][2:])
	if err != nil || string(binding) != c.gs2 {
		return nil, protoErr("channel binding does not match the GS2 header")
	}
	if fields[1][2:] != c.nonce {
		return nil, protoErr("nonce does not match the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != c.m.size {
		return nil, protoErr("proof of the wrong form")
	}
	authMessage := []byte(c.clientFirst + "," + c.serverFirst + "," + withoutProof)
	signature := c.m.hmac(c.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	if !hmac.Equal(c.m.sum(clientKey), c.cred.StoredKey) {
		return nil, fmt.Errorf("%w: wrong proof", ErrAuthFailed)
	}
	serverSig := c.m.hmac(c.cred.ServerKey, authMessage)
	return append([]byte("v="), base64.StdEncoding.EncodeToString(serverSig)...), nil
}

// ParsePlain parses a SASL PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd). An authorization id other than empty or the user name is refused,
// as Kafka does.
func ParsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", protoErr("PLAIN message needs three NUL-separated fields")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "" || len(user) > MaxUsername:
		return "", "", protoErr("PLAIN user name of %d bytes (1-%d)", len(user), MaxUsername)
	case password == "":
		return "", "", protoErr("PLAIN password is empty")
	case authzid != "" && authzid != user:
		return "", "", fmt.Errorf("%w: authorization id %q differs from the user name", ErrAuthFailed, authzid)
	}
	return user, password, nil
}

// limit cuts client text quoted in an error.
func limit(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
