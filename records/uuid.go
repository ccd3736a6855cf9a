package records

import (
	"encoding/base64"
	"fmt"
)

// UUID is a Kafka Uuid (for example a topic id): 16 bytes, the same layout
// as the [16]byte kmsg uses.
type UUID [16]byte

// uuidText is Kafka's text encoding: URL-safe base64 without padding.
var uuidText = base64.RawURLEncoding.Strict()

// String returns Kafka's text form of u: URL-safe base64 without padding,
// always 22 characters (Kafka's Uuid.toString).
func (u UUID) String() string {
	var out [22]byte
	uuidText.Encode(out[:], u[:])
	return string(out[:])
}

// ParseUUID parses Kafka's text form of a UUID. It accepts exactly the
// canonical 22-character form that String produces (padding and non-zero
// trailing bits are refused), so ParseUUID(s) succeeds only when
// ParseUUID(s).String() == s.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 22 {
		return u, fmt.Errorf("%w: %q has length %d, want 22", ErrBadUUID, s, len(s))
	}
	n, err := uuidText.Decode(u[:], []byte(s))
	if err != nil || n != 16 {
		return UUID{}, fmt.Errorf("%w: %q is not URL-safe base64 of 16 bytes", ErrBadUUID, s)
	}
	return u, nil
}
