package mirrorsim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/fetcher"
)

// FileLogFactory returns a LogFactory of fetcher.FileLogs, opened with opts in
// root/<seed>/<site>/<topic>-<partition>. A first open (LogSpec.Reopen false) starts
// from an empty directory; Discard, at the end of the run, closes the log and removes
// its directory.
//
// The simulation crashes these logs by closing them and reopening them from disk
// (LogSpec.Reopen). What survives alternates per log between the two crashes a host
// sees (with fetcher.FsyncNever, whose Flush promises nothing, only process crashes):
//   - a power loss (the first, third, ... reopen of a log): every segment file is cut back to what the FileLog
//     promised durable: appended data up to the last Flush (up to the last append with
//     fetcher.FsyncEveryAppend), the whole of a rolled segment (FileLog fsyncs it when it rolls), and
//     everything after a Truncate or TruncateFullyAndStartAt (FileLog fsyncs the cut
//     segment). The metadata files are kept as they are (FileLog writes them atomically
//     and fsyncs them), except the state file after a BumpLeaderEpochUnsynced not synced
//     since (by SyncData, Flush or BumpLeaderEpoch): it gets back its content from before
//     that bump;
//   - a process crash (the second, fourth, ... reopen): every byte written survives, as
//     the page cache keeps it; only the FileLog's in-memory state is rebuilt from the
//     files.
//
// A crash closes the FileLog (Close releases its lock) and then undoes what Close wrote,
// since a crashed process never runs it: the metadata files get their content from
// before the close back, and a power loss cuts the segments afterwards.
//
// Not simulated: torn or reordered writes inside the unflushed tail (a power loss here
// drops the whole tail or nothing), unflushed data that a real disk happens to keep,
// lost directory entries, and I/O errors.
func FileLogFactory(root string, opts fetcher.FileLogOptions) LogFactory {
	f := &fileLogs{root: root, opts: opts, reopens: map[string]int{}, sizes: map[string]map[string]int64{},
		states: map[string][]byte{}}
	return f.open
}

type fileLogs struct {
	root string
	opts fetcher.FileLogOptions

	mu      sync.Mutex
	reopens map[string]int              // directory -> reopens so far
	sizes   map[string]map[string]int64 // directory -> segment file -> durable size
	states  map[string][]byte           // directory -> durable state file, while a bump is not synced
}

func (f *fileLogs) open(spec LogSpec) (fetcher.Log, error) {
	dir := fetcher.PartitionDir(filepath.Join(f.root, strconv.FormatUint(spec.Seed, 10), spec.Site), spec.Topic, spec.Partition)
	f.mu.Lock()
	n := f.reopens[dir]
	if spec.Reopen {
		n++
	} else {
		n = 0
	}
	f.reopens[dir] = n
	f.mu.Unlock()
	if !spec.Reopen {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("mirrorsim: clear %s: %w", dir, err)
		}
	}
	l := &durableFileLog{dir: dir, policy: f.opts.Fsync, durable: map[string]int64{}, f: f}
	if spec.Reopen && n%2 == 1 && f.opts.Fsync != fetcher.FsyncNever {
		if err := l.cutToDurable(spec); err != nil {
			return nil, err
		}
	}
	fl, err := fetcher.OpenFileLog(dir, f.opts)
	if err != nil {
		return nil, err
	}
	l.FileLog = fl
	if err := l.track(true); err != nil {
		_ = fl.Close()
		return nil, err
	}
	return l, nil
}

// durableFileLog is a FileLog that keeps track of how much of each segment file is
// durable, for the power-loss crash of FileLogFactory.
type durableFileLog struct {
	*fetcher.FileLog
	dir    string
	policy fetcher.FsyncPolicy
	f      *fileLogs

	mu      sync.Mutex
	durable map[string]int64 // segment file name -> durable size
}

// cutToDurable cuts every segment file of the directory to its durable size.
func (l *durableFileLog) cutToDurable(spec LogSpec) error {
	l.f.mu.Lock()
	sizes, ok := l.f.sizes[l.dir]
	l.f.mu.Unlock()
	if !ok {
		return fmt.Errorf("mirrorsim: power loss of %s %s-%d: no durable sizes recorded for %s", spec.Site, spec.Topic, spec.Partition, l.dir)
	}
	names, err := segmentFiles(l.dir)
	if err != nil {
		return err
	}
	l.f.mu.Lock()
	state, unsynced := l.f.states[l.dir]
	delete(l.f.states, l.dir)
	l.f.mu.Unlock()
	if unsynced {
		if err := os.WriteFile(filepath.Join(l.dir, fetcher.StateFileName), state, 0o644); err != nil {
			return fmt.Errorf("mirrorsim: power loss: %w", err)
		}
	}
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(l.dir, name))
		if err != nil {
			return fmt.Errorf("mirrorsim: power loss: %w", err)
		}
		if keep := sizes[name]; fi.Size() > keep {
			if err := os.Truncate(filepath.Join(l.dir, name), keep); err != nil {
				return fmt.Errorf("mirrorsim: power loss: %w", err)
			}
		}
	}
	return nil
}

// segmentFiles lists the .log files of dir in offset order.
func segmentFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("mirrorsim: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out) // zero-padded base offsets
	return out, nil
}

