package statemachine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the protocol traces in testdata/. Commands:
//
//	init state=S                     set the partition's actual state
//	event NAME [k=v ...]             feed one event (fields: latest, batch, local, new, offset, reason)
//	reconcile desired=D [latest=N]   Next(desired, actual): move and print the plan, or "nothing to do"
//	check op=O [topic=T partition=P] CheckOp on the actual state
//	valid to=S                       ValidMove(actual, S)
//
// A successful event or reconcile changes the actual state.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		cur := Unknown
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "init":
				var name string
				d.ScanArgs(t, "state", &name)
				cur = mustState(t, name)
				return cur.String()
			case "event":
				if len(d.CmdArgs) == 0 {
					d.Fatalf(t, "event needs a name")
				}
				e := buildEvent(t, d)
				from := cur
				to, acts, err := Transition(cur, e)
				if err != nil {
					return "error: " + err.Error()
				}
				cur = to
				return fmt.Sprintf("%s -> %s\n%s", from, to, trace(acts))
			case "reconcile":
				var name string
				d.ScanArgs(t, "desired", &name)
				desired, err := ParseDesired(name)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				latest := -1
				d.MaybeScanArgs(t, "latest", &latest)
				from := cur
				to, acts, err := Next(desired, cur, int32(latest), stopMode(t, d))
				if err != nil {
					return "error: " + err.Error()
				}
				if to == from {
					return fmt.Sprintf("%s: nothing to do", from)
				}
				cur = to
				return fmt.Sprintf("%s -> %s\n%s", from, to, trace(acts))
			case "check":
				var opName string
				d.ScanArgs(t, "op", &opName)
				op, err := ParseOp(opName)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				topic, partition := "orders", 0
				d.MaybeScanArgs(t, "topic", &topic)
				d.MaybeScanArgs(t, "partition", &partition)
				if err := CheckOp(op, topic, int32(partition), cur); err != nil {
					return err.Error()
				}
				if IsNoOp(op, cur) {
					return "ok (no-op)"
				}
				return "ok"
			case "valid":
				var name string
				d.ScanArgs(t, "to", &name)
				return strconv.FormatBool(ValidMove(cur, mustState(t, name)))
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// stopMode reads the optional mode=abort|truncate argument.
func stopMode(t *testing.T, d *datadriven.TestData) StopMode {
	var mode string
	d.MaybeScanArgs(t, "mode", &mode)
	switch mode {
	case "", "abort":
		return StopAbortOpenTxns
	case "truncate":
		return StopTruncateToLSO
	}
	d.Fatalf(t, "unknown stop mode %q", mode)
	return 0
}

// buildEvent turns "event NAME k=v ..." into an Event.
func buildEvent(t *testing.T, d *datadriven.TestData) Event {
	num := func(key string) int64 {
		for _, a := range d.CmdArgs[1:] {
			if a.Key == key {
				n, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", key, err)
				}
				return n
			}
		}
		return -1
	}
	switch name := d.CmdArgs[0].Key; name {
	case "LeaderGained":
		return LeaderGained{LatestLocalEpoch: int32(num("latest")), StopMode: stopMode(t, d)}
	case "MirroringDesired":
		return MirroringDesired{}
	case "PausedDesired":
		return PausedDesired{}
	case "StoppedDesired":
		return StoppedDesired{LatestLocalEpoch: int32(num("latest")), StopMode: stopMode(t, d)}
	case "TruncationDone":
		return TruncationDone{}
	case "EpochExceeded":
		return EpochExceeded{BatchEpoch: int32(num("batch")), LocalEpoch: int32(num("local"))}
	case "EpochBumped":
		return EpochBumped{NewEpoch: int32(num("new"))}
	case "DivergenceULE":
		return DivergenceULE{TruncateOffset: num("offset")}
	case "ReplicasConverged":
		return ReplicasConverged{}
	case "FetcherRemoved":
		return FetcherRemoved{}
	case "StopTasksDone":
		return StopTasksDone{}
	case "Error":
		var reason string
		d.MaybeScanArgs(t, "reason", &reason)
		return Error{Reason: reason}
	case "Retry":
		return Retry{}
	case "RetryMirroring":
		return RetryMirroring{}
	default:
		d.Fatalf(t, "unknown event %q", name)
		return nil
	}
}

// trace prints a plan one action per line, as "phase[lane]: action"; the lane
// letter appears only when a phase has parallel lanes.
func trace(acts []Action) string {
	if len(acts) == 0 {
		return "  (no actions)"
	}
	var b strings.Builder
	for i, phase := range Phases(acts) {
		for j, lane := range phase {
			tag := strconv.Itoa(i + 1)
			if len(phase) > 1 {
				tag += string(rune('a' + j))
			}
			for _, a := range lane {
				fmt.Fprintf(&b, "  %s: %s\n", tag, a)
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
