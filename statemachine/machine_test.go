package statemachine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expectations in this file are written independently of the
// implementation's tables: states by name and code, moves and plans as text.

// wantCodes is the numbering decided in DESIGN.md §2.
var wantCodes = []struct {
	name string
	code int8
	kind string
}{
	{"UNKNOWN", -1, "implicit"},
	{"PREPARING", 0, "transient"},
	{"EPOCH_FENCING", 1, "transient"},
	{"ULE_LOG_TRUNCATION", 2, "transient"},
	{"MIRRORING", 3, "steady"},
	{"PAUSING", 4, "transient"},
	{"PAUSED", 5, "steady"},
	{"STOPPING", 6, "transient"},
	{"STOPPED", 7, "terminal"},
	{"FAILED", 8, "error"},
}

// sampleEvents holds one event of each type, with fixed field values the
// expected plans below refer to.
var sampleEvents = []Event{
	LeaderGained{LatestLocalEpoch: 7},
	MirroringDesired{},
	PausedDesired{},
	StoppedDesired{LatestLocalEpoch: 5},
	TruncationDone{},
	EpochExceeded{BatchEpoch: 9, LocalEpoch: 4},
	EpochBumped{NewEpoch: 10},
	DivergenceULE{TruncateOffset: 100},
	ReplicasConverged{},
	FetcherRemoved{},
	StopTasksDone{},
	Error{Reason: "boom"},
	Retry{},
	RetryMirroring{},
}

const (
	planPreparing = "SetReadOnly ; FindLMEAndTruncate ; WaitReplicas(offset=-1, all=false)"
	planStopping5 = "StopFetcher ; PersistLME ; BumpLeaderEpoch(min=5) ; AbortOpenTransactions ; AppendPIDReset"
	planStopping7 = "StopFetcher ; PersistLME ; BumpLeaderEpoch(min=7) ; AbortOpenTransactions ; AppendPIDReset"
	planFailed    = `Fail("boom") | StopFetcher`
)

type wantMove struct{ to, plan string }

// wantMoves lists every legal (state, event) pair; all others are illegal.
var wantMoves = map[[2]string]wantMove{
	// Re-assert: same state, entry actions again.
	{"UNKNOWN", "LeaderGained"}:            {"UNKNOWN", "none"},
	{"PREPARING", "LeaderGained"}:          {"PREPARING", planPreparing},
	{"EPOCH_FENCING", "LeaderGained"}:      {"EPOCH_FENCING", "StopFetcher ; BumpLeaderEpoch(min=7)"},
	{"ULE_LOG_TRUNCATION", "LeaderGained"}: {"ULE_LOG_TRUNCATION", "StopFetcher ; WaitReplicas(offset=-1, all=true)"},
	{"MIRRORING", "LeaderGained"}:          {"MIRRORING", "StartFetcher"},
	{"PAUSING", "LeaderGained"}:            {"PAUSING", "StopFetcher"},
	{"PAUSED", "LeaderGained"}:             {"PAUSED", "none"},
	{"STOPPING", "LeaderGained"}:           {"STOPPING", planStopping7},
	{"STOPPED", "LeaderGained"}:            {"STOPPED", "ClearReadOnly"},
	{"FAILED", "LeaderGained"}:             {"FAILED", `Fail("") | StopFetcher`},
	// Start / failback / resume.
	{"UNKNOWN", "MirroringDesired"}: {"PREPARING", planPreparing},
	{"STOPPED", "MirroringDesired"}: {"PREPARING", planPreparing},
	{"PAUSED", "MirroringDesired"}:  {"MIRRORING", "StartFetcher"},
	// Pause.
	{"MIRRORING", "PausedDesired"}: {"PAUSING", "StopFetcher"},
	// Stop.
	{"UNKNOWN", "StoppedDesired"}:            {"STOPPING", planStopping5},
	{"PREPARING", "StoppedDesired"}:          {"STOPPING", planStopping5},
	{"EPOCH_FENCING", "StoppedDesired"}:      {"STOPPING", planStopping5},
	{"ULE_LOG_TRUNCATION", "StoppedDesired"}: {"STOPPING", planStopping5},
	{"MIRRORING", "StoppedDesired"}:          {"STOPPING", planStopping5},
	{"PAUSING", "StoppedDesired"}:            {"STOPPING", planStopping5},
	{"PAUSED", "StoppedDesired"}:             {"STOPPING", planStopping5},
	{"FAILED", "StoppedDesired"}:             {"STOPPING", planStopping5},
	// Progress of the transient states.
	{"PREPARING", "TruncationDone"}:             {"MIRRORING", "StartFetcher"},
	{"MIRRORING", "EpochExceeded"}:              {"EPOCH_FENCING", "StopFetcher ; BumpLeaderEpoch(min=9)"},
	{"EPOCH_FENCING", "EpochBumped"}:            {"MIRRORING", "StartFetcher"},
	{"MIRRORING", "DivergenceULE"}:              {"ULE_LOG_TRUNCATION", "StopFetcher ; Truncate(offset=100) ; WaitReplicas(offset=100, all=true)"},
	{"ULE_LOG_TRUNCATION", "ReplicasConverged"}: {"MIRRORING", "StartFetcher"},
	{"PAUSING", "FetcherRemoved"}:               {"PAUSED", "none"},
	{"STOPPING", "StopTasksDone"}:               {"STOPPED", "ClearReadOnly"},
	// Errors from anywhere.
	{"UNKNOWN", "Error"}:            {"FAILED", planFailed},
	{"PREPARING", "Error"}:          {"FAILED", planFailed},
	{"EPOCH_FENCING", "Error"}:      {"FAILED", planFailed},
	{"ULE_LOG_TRUNCATION", "Error"}: {"FAILED", planFailed},
	{"MIRRORING", "Error"}:          {"FAILED", planFailed},
	{"PAUSING", "Error"}:            {"FAILED", planFailed},
	{"PAUSED", "Error"}:             {"FAILED", planFailed},
	{"STOPPING", "Error"}:           {"FAILED", planFailed},
	{"STOPPED", "Error"}:            {"FAILED", planFailed},
	{"FAILED", "Error"}:             {"FAILED", planFailed},
	// Retry / recover.
	{"FAILED", "Retry"}:          {"PREPARING", planPreparing},
	{"FAILED", "RetryMirroring"}: {"MIRRORING", "StartFetcher"},
}

