package epoch

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// UndefinedEpoch is Kafka's UNDEFINED_EPOCH (and RecordBatch.NO_PARTITION_LEADER_EPOCH):
// "no epoch known" or "not given".
const UndefinedEpoch int32 = -1

// UndefinedOffset is Kafka's UNDEFINED_EPOCH_OFFSET: "no end offset known".
const UndefinedOffset int64 = -1

// ErrInvalidEntry is returned (wrapped in an *EntryError) by NewCache when the given entries
// are not a valid leader-epoch history.
var ErrInvalidEntry = errors.New("epoch: invalid entry")

// EntryError says which entry of a history is invalid and why. It matches ErrInvalidEntry
// with errors.Is.
type EntryError struct {
	Index  int    // position of the offending entry in the given list
	Entry  Entry  // the offending entry
	Reason string // what is wrong with it
}

// Error implements error.
func (e *EntryError) Error() string {
	return fmt.Sprintf("%v: entry %d (epoch %d, start offset %d): %s",
		ErrInvalidEntry, e.Index, e.Entry.Epoch, e.Entry.StartOffset, e.Reason)
}

// Is reports whether target is ErrInvalidEntry.
func (e *EntryError) Is(target error) bool { return target == ErrInvalidEntry }

// Entry is one leader-epoch history entry: Epoch starts at StartOffset (the offset of the
// first record written in that epoch). Kafka's EpochEntry.
type Entry struct {
	Epoch       int32
	StartOffset int64
}

// String formats the entry as "epoch@startOffset".
func (e Entry) String() string { return fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset) }

// Cache is a leader-epoch history with the semantics of Kafka's LeaderEpochFileCache
// (without the file: persistence is the caller's, see EncodeCheckpoint).
//
// Invariant: entries are sorted, with strictly increasing epochs and strictly increasing
// start offsets, all ≥ 0. Every method keeps it.
//
// The zero value is an empty cache ready to use. A Cache is not safe for concurrent use.
type Cache struct {
	entries []Entry
}

// NewCache returns a cache holding entries (copied). The entries must have epochs ≥ 0,
// start offsets ≥ 0, and strictly increasing epochs and start offsets; otherwise the error
// is an *EntryError matching ErrInvalidEntry.
func NewCache(entries ...Entry) (*Cache, error) {
	if err := validate(entries); err != nil {
		return nil, err
	}
	c := &Cache{}
	if len(entries) > 0 {
		c.entries = append(make([]Entry, 0, len(entries)), entries...)
	}
	return c, nil
}

// validate checks the Cache invariant on a list of entries.
func validate(entries []Entry) error {
	for i, e := range entries {
		switch {
		case e.Epoch < 0:
			return &EntryError{Index: i, Entry: e, Reason: "negative epoch"}
		case e.StartOffset < 0:
			return &EntryError{Index: i, Entry: e, Reason: "negative start offset"}
		case i > 0 && e.Epoch <= entries[i-1].Epoch:
			return &EntryError{Index: i, Entry: e, Reason: fmt.Sprintf(
				"epoch not above the previous entry's epoch %d", entries[i-1].Epoch)}
		case i > 0 && e.StartOffset <= entries[i-1].StartOffset:
			return &EntryError{Index: i, Entry: e, Reason: fmt.Sprintf(
				"start offset not above the previous entry's start offset %d", entries[i-1].StartOffset)}
		}
	}
	return nil
}

// Assign records that epoch starts at startOffset, as Kafka's LeaderEpochFileCache.assign:
//
//   - An assignment of the latest epoch at a start offset ≥ the latest entry's start offset
//     is a no-op (an epoch's start offset is never moved up) and returns false.
//   - Otherwise, entries are removed from the end while their epoch is ≥ epoch or their
//     start offset is ≥ startOffset, then (epoch, startOffset) is appended and Assign returns
//     true. So a new higher epoch at a lower-or-equal offset replaces the entries it
//     overlaps, the latest epoch at a lower offset moves that entry's start down, and — as
//     in Kafka — an epoch lower than the latest is not ignored: it drops every entry from
//     its epoch on (Kafka's test shouldEnforceMonotonicallyIncreasingEpochs).
//
// A negative epoch or start offset (Kafka throws IllegalArgumentException) is ignored and
// returns false.
func (c *Cache) Assign(epoch int32, startOffset int64) bool {
	if epoch < 0 || startOffset < 0 {
		return false
	}
	n := len(c.entries)
	if n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && startOffset >= last.StartOffset {
			return false
		}
	}
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= startOffset) {
		n--
	}
	c.entries = append(c.entries[:n], Entry{Epoch: epoch, StartOffset: startOffset})
	return true
}

