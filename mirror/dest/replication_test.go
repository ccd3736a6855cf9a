package dest

import (
	"testing"

	"github.com/kmirror/kmirror/admin"
)

// placer is a Destination (its methods unused here) with a ReplicaPlacement answer.
type placer struct {
	Destination
	rf        int16
	placeable int
}

func (p placer) ReplicationFactor() int16 { return p.rf }
func (p placer) PlaceableReplicas() int   { return p.placeable }

func TestCheckReplicationFactor(t *testing.T) {
	cases := []struct {
		name string
		d    Destination
		want admin.Code
	}{
		{"no capability", struct{ Destination }{}, admin.CodeNone},
		{"placeable", placer{rf: 3, placeable: 3}, admin.CodeNone},
		{"more brokers than needed", placer{rf: 2, placeable: 5}, admin.CodeNone},
		{"a broker fenced", placer{rf: 3, placeable: 2}, admin.CodeInvalidReplicationFactor},
		{"no broker", placer{rf: 1, placeable: 0}, admin.CodeInvalidReplicationFactor},
		{"bad factor", placer{rf: 0, placeable: 3}, admin.CodeInvalidReplicationFactor},
	}
	for _, c := range cases {
		err := CheckReplicationFactor(c.d, "orders")
		if got := admin.CodeOf(err); got != c.want {
			t.Errorf("%s: code %v (%v), want %v", c.name, got, err, c.want)
		}
	}
}
