package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanFlagsValidated: --dry-run only with a lifecycle action and never with
// --wait; --allow-truncation only with --start or --recover. Each misuse is a usage error before
// anything is sent.
func TestPlanFlagsValidated(t *testing.T) {
	base := []string{"--bootstrap-server", "127.0.0.1:1", "--mirror", "m"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--list", "--dry-run"}, "--dry-run is only valid with"},
		{[]string{"--describe", "--dry-run"}, "--dry-run is only valid with"},
		{[]string{"--stop", "--topics", "t", "--allow-truncation"}, "--allow-truncation is only valid with --start or --recover"},
		{[]string{"--pause", "--topics", "t", "--allow-truncation"}, "--allow-truncation is only valid with --start or --recover"},
		{[]string{"--stop", "--topics", "t", "--dry-run", "--wait"}, "--wait is not valid with it"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(append(append([]string{}, base...), c.args...), &out, &errOut), "%v", c.args)
		require.Contains(t, errOut.String(), c.want, "%v", c.args)
	}
}

// TestPlanCells: a row of the plan table names the truncation, the removed range,
// the local records lost and the open transactions.
func TestPlanCells(t *testing.T) {
	p := planRow{Partition: 1, StateNow: "STOPPED", StateAfter: "MIRRORING", LastMirrorEpoch: -1, LogStart: 0, LogEnd: 64,
		TruncationOffset: 0, FullTruncation: true, DivergenceOffset: -1, Removed: rangeRow{From: 0, To: 64, Records: 62},
		LocalWrites: rangeRow{From: 20, To: 64, Records: 42}, OpenTransactions: []txnRow{{ProducerID: 7, FirstOffset: 30}}}
	require.Equal(t, []string{"orders", "1", "STOPPED", "MIRRORING", "-", "-", "[0,64)", "FULL", "[0,64)", "62", "42 [20,64)", "1 pid 7@30"},
		planCells("orders", p))
}
