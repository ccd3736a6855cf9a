package compacted

import (
	"crypto/tls"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kgoOptions translates the connection settings of sc into the options of the kgo client
// the replay fetches with, so that it reaches the brokers as the sarama clients of the Log
// do: TLS (Net.TLS.Enable, Net.TLS.Config; an enabled TLS without a config is a default
// one), SASL (PLAIN with AuthIdentity, SCRAM-SHA-256 and SCRAM-SHA-512 with SCRAMAuthzID;
// a mechanism left empty is PLAIN, as sarama reads it), Net.DialTimeout and ClientID.
// A setting the replay cannot honour is refused with a *ConnSettingError rather than
// dropped: the replay would otherwise reach the brokers in another way than the Log's
// producers (or not at all).
func kgoOptions(sc *sarama.Config) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if sc.ClientID != "" {
		opts = append(opts, kgo.ClientID(sc.ClientID))
	}
	if sc.Net.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(sc.Net.DialTimeout))
	}
	if sc.Net.Proxy.Enable {
		return nil, &ConnSettingError{Setting: "Net.Proxy.Enable", Value: "true"}
	}
	if sc.Net.TLS.Enable {
		tc := sc.Net.TLS.Config
		if tc == nil {
			tc = new(tls.Config)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if !sc.Net.SASL.Enable {
		return opts, nil
	}
	if !sc.Net.SASL.Handshake {
		return nil, &ConnSettingError{Setting: "Net.SASL.Handshake", Value: "false"}
	}
	s := sc.Net.SASL
	switch s.Mechanism {
	case "", sarama.SASLTypePlaintext:
		opts = append(opts, kgo.SASL(plain.Auth{Zid: s.AuthIdentity, User: s.User, Pass: s.Password}.AsMechanism()))
	case sarama.SASLTypeSCRAMSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{Zid: s.SCRAMAuthzID, User: s.User, Pass: s.Password}.AsSha256Mechanism()))
	case sarama.SASLTypeSCRAMSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{Zid: s.SCRAMAuthzID, User: s.User, Pass: s.Password}.AsSha512Mechanism()))
	default:
		return nil, &ConnSettingError{Setting: "Net.SASL.Mechanism", Value: string(s.Mechanism)}
	}
	return opts, nil
}

// ConnSettingError refuses a connection setting of Config.Sarama that the replay's
// client cannot take over (a SASL mechanism other than PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512, SASL without handshake, a proxy). It matches ErrInvalidConfig and
// ErrUnsupportedConn.
type ConnSettingError struct {
	Setting string // the sarama.Config field, e.g. "Net.SASL.Mechanism"
	Value   string
}

func (e *ConnSettingError) Error() string {
	return fmt.Sprintf("compacted: sarama %s=%q cannot be used by the replay client (supported: TLS; SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 with handshake; no proxy)", e.Setting, e.Value)
}

// Is matches ErrInvalidConfig and ErrUnsupportedConn.
func (e *ConnSettingError) Is(target error) bool {
	return target == ErrInvalidConfig || target == ErrUnsupportedConn
}
