package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/admin"
)

func TestSplitPrincipals(t *testing.T) {
	require.Equal(t, []string{"User:a", "User:b"}, splitPrincipals("User:a,User:b"))
	require.Equal(t, []string{"User:a", " User:b"}, splitPrincipals("User:a, User:b"))
	require.Equal(t, []string{"User:CN=ops,OU=x:y,O=acme", "User:b"}, splitPrincipals("User:CN=ops,OU=x:y,O=acme;User:b"))
	require.Equal(t, []string{"User:CN=ops,O=acme", "User:b"}, splitPrincipals("User:CN=ops,O=acme,User:b"))
	require.Equal(t, []string{"User:a", "", "User:b"}, splitPrincipals("User:a,,User:b"))
}

// TestAuthLogOncePerHostAndMinute: failures of one host are logged once a
// minute with the count of those not logged; another host is logged at once.
func TestAuthLogOncePerHostAndMinute(t *testing.T) {
	var buf bytes.Buffer
	l := newAuthLog(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	fail := func(remote string) {
		l.event(admin.AuthEvent{RemoteAddr: remote, Mechanism: "PLAIN", Err: errors.New("bad")})
	}
	fail("10.0.0.1:1")
	fail("10.0.0.1:2")
	fail("10.0.0.1:3")
	fail("10.0.0.2:1")
	require.Equal(t, 2, strings.Count(buf.String(), "authentication failed"))
	now = now.Add(time.Minute)
	fail("10.0.0.1:4")
	require.Equal(t, 3, strings.Count(buf.String(), "authentication failed"))
	require.Contains(t, buf.String(), "failures_not_logged_since_last=2")
	l.event(admin.AuthEvent{RemoteAddr: "10.0.0.1:5", Principal: "User:a"}) // success: debug, not shown
	require.Equal(t, 3, strings.Count(buf.String(), "msg="))
}
