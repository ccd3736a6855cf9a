package fetcher

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrTooManyOpenFiles is matched (errors.Is) by the error of a FileLog
// operation that could not open one of its files because the process (EMFILE)
// or the system (ENFILE) is out of file descriptors even after the FileCache
// closed every idle file. The error also matches the errno, so that a
// partition's host reports it as a storage failure of that partition; the
// log itself stays usable and the operation can be retried.
var ErrTooManyOpenFiles = errors.New("fetcher: too many open files")

// FileCache bounds the file descriptors that FileLogs hold: every segment's
// .log and .index file is opened through it on demand and kept open, least
// recently used first out, while at most Max files are open. A file in use
// (a read, a write or an fsync under way) is never closed: the bound is
// exceeded for as long as more files than Max are in use at once, and the
// idle ones are closed as soon as they are released. A FileLog with no
// partition being read or written therefore holds no descriptor, whatever
// the number of partitions.
//
// A file closed with appended data not yet fsynced keeps its pages in the
// page cache; the next fsync (Flush, a roll, Close) opens it again, and a
// write-back error the kernel recorded for the file meanwhile is reported to
// that fsync, as to any descriptor opened after the error and before anyone
// saw it. An error returned by the close itself is kept and returned by the
// file's next fsync.
//
// The cache also excludes a second FileLog on the same directory in this
// process (ErrLocked) without holding a descriptor.
//
// Safe for concurrent use. Many FileLogs share one cache: by default the
// process-wide DefaultFileCache.
type FileCache struct {
	mu   sync.Mutex
	max  int
	open int        // descriptors open (idle and in use)
	idle *list.List // of *cachedFile open with no user, most recently used first
	dirs map[string]bool
	st   FileCacheStats

	wbMu      sync.Mutex
	wbIdle    sync.Cond // on wbMu, broadcast when the writeback goroutine exits
	wbQueue   []wbRange
	wbRunning bool
	wbRuns    int64 // writeback goroutines started
}

// FileCacheStats counts what a FileCache did.
type FileCacheStats struct {
	// Open is the number of descriptors open now, Max the bound.
	Open, Max int
	// Hits counts uses of a file already open, Opens the files opened
	// (misses), Evictions the idle files closed to stay within Max.
	Hits, Opens, Evictions int64
}

// NewFileCache returns a cache that keeps at most maxOpen files open (see
// FileCache); maxOpen <= 0 means DefaultMaxOpenFiles().
func NewFileCache(maxOpen int) *FileCache {
	if maxOpen <= 0 {
		maxOpen = DefaultMaxOpenFiles()
	}
	c := &FileCache{max: maxOpen, idle: list.New(), dirs: map[string]bool{}}
	c.wbIdle.L = &c.wbMu
	return c
}

var defaultFileCache = sync.OnceValue(func() *FileCache { return NewFileCache(0) })

// DefaultFileCache is the process-wide FileCache the FileLogs opened without
// FileLogOptions.Files share, made at its first use with
// DefaultMaxOpenFiles(). File descriptors are a resource of the process, so
// one bound for all its logs is what keeps it within RLIMIT_NOFILE.
func DefaultFileCache() *FileCache { return defaultFileCache() }

// DefaultMaxOpenFiles is the bound of a FileCache made without one: half of
// the process's soft RLIMIT_NOFILE (the other half is left to sockets, the
// logs' metadata files written atomically and everything else), at least 16
// and at most 65536; 512 when the limit cannot be read.
func DefaultMaxOpenFiles() int {
	n, ok := fileLimit()
	if !ok {
		return 512
	}
	return int(min(max(n/2, 16), 1<<16))
}

// Max returns the bound.
func (c *FileCache) Max() int { return c.max }

// Stats returns the counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Open, s.Max = c.open, c.max
	return s
}

// claimDir registers dir as open by a FileLog; false when one already has it.
func (c *FileCache) claimDir(dir string) (string, bool) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	dir = filepath.Clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs[dir] {
		return dir, false
	}
	c.dirs[dir] = true
	return dir, true
}

func (c *FileCache) releaseDir(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dirs, dir)
}

// cachedFile is one file of a FileLog as the cache knows it: open or not.
// Its methods open it (through the cache) for the time of the call.
type cachedFile struct {
	c      *FileCache
	path   string
	openMu sync.Mutex // serializes the opens of this file

	// guarded by c.mu
	f      *os.File
	refs   int
	elem   *list.Element // in c.idle while open and unused
	closed bool
	create bool // opens create the file (lazyFile)

	// syncMu guards dirty and err, apart from the cache's mutex: a failover's
	// thousands of syncs end together when their syncfs round does, and each
	// marked its file synced under c.mu, one after the other (a lock convoy).
	syncMu sync.Mutex
	dirty  bool  // written since the last successful fsync
	err    error // a close error while dirty, for the next Sync
}

