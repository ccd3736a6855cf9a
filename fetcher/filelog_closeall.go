package fetcher

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/kmirror/kmirror/internal/atomicfile"
)

// closeAllWorkers is how many logs CloseFileLogs works on at once.
const closeAllWorkers = 32

// CloseFileLogs closes logs as each one's Close would, with the same durability
// (every log's data fsynced, then its recovery point replaced atomically), but with
// the disk's work shared: each log writes its new recovery point to a temporary file
// unsynced, one syncfs of the file system writes every log's dirty data and those
// files in one journal commit, each log's files are then fsynced (which finds
// little left to do, and reports the write errors that concern them) and its
// recovery point renamed into place, and a second syncfs makes the renames durable
// before the directories are fsynced. A site's shutdown with thousands of
// partitions written since their last Flush pays two commits, not three fsyncs a
// partition one after another. It returns one error per log (nil when it closed
// cleanly), as Close would have returned it; a log that fails keeps its previous
// recovery point, which is still valid.
func CloseFileLogs(logs []*FileLog) []error {
	gs := make([]groupClose, len(logs))
	for i, l := range logs {
		gs[i].l = l
	}
	closeInParallel(gs, (*groupClose).prepare)
	if len(logs) > 0 {
		syncFS(logs[0].dir)
	}
	closeInParallel(gs, (*groupClose).syncAndRename)
	if len(logs) > 0 {
		syncFS(logs[0].dir)
	}
	closeInParallel(gs, (*groupClose).finish)
	errs := make([]error, len(gs))
	for i := range gs {
		errs[i] = gs[i].err
	}
	return errs
}

// groupClose is one log's part of CloseFileLogs. The log's mutex is held from
// prepare to finish.
type groupClose struct {
	l       *FileLog
	locked  bool
	done    bool   // closed (or failed) already: nothing more to do
	rp      []byte // the new recovery point, nil when unchanged
	tmp     string // its temporary file
	renamed bool
	err     error
}

func closeInParallel(gs []groupClose, fn func(*groupClose)) {
	var wg sync.WaitGroup
	next := make(chan *groupClose)
	for range min(closeAllWorkers, len(gs)) {
		wg.Go(func() {
			for g := range next {
				fn(g)
			}
		})
	}
	for i := range gs {
		next <- &gs[i]
	}
	close(next)
	wg.Wait()
}

func (g *groupClose) prepare() {
	l := g.l
	l.mu.Lock()
	g.locked = true
	if l.closed {
		g.err, g.done = ErrClosed, true
		return
	}
	l.closed = true
	if l.failed != nil {
		l.closeFiles()
		g.err, g.done = l.failed, true
		return
	}
	rp := l.recoveryPointLocked()
	if l.opts.Fsync != FsyncNever && l.unflushed > 0 {
		a := l.active()
		rp.active = segMark{a.base, a.size, max(l.st.logEnd, a.base)} // once synced below
	}
	data := encodeRecoveryPoint(rp)
	if string(data) == string(l.rpData) {
		return
	}
	f, err := os.CreateTemp(l.dir, RecoveryPointFileName+".*"+atomicfile.TempSuffix)
	if err == nil {
		_, err = f.Write(data)
		err = errors.Join(err, f.Close())
		g.tmp = f.Name()
	}
	if err != nil {
		g.err = fmt.Errorf("fetcher: write %s: %w", RecoveryPointFileName, fileLimitError(err))
		return
	}
	g.rp = data
}

func (g *groupClose) syncAndRename() {
	l := g.l
	if g.done || g.err != nil {
		return
	}
	if l.opts.Fsync != FsyncNever && l.unflushed > 0 {
		if g.err = l.syncDataLocked(); g.err != nil {
			return
		}
	}
	if g.err = l.active().idx.syncIfDirty(); g.err != nil {
		return
	}
	if g.rp == nil {
		return
	}
	if err := syncPath(g.tmp); err != nil {
		g.err = fmt.Errorf("fetcher: write %s: %w", RecoveryPointFileName, fileLimitError(err))
		return
	}
	if err := os.Rename(g.tmp, l.path(RecoveryPointFileName)); err != nil {
		g.err = fmt.Errorf("fetcher: write %s: %w", RecoveryPointFileName, err)
		return
	}
	g.renamed = true
	l.rpData = nil // unknown until the directory is synced
}

func (g *groupClose) finish() {
	l := g.l
	defer func() {
		if g.locked {
			l.mu.Unlock()
		}
	}()
	if g.done {
		return
	}
	if g.tmp != "" && !g.renamed {
		_ = os.Remove(g.tmp)
	}
	if g.err == nil && g.renamed {
		if err := atomicfile.SyncDir(l.dir); err != nil {
			g.err = fmt.Errorf("fetcher: write %s: %w", RecoveryPointFileName, fileLimitError(err))
		} else {
			l.rpData = g.rp
		}
	}
	if g.err == nil {
		g.err = l.writeCheckpointLocked()
	}
	l.closeFiles()
}

// syncPath fsyncs the file at path.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