// track updates the durable sizes after an operation: all makes every file durable as
// it is; otherwise only segments that are no longer the active one (rolled, fsynced)
// become durable whole, and the active one keeps at most its durable size.
func (l *durableFileLog) track(all bool) error {
	names, err := segmentFiles(l.dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[string]int64, len(names))
	for i, name := range names {
		fi, err := os.Stat(filepath.Join(l.dir, name))
		if err != nil {
			return fmt.Errorf("mirrorsim: stat segment: %w", err)
		}
		size := fi.Size()
		if !all && i == len(names)-1 {
			size = min(size, l.durable[name])
		}
		next[name] = size
	}
	l.durable = next
	l.f.mu.Lock()
	l.f.sizes[l.dir] = next
	l.f.mu.Unlock()
	return nil
}

func (l *durableFileLog) after(err error, all bool) error {
	if terr := l.track(all); terr != nil {
		return errors.Join(err, terr)
	}
	return err
}

// Append implements fetcher.Log.
func (l *durableFileLog) Append(b []byte) error {
	return l.after(l.FileLog.Append(b), l.policy == fetcher.FsyncEveryAppend)
}

// AppendAsLeader implements fetcher.Log.
func (l *durableFileLog) AppendAsLeader(b []byte) (int64, error) {
	off, err := l.FileLog.AppendAsLeader(b)
	return off, l.after(err, l.policy == fetcher.FsyncEveryAppend)
}

// Truncate implements fetcher.Log.
func (l *durableFileLog) Truncate(off int64) error { return l.after(l.FileLog.Truncate(off), true) }

// TruncateFullyAndStartAt implements fetcher.Log.
func (l *durableFileLog) TruncateFullyAndStartAt(off int64) error {
	return l.after(l.FileLog.TruncateFullyAndStartAt(off), true)
}

// BumpLeaderEpoch implements fetcher.Log.
func (l *durableFileLog) BumpLeaderEpoch(min int32) (int32, error) {
	e, err := l.FileLog.BumpLeaderEpoch(min)
	return e, l.stateSynced(l.after(err, false))
}

// BumpLeaderEpochUnsynced implements fetcher.UnsyncedBumper: a power loss before the
// next sync gives the state file back its content from before the first such bump.
func (l *durableFileLog) BumpLeaderEpochUnsynced(min int32) (int32, error) {
	l.f.mu.Lock()
	_, pending := l.f.states[l.dir]
	l.f.mu.Unlock()
	if !pending {
		state, err := os.ReadFile(filepath.Join(l.dir, fetcher.StateFileName))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("mirrorsim: read the state file: %w", err)
		}
		if err == nil { // without a file the first write is atomic and synced
			l.f.mu.Lock()
			l.f.states[l.dir] = state
			l.f.mu.Unlock()
		}
	}
	e, err := l.FileLog.BumpLeaderEpochUnsynced(min)
	return e, l.after(err, false)
}

// stateSynced records, after an operation that made the state file durable (err
// nil), that a power loss keeps it as it is.
func (l *durableFileLog) stateSynced(err error) error {
	if err == nil {
		l.f.mu.Lock()
		delete(l.f.states, l.dir)
		l.f.mu.Unlock()
	}
	return err
}

// Flush implements fetcher.Log.
func (l *durableFileLog) Flush() error {
	return l.stateSynced(l.after(l.FileLog.Flush(), l.policy != fetcher.FsyncNever))
}

// SyncData implements fetcher.DataSyncer.
func (l *durableFileLog) SyncData() error {
	return l.stateSynced(l.after(l.FileLog.SyncData(), l.policy != fetcher.FsyncNever))
}

// Close closes the log as a crash leaves it: the files other than segments and indexes
// (the state file, the leader-epoch checkpoint) get back the content they had before
// the close, and files the close created are removed.
func (l *durableFileLog) Close() error {
	before, err := metaFiles(l.dir)
	if err != nil {
		return err
	}
	cerr := l.FileLog.Close()
	after, err := metaFiles(l.dir)
	if err != nil {
		return errors.Join(cerr, err)
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return errors.Join(cerr, fmt.Errorf("mirrorsim: crash: %w", err))
			}
		}
	}
	for name, data := range before {
		if !bytes.Equal(after[name], data) {
			if err := os.WriteFile(filepath.Join(l.dir, name), data, 0o644); err != nil {
				return errors.Join(cerr, fmt.Errorf("mirrorsim: crash: %w", err))
			}
		}
	}
	return cerr
}

// metaFiles reads the files of dir other than segments, indexes and the lock file.
func metaFiles(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("mirrorsim: list %s: %w", dir, err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || name == fetcher.LockFileName || strings.HasSuffix(name, ".log") || strings.HasSuffix(name, ".index") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("mirrorsim: read %s: %w", name, err)
		}
		out[name] = data
	}
	return out, nil
}

// Discard closes the log and removes its directory (the end of a run).
func (l *durableFileLog) Discard() error {
	err := l.FileLog.Close()
	l.f.mu.Lock()
	delete(l.f.sizes, l.dir)
	delete(l.f.reopens, l.dir)
	delete(l.f.states, l.dir)
	l.f.mu.Unlock()
	return errors.Join(err, os.RemoveAll(l.dir))
}
