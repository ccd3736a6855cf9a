package mirrorsim

import (
	"fmt"
	"strings"
)

// replayCall returns the Go code that replays seed with the Options o as the embedder
// gave them to New: the package-level Replay for the zero Options, else a New of the
// Options (o.ReplayOptions, or a literal of the set fields with a placeholder for each
// function) followed by Replay.
func replayCall(o Options, seed uint64) string {
	if o.ReplayOptions != "" {
		return fmt.Sprintf("s, _ := mirrorsim.New(%s); s.Replay(%d)", o.ReplayOptions, seed)
	}
	var fields []string
	add := func(set bool, format string, args ...any) {
		if set {
			fields = append(fields, fmt.Sprintf(format, args...))
		}
	}
	add(o.Sites != 0, "Sites: %d", o.Sites)
	add(o.Partitions != 0, "Partitions: %d", o.Partitions)
	add(o.Steps != 0, "Steps: %d", o.Steps)
	add(o.WaitTimeout != 0, "WaitTimeout: %d /* %v */", int64(o.WaitTimeout), o.WaitTimeout)
	add(o.LogFactory != nil, "LogFactory: /* your LogFactory */")
	add(o.WrapPeer != nil, "WrapPeer: /* your PeerWrapper */")
	add(o.Logger != nil, "Logger: /* your *slog.Logger */")
	internal := o.strictStop || o.noLMECheck
	if len(fields) == 0 && !internal {
		return fmt.Sprintf("mirrorsim.Replay(%d) (go test ./mirror/mirrorsim -run TestSimReplay -sim.replay=%d)", seed, seed)
	}
	call := fmt.Sprintf("s, _ := mirrorsim.New(mirrorsim.Options{%s}); s.Replay(%d)", strings.Join(fields, ", "), seed)
	if internal {
		call += fmt.Sprintf(" (with the package-internal options strictStop=%v noLMECheck=%v of the test that ran it)", o.strictStop, o.noLMECheck)
	}
	return call
}
