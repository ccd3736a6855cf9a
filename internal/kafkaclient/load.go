// Package kafkaclient turns the connection config of a mirror into franz-go client
// options, in one place for the source fetch, the source admin and the peer: the
// properties form (bootstrap.servers, security.protocol, ssl.*, sasl.*) is loaded into a
// controller.Connection (Load: PEM files and inline PEM read, SASL PLAIN and SCRAM built
// from franz-go's mechanisms), and a Connection, loaded or built by the host, becomes kgo
// options (KgoOptions: seeds, one dialer layering TLS on the host's dialer, SASL).
package kafkaclient

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/mirror/controller"
)

// Load reads the connection of mc's properties: the seeds of bootstrap.servers, the TLS
// config of security.protocol SSL or SASL_SSL (ssl.*: PEM trust and key stores, as files
// or inline) and the SASL mechanism of SASL_PLAINTEXT or SASL_SSL (sasl.mechanism PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username/sasl.password or sasl.jaas.config).
// Every problem is a *controller.KeyError naming the key, wrapping one of the
// controller.Err* sentinels. Files are read now: call Load again to pick up a renewed
// certificate.
func Load(mc controller.MirrorConfig) (controller.Connection, error) {
	if err := controller.ValidateSeeds(controller.KeyBootstrapServers, mc.BootstrapServers); err != nil {
		return controller.Connection{}, err
	}
	c := controller.Connection{Seeds: append([]string(nil), mc.BootstrapServers...)}
	var useTLS, useSASL bool
	switch mc.SecurityProtocol {
	case "PLAINTEXT", "":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return controller.Connection{}, controller.NewKeyError(controller.KeySecurityProtocol, controller.ErrUnsupportedValue,
			"%q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", mc.SecurityProtocol)
	}
	if useTLS {
		tc, err := loadTLS(mc)
		if err != nil {
			return controller.Connection{}, err
		}
		c.TLS = tc
	}
	if useSASL {
		m, err := loadSASL(mc)
		if err != nil {
			return controller.Connection{}, err
		}
		c.SASL = m
	}
	return c, nil
}

// ConfigOptions is Load followed by KgoOptions: the kgo options that reach the cluster
// described by mc's properties.
func ConfigOptions(mc controller.MirrorConfig) ([]kgo.Opt, error) {
	c, err := Load(mc)
	if err != nil {
		return nil, err
	}
	return KgoOptions(c, mc)
}

// loadSASL builds the mechanism of sasl.mechanism with its credentials.
func loadSASL(mc controller.MirrorConfig) (sasl.Mechanism, error) {
	user, pass := mc.SASLUsername, mc.SASLPassword
	if mc.SASLJAASConfig != "" {
		module, ju, jp, err := parseJAAS(mc.SASLJAASConfig)
		if err != nil {
			return nil, err
		}
		want := "PlainLoginModule"
		if strings.HasPrefix(mc.SASLMechanism, "SCRAM-") {
			want = "ScramLoginModule"
		}
		if !strings.HasSuffix(module, "."+want) && module != want {
			return nil, controller.NewKeyError(controller.KeySASLJAASConfig, controller.ErrUnsupportedValue,
				"login module %q does not go with sasl.mechanism %s (want %s)", module, mc.SASLMechanism, want)
		}
		if user == "" {
			user = ju
		}
		if pass == "" {
			pass = jp
		}
	}
	switch mc.SASLMechanism {
	case "PLAIN", "", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, controller.NewKeyError(controller.KeySASLMechanism, controller.ErrUnsupportedValue,
			"%q has no properties form: the host passes its sasl.Mechanism in Go (mirror.WithConnections)", mc.SASLMechanism)
	}
	if user == "" {
		return nil, controller.NewKeyError(controller.KeySASLUsername, controller.ErrMissingCredentials,
			"sasl.mechanism %s needs sasl.username (or sasl.jaas.config username=...)", mechName(mc.SASLMechanism))
	}
	if pass == "" {
		return nil, controller.NewKeyError(controller.KeySASLPassword, controller.ErrMissingCredentials,
			"sasl.mechanism %s needs sasl.password (or sasl.jaas.config password=...)", mechName(mc.SASLMechanism))
	}
	switch mc.SASLMechanism {
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
}

func mechName(m string) string {
	if m == "" {
		return "PLAIN"
	}
	return m
}

// parseJAAS reads `<login module class> required key="value" ...;`, Kafka's
// sasl.jaas.config of one login module, and returns the class and the username and
// password options.
func parseJAAS(v string) (module, user, pass string, err error) {
	bad := func(format string, args ...any) (string, string, string, error) {
		return "", "", "", controller.NewKeyError(controller.KeySASLJAASConfig, controller.ErrUnsupportedValue, format, args...)
	}
	s := strings.TrimSpace(v)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	fields := strings.Fields(s)
	if len(fields) < 2 || (fields[1] != "required" && fields[1] != "requisite" && fields[1] != "sufficient" && fields[1] != "optional") {
		return bad("want `<LoginModule> required username=\"...\" password=\"...\";`")
	}
	module = fields[0]
	rest := strings.TrimSpace(s[strings.Index(s, fields[1])+len(fields[1]):])
	opts := map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return bad("option %q is not key=value", rest)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimSpace(rest[eq+1:])
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return bad("option %s: unterminated quote", key)
			}
			val, rest = rest[1:1+end], strings.TrimSpace(rest[end+2:])
		} else {
			sp := strings.IndexAny(rest, " \t\n")
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], strings.TrimSpace(rest[sp:])
		}
		opts[key] = val
	}
	return module, opts["username"], opts["password"], nil
}
