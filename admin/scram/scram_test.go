package scram

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

func lookupOf(creds map[string]Credential) Lookup {
	return func(user string) (Credential, bool, error) {
		c, ok := creds[user]
		return c, ok, nil
	}
}

var nonce = bytes.Repeat([]byte{7}, ServerNonceSize)

// clientSession starts franz-go's SCRAM client (an independent
// implementation) and returns its session and first message.
func clientSession(t *testing.T, m Mechanism, user, pass string) (sasl.Session, []byte) {
	a := kscram.Auth{User: user, Pass: pass}
	mech := a.AsSha256Mechanism()
	if m.Name == SHA512.Name {
		mech = a.AsSha512Mechanism()
	}
	s, first, err := mech.Authenticate(t.Context(), "")
	require.NoError(t, err)
	return s, first
}

func TestConversationWithFranzGoClient(t *testing.T) {
	for _, m := range Mechanisms() {
		t.Run(m.Name, func(t *testing.T) {
			c, err := m.NewCredential("pencil", []byte("saltsalt"), 4096)
			require.NoError(t, err)
			conv, err := NewConversation(m, lookupOf(map[string]Credential{"us,er=": c}), nonce)
			require.NoError(t, err)
			s, first := clientSession(t, m, "us,er=", "pencil")
			require.Contains(t, string(first), "n=us=2Cer=3D")
			serverFirst, done, err := conv.Step(first)
			require.NoError(t, err)
			require.False(t, done)
			_, final, err := s.Challenge(serverFirst)
			require.NoError(t, err)
			serverFinal, done, err := conv.Step(final)
			require.NoError(t, err)
			require.True(t, done)
			require.Equal(t, "us,er=", conv.User())
			ok, _, err := s.Challenge(serverFinal) // the client checks the server signature
			require.NoError(t, err)
			require.True(t, ok)
			_, _, err = conv.Step(final)
			require.ErrorIs(t, err, ErrProtocol, "the conversation is over")
		})
	}
}

func TestConversationFailures(t *testing.T) {
	c, err := SHA512.NewCredential("right", []byte("salt"), 4096)
	require.NoError(t, err)
	creds := map[string]Credential{"alice": c}
	run := func(user, pass string, edit func(string) string) error {
		conv, err := NewConversation(SHA512, lookupOf(creds), nonce)
		require.NoError(t, err)
		s, first := clientSession(t, SHA512, user, pass)
		sf, _, err := conv.Step(first)
		if err != nil {
			return err
		}
		_, final, err := s.Challenge(sf)
		require.NoError(t, err)
		_, _, err = conv.Step([]byte(edit(string(final))))
		return err
	}
	same := func(s string) string { return s }
	require.ErrorIs(t, run("alice", "wrong", same), ErrAuthFailed)
	require.ErrorIs(t, run("bob", "x", same), ErrAuthFailed)
	require.ErrorIs(t, run("alice", "right", func(s string) string { return strings.Replace(s, "r=", "r=x", 1) }), ErrProtocol)
	require.ErrorIs(t, run("alice", "right", func(s string) string {
		return strings.Replace(s, "c=biws", "c="+base64.StdEncoding.EncodeToString([]byte("y,,")), 1)
	}), ErrProtocol)
	require.ErrorIs(t, run("alice", "right", func(s string) string { return s[:strings.LastIndex(s, ",p=")] }), ErrProtocol)
	require.NoError(t, run("alice", "right", same))

	for _, first := range []string{
		"", "n", "p=tls-unique,,n=alice,r=abc", "n,,r=abc,n=alice", "n,,n=,r=abc", "n,,n=alice,r=",
		"n,,n=al=ice,r=abc", "n,,n=alice,r=a,b", "n,,n=alice,r=" + strings.Repeat("x", MaxNonce+1),
		"n,,n=alice,r=abc,tokenauth=true", "n,b=x,n=alice,r=abc",
	} {
		conv, err := NewConversation(SHA512, lookupOf(creds), nonce)
		require.NoError(t, err)
		_, _, err = conv.Step([]byte(first))
		require.ErrorIs(t, err, ErrProtocol, "%q", first)
	}
	conv, err := NewConversation(SHA512, lookupOf(creds), nonce)
	require.NoError(t, err)
	_, _, err = conv.Step([]byte("n,a=mallory,n=alice,r=abc"))
	require.ErrorIs(t, err, ErrAuthFailed, "an authorization id other than the user")
	_, err = NewConversation(SHA512, lookupOf(creds), nonce[:3])
	require.Error(t, err)
}

func TestCredentialBounds(t *testing.T) {
	_, err := SHA256.NewCredential("p", []byte("s"), MinIterations-1)
	require.ErrorIs(t, err, ErrBadCredential)
	_, err = SHA256.NewCredential("p", []byte("s"), MaxIterations+1)
	require.ErrorIs(t, err, ErrBadCredential)
	_, err = SHA256.NewCredential("p", nil, MinIterations)
	require.ErrorIs(t, err, ErrBadCredential)
	_, err = SHA256.FromSaltedPassword([]byte("s"), make([]byte, 5), MinIterations)
	require.ErrorIs(t, err, ErrBadCredential)
	c, err := SHA256.NewCredential("p", []byte("s"), MinIterations)
	require.NoError(t, err)
	c.Iterations = 1 << 30 // a corrupt store must not make a log-in compute this
	_, err = c.VerifyPassword("p")
	require.ErrorIs(t, err, ErrBadCredential)
}

func TestParsePlain(t *testing.T) {
	u, p, err := ParsePlain([]byte("\x00alice\x00pw"))
	require.NoError(t, err)
	require.Equal(t, [2]string{"alice", "pw"}, [2]string{u, p})
	_, _, err = ParsePlain([]byte("alice\x00alice\x00pw"))
	require.NoError(t, err)
	_, _, err = ParsePlain([]byte("bob\x00alice\x00pw"))
	require.ErrorIs(t, err, ErrAuthFailed)
	for _, bad := range []string{"", "alice", "\x00alice", "\x00\x00pw", "\x00alice\x00", "\x00a\x00b\x00c"} {
		_, _, err = ParsePlain([]byte(bad))
		require.ErrorIs(t, err, ErrProtocol, "%q", bad)
	}
}

// FuzzConversation: no client message makes the server panic or accept.
func FuzzConversation(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=x,ext=1"), []byte(""))
	c, err := SHA256.NewCredential("pw", []byte("salt"), MinIterations)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		conv, err := NewConversation(SHA256, lookupOf(map[string]Credential{"alice": c}), nonce)
		require.NoError(t, err)
		if _, _, err := conv.Step(first); err != nil {
			return
		}
		_, done, err := conv.Step(final)
		require.False(t, done && err == nil, "a forged proof was accepted")
	})
}