// EndOffsetFor answers "where does epoch requested end?" with the exact rules of Kafka's
// LeaderEpochFileCache.endOffsetFor (what OffsetForLeaderEpoch and the Fetch divergence check
// use). logEndOffset is the log end offset (LEO) of the log the cache belongs to.
//
//   - requested == UndefinedEpoch → (UndefinedEpoch, UndefinedOffset).
//   - requested == the latest epoch → (requested, logEndOffset).
//   - no entry has an epoch above requested (an empty cache, or requested above the latest
//     epoch) → (UndefinedEpoch, UndefinedOffset).
//   - requested is below the first epoch → (requested, start offset of the first entry).
//   - otherwise → (the largest epoch ≤ requested, start offset of the first entry with an
//     epoch > requested). For a requested epoch between two entries the epoch returned is
//     the lower entry's.
func (c *Cache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	if requested == UndefinedEpoch {
		return UndefinedEpoch, UndefinedOffset
	}
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch == requested {
		return requested, logEndOffset
	}
	// hi = index of the first entry with Epoch > requested.
	hi := c.higherIndex(requested)
	if hi == n {
		return UndefinedEpoch, UndefinedOffset
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// higherIndex returns the index of the first entry whose epoch is > e (len when none).
func (c *Cache) higherIndex(e int32) int {
	// Caches are short (one entry per leader change) and usually queried near the end;
	// a linear scan from the end beats a binary search for the common sizes.
	n := len(c.entries)
	if n <= 8 {
		i := n
		for i > 0 && c.entries[i-1].Epoch > e {
			i--
		}
		return i
	}
	return sort.Search(n, func(i int) bool { return c.entries[i].Epoch > e })
}

// TruncateFromEnd removes every entry whose start offset is ≥ endOffset, as Kafka does when
// the log is truncated to endOffset (Kafka's truncateFromEnd). A negative endOffset is a
// no-op.
//
// A log truncated at or past its end must still call TruncateFromEnd(logEnd), as Kafka's
// UnifiedLog.truncateTo does: a leader that registered its epoch at the log end and lost
// leadership before writing would otherwise keep an entry no record backs (and keep sending
// it as LastFetchedEpoch).
func (c *Cache) TruncateFromEnd(endOffset int64) {
	if endOffset < 0 {
		return
	}
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	c.entries = c.entries[:n]
}

// TruncateFromStart drops the history before startOffset, as Kafka does when the log start
// offset moves up (Kafka's truncateFromStart): the entries with start offset ≤ startOffset
// are removed, except the last of them — the epoch that contains startOffset — which is
// kept with its start offset moved up to startOffset. So TruncateFromStart(6) keeps an entry
// that starts at 6 unchanged.
func (c *Cache) TruncateFromStart(startOffset int64) {
	k := 0 // number of entries with StartOffset <= startOffset
	for k < len(c.entries) && c.entries[k].StartOffset <= startOffset {
		k++
	}
	if k == 0 {
		return
	}
	kept := Entry{Epoch: c.entries[k-1].Epoch, StartOffset: startOffset}
	n := copy(c.entries[1:], c.entries[k:])
	c.entries[0] = kept
	c.entries = c.entries[:n+1]
}

// EpochForOffset returns the epoch the record at offset belongs to: the epoch of the last
// entry whose start offset is ≤ offset. It returns (UndefinedEpoch, false) when offset is
// below the first entry's start offset or the cache is empty. Like Kafka's epochForOffset it
// does not check offset against the log end.
func (c *Cache) EpochForOffset(offset int64) (int32, bool) {
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset > offset {
		i--
	}
	if i == 0 {
		return UndefinedEpoch, false
	}
	return c.entries[i-1].Epoch, true
}

// Latest returns the entry with the highest epoch, or (Entry{UndefinedEpoch,
// UndefinedOffset}, false) when the cache is empty.
func (c *Cache) Latest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{Epoch: UndefinedEpoch, StartOffset: UndefinedOffset}, false
	}
	return c.entries[len(c.entries)-1], true
}

// Earliest returns the entry with the lowest epoch, or (Entry{UndefinedEpoch,
// UndefinedOffset}, false) when the cache is empty.
func (c *Cache) Earliest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{Epoch: UndefinedEpoch, StartOffset: UndefinedOffset}, false
	}
	return c.entries[0], true
}

// LatestEpoch returns the highest epoch in the cache, or UndefinedEpoch when it is empty.
// This is the LastFetchedEpoch a follower (or the mirror fetcher) sends.
func (c *Cache) LatestEpoch() int32 {
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Entries returns a copy of the entries, oldest first (nil when empty).
func (c *Cache) Entries() []Entry {
	if len(c.entries) == 0 {
		return nil
	}
	return append([]Entry(nil), c.entries...)
}

// Len returns the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Clone returns an independent copy of the cache.
func (c *Cache) Clone() *Cache { return &Cache{entries: c.Entries()} }

// Clear removes every entry, as Kafka does when a log is truncated fully.
func (c *Cache) Clear() { c.entries = c.entries[:0] }

// String formats the cache as "[e1@o1 e2@o2 ...]".
func (c *Cache) String() string {
	b := []byte{'['}
	for i, e := range c.entries {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, '@')
		b = strconv.AppendInt(b, e.StartOffset, 10)
	}
	return string(append(b, ']'))
}