func mustState(t *testing.T, name string) State {
	t.Helper()
	for _, c := range wantCodes {
		if c.name == name {
			return State(c.code)
		}
	}
	t.Fatalf("no state %q in the test table", name)
	return 0
}

func TestStateTable(t *testing.T) {
	require.Len(t, States(), len(wantCodes))
	for i, c := range wantCodes {
		s := State(c.code)
		require.Equal(t, s, States()[i])
		require.True(t, s.Valid(), c.name)
		require.Equal(t, c.name, s.String())
		require.Equal(t, c.kind, s.Kind().String())
		got, err := ParseState(c.name)
		require.NoError(t, err)
		require.Equal(t, s, got)
		require.Equal(t, c.name != "UNKNOWN" && c.name != "STOPPED", s.ReadOnly(), c.name)
	}
	for _, bad := range []State{-2, 9, 16, 127, -128} {
		require.False(t, bad.Valid())
		require.Equal(t, fmt.Sprintf("State(%d)", int8(bad)), bad.String())
		require.Equal(t, KindInvalid, bad.Kind())
		require.False(t, bad.ReadOnly())
	}
}

func TestParseState(t *testing.T) {
	for in, want := range map[string]State{
		"LOG_TRUNCATION": Preparing, "log_truncation": Preparing, " LOG_ALIGNMENT ": Preparing,
		"ULE_RECOVERY": ULELogTruncation, "mirroring": Mirroring, "Stopped": Stopped,
	} {
		got, err := ParseState(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "MIRROR", "PREPARING_", "State(3)", "3", "mırrorıng", "\u212aNOWN"} {
		_, err := ParseState(in)
		require.ErrorIs(t, err, ErrUnknownState, in)
	}
}

func TestDesired(t *testing.T) {
	for _, c := range []struct {
		name string
		code int8
	}{{"UNKNOWN", -1}, {"MIRRORING", 3}, {"PAUSED", 5}, {"STOPPED", 7}} {
		d, err := ParseDesired(c.name)
		require.NoError(t, err)
		require.Equal(t, Desired(c.code), d)
		require.True(t, d.Valid())
		require.Equal(t, c.name, d.String())
		require.Equal(t, State(c.code), d.State())
	}
	require.Equal(t, Desired(3), DesiredMirroring)
	require.Equal(t, Desired(5), DesiredPaused)
	require.Equal(t, Desired(7), DesiredStopped)
	require.Equal(t, Desired(-1), DesiredUnknown)
	for _, in := range []string{"PAUSING", "PREPARING", "FAILED", "STOPPING", "nope"} {
		_, err := ParseDesired(in)
		require.ErrorIs(t, err, ErrUnknownState, in)
	}
	require.False(t, Desired(4).Valid())
	require.Equal(t, "Desired(4)", Desired(4).String())
}

// TestTransitionExhaustive checks every (state, event) pair against wantMoves.
func TestTransitionExhaustive(t *testing.T) {
	require.Len(t, sampleEvents, len(EventTypes()), "one sample per event type")
	legal, illegal := 0, 0
	for _, c := range wantCodes {
		from := State(c.code)
		for _, e := range sampleEvents {
			name := fmt.Sprintf("%s/%s", c.name, e.Type())
			to, actions, err := Transition(from, e)
			want, ok := wantMoves[[2]string{c.name, e.Type().String()}]
			if ok {
				legal++
				require.NoError(t, err, name)
				require.Equal(t, want.to, to.String(), name)
				require.Equal(t, want.plan, FormatActions(actions), name)
				require.True(t, ValidMove(from, to), name)
				continue
			}
			illegal++
			require.ErrorIs(t, err, ErrInvalidTransition, name)
			require.Equal(t, fmt.Sprintf("statemachine: invalid transition: event %s in state %s", e.Type(), c.name), err.Error())
			var te *TransitionError
			require.True(t, errors.As(err, &te))
			require.Equal(t, from, te.From)
			require.Equal(t, e.Type(), te.Event)
			require.Equal(t, from, to, name)
			require.Nil(t, actions, name)
		}
	}
	require.Equal(t, len(wantMoves), legal, "every expected legal pair was exercised")
	msg := fmt.Sprintf("covered %d states x %d events = %d pairs (%d legal, %d illegal)",
		len(wantCodes), len(sampleEvents), legal+illegal, legal, illegal)
	t.Log(msg)
	require.Equal(t, len(wantCodes)*len(sampleEvents), legal+illegal)
}

func TestTransitionBadInput(t *testing.T) {
	_, _, err := Transition(Mirroring, nil)
	require.ErrorIs(t, err, ErrInvalidEvent)

	for _, s := range []State{-2, 9, 100} {
		got, acts, err := Transition(s, Error{Reason: "x"})
		require.ErrorIs(t, err, ErrInvalidTransition)
		require.Equal(t, s, got)
		require.Nil(t, acts)
	}
	for _, c := range []struct {
		s State
		e Event
	}{
		{Mirroring, EpochExceeded{BatchEpoch: 4, LocalEpoch: 4}},
		{Mirroring, EpochExceeded{BatchEpoch: 3, LocalEpoch: 4}},
		{Mirroring, DivergenceULE{TruncateOffset: -1}},
		{Mirroring, LeaderGained{LatestLocalEpoch: -2}},
		{Paused, StoppedDesired{LatestLocalEpoch: -5}},
	} {
		got, acts, err := Transition(c.s, c.e)
		require.ErrorIs(t, err, ErrInvalidEvent, c.e.String())
		require.NotErrorIs(t, err, ErrInvalidTransition)
		require.Equal(t, c.s, got)
		require.Nil(t, acts)
	}
	// An illegal pair is reported as such even with bad fields.
	_, _, err = Transition(Paused, EpochExceeded{})
	require.ErrorIs(t, err, ErrInvalidTransition)

	// -1 means an empty local log: a plain bump.
	_, acts, err := Transition(Mirroring, StoppedDesired{LatestLocalEpoch: -1})
	require.NoError(t, err)
	require.Contains(t, FormatActions(acts), "BumpLeaderEpoch(min=-1)")
}

// TestValidMove compares ValidMove on every pair of codes with the moves the
// test table allows, plus re-assertion.
func TestValidMove(t *testing.T) {
	allowed := map[[2]string]bool{}
	for k, m := range wantMoves {
		allowed[[2]string{k[0], m.to}] = true
	}
	n, yes := 0, 0
	for f := -128; f <= 127; f++ {
		for to := -128; to <= 127; to++ {
			from, dst := State(f), State(to)
			want := from.Valid() && dst.Valid() && (from == dst || allowed[[2]string{from.String(), dst.String()}])
			require.Equal(t, want, ValidMove(from, dst), "%s -> %s", from, dst)
			n++
			if want {
				yes++
			}
		}
	}
	t.Logf("ValidMove checked on %d code pairs, %d legal", n, yes)
	// Examples from spec §5.4 "not allowed".
	require.False(t, ValidMove(Paused, Pausing))
	require.False(t, ValidMove(Preparing, Pausing))
	require.False(t, ValidMove(Stopped, Mirroring))
	require.False(t, ValidMove(Stopping, Mirroring))
	require.True(t, ValidMove(Failed, Stopping))
}

func TestReconcile(t *testing.T) {
	// rows: actual; columns: desired UNKNOWN, MIRRORING, PAUSED, STOPPED.
	want := map[string][4]string{
		"UNKNOWN":            {"UNKNOWN", "PREPARING", "UNKNOWN", "STOPPING"},
		"PREPARING":          {"PREPARING", "PREPARING", "PREPARING", "STOPPING"},
		"EPOCH_FENCING":      {"EPOCH_FENCING", "EPOCH_FENCING", "EPOCH_FENCING", "STOPPING"},
		"ULE_LOG_TRUNCATION": {"ULE_LOG_TRUNCATION", "ULE_LOG_TRUNCATION", "ULE_LOG_TRUNCATION", "STOPPING"},
		"MIRRORING":          {"MIRRORING", "MIRRORING", "PAUSING", "STOPPING"},
		"PAUSING":            {"PAUSING", "PAUSING", "PAUSING", "STOPPING"},
		"PAUSED":             {"PAUSED", "MIRRORING", "PAUSED", "STOPPING"},
		"STOPPING":           {"STOPPING", "STOPPING", "STOPPING", "STOPPING"},
		"STOPPED":            {"STOPPED", "PREPARING", "STOPPED", "STOPPED"},
		"FAILED":             {"FAILED", "FAILED", "FAILED", "STOPPING"},
	}
	desired := []Desired{DesiredUnknown, DesiredMirroring, DesiredPaused, DesiredStopped}
	require.Len(t, want, len(wantCodes))
	cases := 0
	for _, c := range wantCodes {
		actual := State(c.code)
		for i, d := range desired {
			got := Reconcile(d, actual)
			require.Equal(t, want[c.name][i], got.String(), "desired %s actual %s", d, c.name)
			require.True(t, ValidMove(actual, got))
			cases++

			// Next agrees with Reconcile and Transition.
			next, acts, err := Next(d, actual, 3, StopAbortOpenTxns)
			require.NoError(t, err)
			require.Equal(t, got, next)
			if got == actual {
				require.Nil(t, acts)
			} else {
				to, acts2, err := Transition(actual, DesiredEvent(d, 3, StopAbortOpenTxns))
				require.NoError(t, err)
				require.Equal(t, got, to)
				require.Equal(t, acts2, acts)
			}
		}
		// Undefined desired codes change nothing.
		require.Equal(t, actual, Reconcile(Desired(4), actual))
		require.Nil(t, DesiredEvent(Desired(4), 0, StopAbortOpenTxns))
	}
	require.Equal(t, State(42), Reconcile(DesiredMirroring, State(42)))
	t.Logf("Reconcile: %d desired x actual cases", cases)
}

func TestCheckOp(t *testing.T) {
	// "+" allowed, "=" no-op (allowed, nothing to do), "-" refused.
	// columns: UNKNOWN PREPARING EPOCH_FENCING ULE MIRRORING PAUSING PAUSED STOPPING STOPPED FAILED
	want := map[string]string{
		"start":  "+---=---+-",
		"stop":   "-++++++--+",
		"pause":  "----+-----",
		"resume": "------+---",
		"delete": "--------+-",
	}
	require.Len(t, Ops(), len(want))
	for _, op := range Ops() {
		row, ok := want[op.String()]
		require.True(t, ok, op.String())
		parsed, err := ParseOp(op.String())
		require.NoError(t, err)
		require.Equal(t, op, parsed)
		for i, c := range wantCodes {
			s := State(c.code)
			err := CheckOp(op, "orders", 3, s)
			switch row[i] {
			case '+', '=':
				require.NoError(t, err, "%s in %s", op, c.name)
			default:
				require.ErrorIs(t, err, ErrInvalidStates, "%s in %s", op, c.name)
				require.Equal(t, fmt.Sprintf(`statemachine: cannot %s topic "orders" partition 3 in state %s`, op, c.name), err.Error())
				var ise *InvalidStatesError
				require.True(t, errors.As(fmt.Errorf("wrapped: %w", err), &ise))
				require.Equal(t, InvalidStatesError{Op: op, Topic: "orders", Partition: 3, State: s}, *ise)
			}
			require.Equal(t, row[i] == '=', IsNoOp(op, s), "%s in %s", op, c.name)
		}
		require.ErrorIs(t, CheckOp(op, "t", 0, State(50)), ErrInvalidStates)
	}
	require.ErrorIs(t, CheckOp(Op(9), "t", 0, Mirroring), ErrInvalidStates)
	require.Equal(t, "Op(9)", Op(9).String())
	_, err := ParseOp("recover")
	require.Error(t, err)
	require.EqualError(t, CheckOp(OpPause, "orders", 3, Paused),
		`statemachine: cannot pause topic "orders" partition 3 in state PAUSED`)
}

func TestPhasesAndFormat(t *testing.T) {
	require.Equal(t, "none", FormatActions(nil))
	// Out-of-order input is grouped by phase and lane; lane order is kept.
	plan := []Action{
		AppendPIDReset{Step{3, 0}},
		PersistLME{Step{2, 1}},
		StopFetcher{Step{1, 0}},
		BumpLeaderEpoch{Step{2, 0}, 4},
		Truncate{Step{2, 1}, 8},
	}
	ph := Phases(plan)
	require.Len(t, ph, 3)
	require.Len(t, ph[1], 2)
	require.Equal(t, []Action{PersistLME{Step{2, 1}}, Truncate{Step{2, 1}, 8}}, ph[1][1])
	require.Equal(t, "StopFetcher ; BumpLeaderEpoch(min=4) | PersistLME -> Truncate(offset=8) ; AppendPIDReset", FormatActions(plan))

	// The STOPPING plan in detail (DESIGN.md §2, spec §8.1): the LME before
	// the bump, the ABORT markers and the barrier after it.
	_, acts, err := Transition(Mirroring, StoppedDesired{LatestLocalEpoch: 12})
	require.NoError(t, err)
	require.Equal(t, []Action{
		StopFetcher{Step{1, 0}},
		PersistLME{Step{2, 0}},
		BumpLeaderEpoch{Step{3, 0}, 12},
		AbortOpenTransactions{Step{4, 0}},
		AppendPIDReset{Step{5, 0}},
	}, acts)
	// The explicit LSO-truncation mode: truncate, then persist the LME of what
	// is left; no markers.
	_, acts, err = Transition(Mirroring, StoppedDesired{LatestLocalEpoch: 12, StopMode: StopTruncateToLSO})
	require.NoError(t, err)
	require.Equal(t, []Action{
		StopFetcher{Step{1, 0}},
		TruncateToLSO{Step{2, 0}},
		PersistLME{Step{2, 0}},
		BumpLeaderEpoch{Step{3, 0}, 12},
		AppendPIDReset{Step{4, 0}},
	}, acts)
	_, _, err = Transition(Mirroring, StoppedDesired{LatestLocalEpoch: 12, StopMode: 9})
	require.ErrorIs(t, err, ErrInvalidEvent)
	for _, a := range acts {
		require.Equal(t, a.At(), a.At().At())
	}
	// Every plan's phases start at 1 and are contiguous.
	for _, c := range wantCodes {
		for _, e := range sampleEvents {
			_, acts, err := Transition(State(c.code), e)
			if err != nil {
				continue
			}
			for i, phase := range Phases(acts) {
				require.Equal(t, int8(i+1), phase[0][0].At().Phase, "%s/%s", c.name, e)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	for _, e := range sampleEvents {
		require.NotEmpty(t, e.String())
		require.Contains(t, e.String(), e.Type().String())
	}
	require.Equal(t, "EventType(99)", EventType(99).String())
	require.Equal(t, "Kind(9)", Kind(9).String())
	require.Equal(t, `WaitReplicas(offset=5, all=true)`, WaitReplicas{Offset: 5, AllReplicas: true}.String())
	require.Equal(t, `Fail("x")`, Fail{Reason: "x"}.String())
}

func BenchmarkTransition(b *testing.B) {
	e := StoppedDesired{LatestLocalEpoch: 5}
	for b.Loop() {
		if _, _, err := Transition(Mirroring, e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidMove(b *testing.B) {
	for b.Loop() {
		if !ValidMove(Failed, Stopping) {
			b.Fatal("want valid")
		}
	}
}

func FuzzParseState(f *testing.F) {
	for _, c := range wantCodes {
		f.Add(c.name)
	}
	for _, s := range []string{"LOG_TRUNCATION", "log_alignment", " ULE_RECOVERY", "", "\x00", "MIRRORİNG", "State(3)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseState(in)
		if err != nil {
			require.ErrorIs(t, err, ErrUnknownState)
			return
		}
		require.True(t, s.Valid())
		back, err := ParseState(s.String())
		require.NoError(t, err)
		require.Equal(t, s, back)
		if d, err := ParseDesired(in); err == nil {
			require.Equal(t, State(d), s)
		}
	})
}
