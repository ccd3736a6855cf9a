package epoch

import (
	"errors"
	"fmt"
	"strings"
)

// simRecord is one record of a simulated log: the leader epoch stamped on it and a label
// standing for its content ("A0", "PID_RESET", ...).
type simRecord struct {
	Epoch int32
	Label string
}

// simLog is a minimal partition log for tests: records from offset start on, and the
// leader-epoch cache maintained as Kafka's log maintains it (assign on append, truncate on
// truncation).
type simLog struct {
	name    string
	start   int64
	records []simRecord
	cache   Cache
}

func (l *simLog) leo() int64 { return l.start + int64(len(l.records)) }

// append writes records at the log end, each stamped with its epoch, assigning the cache as
// Kafka's append path does (one call per batch; here one per record).
func (l *simLog) append(recs ...simRecord) {
	for _, r := range recs {
		l.cache.Assign(r.Epoch, l.leo())
		l.records = append(l.records, r)
	}
}

// truncateTo removes every record at offset ≥ off. Like Kafka's UnifiedLog.truncateTo, a
// truncation at or past the log end still truncates the cache at the log end: a leader that
// registered its epoch at the log end but wrote nothing before losing leadership would
// otherwise keep an epoch entry no record backs, and keep sending it as LastFetchedEpoch.
func (l *simLog) truncateTo(off int64) {
	if off >= l.leo() {
		l.cache.TruncateFromEnd(l.leo())
		return
	}
	if off < l.start {
		l.truncateFully(off)
		return
	}
	l.records = l.records[:off-l.start]
	l.cache.TruncateFromEnd(off)
}

// truncateFully empties the log and restarts it at start.
func (l *simLog) truncateFully(start int64) {
	l.records = nil
	l.start = start
	l.cache.Clear()
}

func (l *simLog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: start=%d leo=%d cache=%v", l.name, l.start, l.leo(), &l.cache)
	for i, r := range l.records {
		fmt.Fprintf(&b, "\n  %d: %s(LE %d)", l.start+int64(i), r.Label, r.Epoch)
	}
	return b.String()
}

// fetchRound is one Fetch from leader by follower, each side behaving like Kafka: the
// follower sends LastFetchedEpoch = its latest epoch and FetchOffset = its log end; the
// leader answers with CheckFetch (or OFFSET_OUT_OF_RANGE when the offset is past its log
// end); the follower truncates on a DivergingEpoch (FollowerTruncation), handles
// OFFSET_OUT_OF_RANGE as Kafka's fetchOffsetAndTruncate does (leader end below ours →
// truncate to it; leader start above ours → truncate fully and restart there, KIP-1279 §7.2),
// or appends what it got. It returns a one-line description and whether the follower is
// caught up (nothing to copy, no divergence).
func fetchRound(leader, follower *simLog) (string, bool) {
	return fetchRoundN(leader, follower, -1)
}

// fetchRoundN is fetchRound copying at most maxCopy records (all when maxCopy < 0), as a
// fetch limited by max bytes would.
func fetchRoundN(leader, follower *simLog, maxCopy int) (string, bool) {
	lfe, fo := follower.cache.LatestEpoch(), follower.leo()
	head := fmt.Sprintf("fetch lastFetchedEpoch=%d fetchOffset=%d: ", lfe, fo)
	d, diverged, err := CheckFetch(&leader.cache, leader.start, leader.leo(), lfe, fo)
	if err == nil && !diverged && (fo > leader.leo() || fo < leader.start) {
		err = &OutOfRangeError{FetchOffset: fo, LastFetchedEpoch: lfe, LogStartOffset: leader.start, Reason: "outside the log"}
	}
	switch {
	case errors.Is(err, ErrOffsetOutOfRange):
		var oe *OutOfRangeError
		errors.As(err, &oe)
		head += "OFFSET_OUT_OF_RANGE (" + oe.Reason + "); "
		switch {
		case leader.leo() < fo:
			follower.truncateTo(leader.leo())
			return head + fmt.Sprintf("leader end %d below ours: truncate to it", leader.leo()), false
		case leader.start > fo:
			follower.truncateFully(leader.start)
			return head + fmt.Sprintf("leader start %d above our end: truncate fully, restart there", leader.start), false
		default:
			return head + "retry", false
		}
	case diverged:
		off, complete := FollowerTruncation(&follower.cache, follower.leo(), d)
		follower.truncateTo(off)
		return head + fmt.Sprintf("diverging epoch=%d endOffset=%d; truncate to %d (complete=%v)", d.Epoch, d.EndOffset, off, complete), false
	case fo == leader.leo():
		return head + "up to date", true
	default:
		got := leader.records[fo-leader.start:]
		if maxCopy >= 0 && len(got) > maxCopy {
			got = got[:maxCopy]
		}
		follower.append(got...)
		return head + fmt.Sprintf("copied offsets %d..%d", fo, fo+int64(len(got))-1), false
	}
}

// syncLogs runs fetch rounds until the follower is caught up (at most limit rounds) and
// returns the trace.
func syncLogs(leader, follower *simLog, limit int) ([]string, bool) {
	var trace []string
	for range limit {
		line, done := fetchRound(leader, follower)
		trace = append(trace, line)
		if done {
			return trace, true
		}
	}
	return trace, false
}

// firstDifference returns the first offset at which the two logs differ (content or epoch),
// or -1 when they hold the same records at the same offsets.
func firstDifference(a, b *simLog) int64 {
	if a.start != b.start {
		return min(a.start, b.start)
	}
	n := min(len(a.records), len(b.records))
	for i := 0; i < n; i++ {
		if a.records[i] != b.records[i] {
			return a.start + int64(i)
		}
	}
	if len(a.records) != len(b.records) {
		return a.start + int64(n)
	}
	return -1
}