// openFile opens path with flag (which may create it) and returns its
// cached handle; later reopens use O_RDWR.
func (c *FileCache) openFile(path string, flag int) (*cachedFile, error) {
	h := &cachedFile{c: c, path: path}
	if _, err := h.pin(flag); err != nil {
		return nil, err
	}
	h.unpin()
	return h, nil
}

// pin returns h's open file, opening it with flag when it is not, and
// keeps it open until unpin.
func (h *cachedFile) pin(flag int) (*os.File, error) {
	c := h.c
	c.mu.Lock()
	if f, ok := h.pinLocked(); ok || h.closed {
		c.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("fetcher: %s: %w", h.path, os.ErrClosed)
		}
		return f, nil
	}
	c.mu.Unlock()

	h.openMu.Lock()
	defer h.openMu.Unlock()
	c.mu.Lock()
	if f, ok := h.pinLocked(); ok || h.closed { // opened meanwhile
		c.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("fetcher: %s: %w", h.path, os.ErrClosed)
		}
		return f, nil
	}
	c.open++ // reserved for the file opened below
	victims := c.evictLocked(c.max)
	c.mu.Unlock()
	closeVictims(victims)

	f, err := os.OpenFile(h.path, flag, 0o644)
	if isFileLimit(err) {
		// Out of descriptors with files of ours idle: close them all and
		// try once more.
		c.mu.Lock()
		victims = c.evictLocked(0)
		c.mu.Unlock()
		closeVictims(victims)
		f, err = os.OpenFile(h.path, flag, 0o644)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.open--
		if isFileLimit(err) {
			return nil, fmt.Errorf("%w: open %s with %d of at most %d log files open: %w", ErrTooManyOpenFiles, h.path, c.open, c.max, err)
		}
		return nil, err
	}
	c.st.Opens++
	h.f, h.refs = f, 1
	return f, nil
}

// pinLocked pins h when it is open.
func (h *cachedFile) pinLocked() (*os.File, bool) {
	if h.f == nil || h.closed {
		return nil, false
	}
	if h.elem != nil {
		h.c.idle.Remove(h.elem)
		h.elem = nil
	}
	h.refs++
	h.c.st.Hits++
	return h.f, true
}

// evictLocked takes idle files out of the cache, least recently used first,
// until at most keep descriptors are open (or none is idle), and returns
// them to be closed once c.mu is released.
func (c *FileCache) evictLocked(keep int) []victim {
	var out []victim
	for c.open > keep {
		e := c.idle.Back()
		if e == nil {
			break
		}
		h := c.idle.Remove(e).(*cachedFile)
		out = append(out, victim{h, h.f})
		h.elem, h.f = nil, nil
		c.open--
		c.st.Evictions++
	}
	return out
}

// victim is an evicted file to close.
type victim struct {
	h *cachedFile
	f *os.File
}

// closeVictims closes evicted files; c.mu is not held. The close error of a
// file with unsynced writes is kept for its next Sync.
func closeVictims(victims []victim) {
	for _, v := range victims {
		if err := v.f.Close(); err != nil {
			v.h.syncMu.Lock()
			if v.h.dirty && v.h.err == nil {
				v.h.err = err
			}
			v.h.syncMu.Unlock()
		}
	}
}

// unpin releases a pin: the last one puts h in the idle list, or closes it
// when h was closed meanwhile or the cache is over its bound.
func (h *cachedFile) unpin() {
	c := h.c
	c.mu.Lock()
	h.refs--
	if h.refs > 0 {
		c.mu.Unlock()
		return
	}
	if h.closed {
		f := h.f
		h.f = nil
		c.open--
		c.mu.Unlock()
		_ = f.Close()
		return
	}
	h.elem = c.idle.PushFront(h)
	victims := c.evictLocked(c.max)
	c.mu.Unlock()
	closeVictims(victims)
}

// close closes h for good (its segment is closed or removed); an open file
// is closed now, or by the last unpin when it is in use.
func (h *cachedFile) close() error {
	if h == nil {
		return nil
	}
	c := h.c
	c.mu.Lock()
	if h.closed || h.f == nil || h.refs > 0 {
		h.closed = true
		c.mu.Unlock()
		return nil
	}
	h.closed = true
	c.idle.Remove(h.elem)
	f := h.f
	h.elem, h.f = nil, nil
	c.open--
	c.mu.Unlock()
	return f.Close()
}

