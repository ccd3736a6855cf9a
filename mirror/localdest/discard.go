package localdest

import (
	"github.com/kmirror/kmirror/fetcher"
)

// PartitionDiscard is data the open of one partition's FileLog removed
// (fetcher.Discard: a torn tail past the flush point, or a cut made by
// FileLogOptions.RepairCorruption), with the partition it belongs to.
type PartitionDiscard struct {
	Topic     string
	Partition int32
	fetcher.Discard
}

// discardLog is what a log that can report the removals of its open
// implements (*fetcher.FileLog).
type discardLog interface {
	Discarded() []fetcher.Discard
}

// discardHandler is one OnDiscard registration (a pointer, so that stop
// finds its own one among equal funcs).
type discardHandler struct{ fn func(PartitionDiscard) }

// Discards returns what the opens of this destination's logs removed since
// OpenFile, in the order the opens ended. A memory destination removes
// nothing.
func (d *LocalDestination) Discards() []PartitionDiscard {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]PartitionDiscard(nil), d.discards...)
}

// OnDiscard calls fn for every removal the opens of the logs make: those
// made before the call at once, in order, and each later one when the open
// that made it ends (from the goroutine that opened the log; opens of
// different partitions may call fn concurrently). A log is opened on its
// first use (Log), so a removal is reported when its partition is first
// used, not at OpenFile. stop unregisters fn; it may be called more than
// once.
func (d *LocalDestination) OnDiscard(fn func(PartitionDiscard)) (stop func()) {
	h := &discardHandler{fn: fn}
	d.mu.Lock()
	past := append([]PartitionDiscard(nil), d.discards...)
	d.discardFns = append(d.discardFns, h)
	d.mu.Unlock()
	for _, pd := range past {
		fn(pd)
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for i, o := range d.discardFns {
			if o == h {
				d.discardFns = append(d.discardFns[:i:i], d.discardFns[i+1:]...)
				return
			}
		}
	}
}

// recordDiscardsLocked keeps what the open of topic-partition's log l
// removed and returns the calls to make, outside d.mu, to report it.
func (d *LocalDestination) recordDiscardsLocked(topic string, partition int32, l fetcher.Log) func() {
	dl, ok := l.(discardLog)
	if !ok {
		return nil
	}
	cut := dl.Discarded()
	if len(cut) == 0 {
		return nil
	}
	pds := make([]PartitionDiscard, len(cut))
	for i, c := range cut {
		pds[i] = PartitionDiscard{Topic: topic, Partition: partition, Discard: c}
	}
	d.discards = append(d.discards, pds...)
	fns := append([]*discardHandler(nil), d.discardFns...)
	return func() {
		for _, h := range fns {
			for _, pd := range pds {
				h.fn(pd)
			}
		}
	}
}
