package kafkaclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/mirror/controller"
)

// KgoOptions returns the franz-go client options that reach the cluster of c: its
// seeds, one dialer (c.Dialer, or a net.Dialer with the socket receive buffer of mc's
// socket.receive.buffer.bytes, then TLS when c.TLS is set) and c.SASL; from mc, the
// request timeout overhead (request.timeout.ms) and the retry timeout of requests
// (socket.timeout.ms). c is validated first (Connection.Validate). Callers append
// their own options (client id, admin.ClientOpts) after these.
func KgoOptions(c controller.Connection, mc controller.MirrorConfig) ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Seeds...), kgo.Dialer(Dialer(c, mc.SocketReceiveBufferBytes))}
	if mc.RequestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(mc.RequestTimeout))
	}
	if mc.SocketTimeout > 0 {
		// A request to an unreachable cluster gives up after socket.timeout.ms
		// (kgo's default is 30 s, the default of socket.timeout.ms too).
		opts = append(opts, kgo.RetryTimeout(mc.SocketTimeout))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	return opts, nil
}

// Dialer returns the dial function of c: c.Dialer, or TCP with a 10 s timeout and the
// receive buffer set to rcvBuf bytes (-1 or 0 keeps the system default); then a TLS
// handshake when c.TLS is set (the server name taken from the address when c.TLS names
// none).
func Dialer(c controller.Connection, rcvBuf int) func(ctx context.Context, network, host string) (net.Conn, error) {
	base := c.Dialer
	if base == nil {
		base = tcpDialer(rcvBuf)
	}
	if c.TLS == nil {
		return base
	}
	tc := c.TLS
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := base(ctx, network, host)
		if err != nil {
			return nil, err
		}
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				cfg.ServerName = h
			}
		}
		tlsConn := tls.Client(conn, cfg)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tlsConn, nil
	}
}

func tcpDialer(rcvBuf int) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tcp, ok := conn.(*net.TCPConn); ok && rcvBuf > 0 {
			if err := tcp.SetReadBuffer(rcvBuf); err != nil {
				_ = conn.Close()
				return nil, fmt.Errorf("kafkaclient: %s=%d: %w", controller.KeySocketReceiveBufferBytes, rcvBuf, err)
			}
		}
		return conn, nil
	}
}