func isFileLimit(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fileLimitError makes an EMFILE or ENFILE not yet typed match
// ErrTooManyOpenFiles; other errors are returned as they are.
func fileLimitError(err error) error {
	if isFileLimit(err) && !errors.Is(err, ErrTooManyOpenFiles) {
		return fmt.Errorf("%w: %w", ErrTooManyOpenFiles, err)
	}
	return err
}

// lazyFile returns the cached handle of path without opening it: its first
// use opens it, creating it when missing (a new segment's index, which only
// its first entry needs).
func (c *FileCache) lazyFile(path string) *cachedFile {
	return &cachedFile{c: c, path: path, create: true}
}

// with runs fn on h's file, opened (O_RDWR, with O_CREATE for a lazyFile)
// for the time of the call.
func (h *cachedFile) with(fn func(f *os.File) error) error {
	flag := os.O_RDWR
	if h.create {
		flag |= os.O_CREATE
	}
	f, err := h.pin(flag)
	if err != nil {
		return err
	}
	defer h.unpin()
	return fn(f)
}

// ReadAt is os.File.ReadAt.
func (h *cachedFile) ReadAt(p []byte, off int64) (n int, err error) {
	err = h.with(func(f *os.File) error {
		n, err = f.ReadAt(p, off)
		return err
	})
	return n, err
}

// WriteAt is os.File.WriteAt; it marks the file dirty.
func (h *cachedFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = h.with(func(f *os.File) error {
		h.setDirty()
		n, err = f.WriteAt(p, off)
		return err
	})
	return n, err
}

// Truncate is os.File.Truncate; it marks the file dirty.
func (h *cachedFile) Truncate(size int64) error {
	return h.with(func(f *os.File) error {
		h.setDirty()
		return f.Truncate(size)
	})
}

// Stat is os.File.Stat.
func (h *cachedFile) Stat() (fi os.FileInfo, err error) {
	err = h.with(func(f *os.File) error {
		fi, err = f.Stat()
		return err
	})
	return fi, err
}

// Sync fsyncs the file. It returns the error of a close of the file while
// it held unsynced writes (see FileCache) when the fsync itself succeeds.
func (h *cachedFile) Sync() error {
	return h.with(func(f *os.File) error {
		if err := f.Sync(); err != nil {
			return err
		}
		return h.synced()
	})
}

// synced records that everything written to h so far is durable (an fsync
// of it, or a syncfs round of its filesystem, succeeded since the writes),
// and returns the error of a close of the file while it held unsynced
// writes.
func (h *cachedFile) synced() error {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	err := h.err
	h.err, h.dirty = nil, false
	if err != nil {
		return fmt.Errorf("fetcher: close of %s before its fsync: %w", h.path, err)
	}
	return nil
}

// syncIfDirty is Sync when the file was written since its last fsync.
func (h *cachedFile) syncIfDirty() error {
	h.syncMu.Lock()
	dirty := h.dirty || h.err != nil
	h.syncMu.Unlock()
	if !dirty {
		return nil
	}
	return h.Sync()
}

func (h *cachedFile) setDirty() {
	h.syncMu.Lock()
	h.dirty = true
	h.syncMu.Unlock()
}

// readAll returns the whole file.
func (h *cachedFile) readAll() (data []byte, err error) {
	err = h.with(func(f *os.File) error {
		data, err = io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
		return err
	})
	return data, err
}

// ifOpen runs fn on h's file only when it is open now (a hint, such as a
// writeback, does not reopen a file).
func (h *cachedFile) ifOpen(fn func(f *os.File)) {
	h.c.mu.Lock()
	f, ok := h.pinLocked()
	h.c.mu.Unlock()
	if !ok {
		return
	}
	defer h.unpin()
	fn(f)
}

// wbRange is a writeback hint: start writing [off, off+n) of f.
type wbRange struct {
	f      *cachedFile
	off, n int64
}

// maxWritebackQueue bounds the queued writeback hints of a cache; more are
// dropped (the next fsync writes those pages anyway).
const maxWritebackQueue = 64

// hint queues a writeback hint, run by a goroutine of the cache that exists
// only while hints are queued: sync_file_range does the file system's block
// allocation and queues the I/O in the calling thread, which would
// otherwise be the append path.
func (c *FileCache) hint(r wbRange) {
	c.wbMu.Lock()
	defer c.wbMu.Unlock()
	if len(c.wbQueue) >= maxWritebackQueue {
		return
	}
	c.wbQueue = append(c.wbQueue, r)
	if !c.wbRunning {
		c.wbRunning = true
		c.wbRuns++
		go c.runWriteback()
	}
}

func (c *FileCache) runWriteback() {
	for {
		c.wbMu.Lock()
		if len(c.wbQueue) == 0 {
			c.wbRunning = false
			c.wbQueue = nil
			c.wbIdle.Broadcast()
			c.wbMu.Unlock()
			return
		}
		r := c.wbQueue[0]
		c.wbQueue = c.wbQueue[1:]
		c.wbMu.Unlock()
		r.f.ifOpen(func(f *os.File) { startWriteback(f, r.off, r.n) })
	}
}

// fileLimit returns the soft RLIMIT_NOFILE.
func fileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 0, false
	}
	return lim.Cur, true
}

// waitWritebackIdle waits until no writeback hint is queued or running, and
// returns how many writeback goroutines were started so far.
func (c *FileCache) waitWritebackIdle() int64 {
	c.wbMu.Lock()
	defer c.wbMu.Unlock()
	for c.wbRunning {
		c.wbIdle.Wait()
	}
	return c.wbRuns
}
