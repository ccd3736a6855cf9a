package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/internal/atomicfile"
	"github.com/kmirror/kmirror/internal/statelog"
	"github.com/kmirror/kmirror/records"
)

// Errors of FileStore (the same values are exported by package mirror for its
// FileControllerLog).
var (
	// ErrCorruptStateFile is matched by the error of a state file that cannot be read
	// without losing acknowledged records (a torn tail of an unacknowledged write is
	// cut, never reported).
	ErrCorruptStateFile = statelog.ErrCorrupt
	// ErrStateFileVersion is matched by the error of a state file written by a newer
	// kmirror.
	ErrStateFileVersion = statelog.ErrNewerVersion
	// ErrStoreLocked is returned by NewFileStore when another FileStore, in this process
	// or another, has the directory.
	ErrStoreLocked = errors.New("coordinator: file store directory locked")
)

// File names of a FileStore directory.
const (
	// FileStoreLockFile is the store's lock file.
	FileStoreLockFile = ".lock"
	// FileStoreMetaFile records the format version and the partition count.
	FileStoreMetaFile = "kmirror-file-store"
	fileStoreHead     = "kmirror-file-store"
	fileStoreVersion  = 1
)

// FileStoreOptions configures a FileStore.
type FileStoreOptions struct {
	// NumPartitions is the number of __mirror_state partitions (default
	// DefaultNumPartitions); it must equal the runtime's Config.NumPartitions. It is
	// recorded on creation, and a store created with another count is refused
	// (ErrTopicMismatch): the count decides which partition holds a key.
	NumPartitions int32
	// CompactMinRecords is the partition log size, in records, below which it is never
	// compacted (default statelog's 10,000).
	CompactMinRecords int64
}

// FileStore is a Store on local files: one compacted log per __mirror_state partition in
// dir/__mirror_state-<p>/, in Kafka's segment format (v2 batches whose keys and values
// are exactly the records KafkaStore writes, so kafka-dump-log reads them). One Append
// is one batch, fsynced before Append returns: an acknowledged append survives kill -9
// and power loss, and a failed one (a full disk) leaves nothing and loses nothing
// acknowledged. The coordinator runtime's batched appends are the group commit.
//
// A partition's log is opened and recovered at its first Load: a torn tail (the
// unacknowledged write a crash cut) is cut; other corruption fails the Load with an
// error matching ErrCorruptStateFile, a newer format one matching ErrStateFileVersion.
// Logs are compacted by key as they grow (the latest value of each key is kept with
// its offset; tombstones are dropped).
//
// Ownership: the directory is locked against every other FileStore (ErrStoreLocked),
// so owner epochs only need fencing inside the process: a Load with an epoch below the
// highest loaded for the partition fails with a *FencedError, and so do Appends of an
// owner a newer Load replaced. Safe for concurrent use.
type FileStore struct {
	dir  string
	opts FileStoreOptions
	lock *os.File

	mu     sync.Mutex
	logs   map[int32]*statelog.Log
	owner  map[int32]int32
	loaded map[int32]bool
	closed bool
}

// NewFileStore opens (creating when missing) the store in dir and locks it.
func NewFileStore(dir string, opts FileStoreOptions) (*FileStore, error) {
	if opts.NumPartitions == 0 {
		opts.NumPartitions = DefaultNumPartitions
	}
	if opts.NumPartitions < 1 {
		return nil, fmt.Errorf("%w: NumPartitions %d < 1", ErrInvalidConfig, opts.NumPartitions)
	}
	lock, err := statelog.LockDir(dir, FileStoreLockFile, ErrStoreLocked)
	if err != nil {
		return nil, err
	}
	if err := checkStoreMeta(dir, opts.NumPartitions); err != nil {
		lock.Close()
		return nil, err
	}
	return &FileStore{dir: dir, opts: opts, lock: lock, logs: make(map[int32]*statelog.Log),
		owner: make(map[int32]int32), loaded: make(map[int32]bool)}, nil
}

// checkStoreMeta writes the meta file of a new store, or checks the existing one.
func checkStoreMeta(dir string, partitions int32) error {
	path := filepath.Join(dir, FileStoreMetaFile)
	want := fmt.Sprintf("%s %d\npartitions %d\n", fileStoreHead, fileStoreVersion, partitions)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.WriteFile(dir, FileStoreMetaFile, []byte(want), 0o644); err != nil {
			return fmt.Errorf("coordinator: create %s: %w", path, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("coordinator: read %s: %w", path, err)
	}
	var v, n int
	if _, err := fmt.Sscanf(string(data), fileStoreHead+" %d\npartitions %d\n", &v, &n); err != nil {
		return &statelog.CorruptError{Path: path, Position: -1, Reason: strings.TrimSpace(err.Error())}
	}
	if v > fileStoreVersion {
		return &statelog.VersionError{Path: path, Found: v, Supported: fileStoreVersion}
	}
	if int32(n) != partitions {
		return fmt.Errorf("%w: file store %s has %d partitions, configured %d", ErrTopicMismatch, dir, n, partitions)
	}
	return nil
}

// Dir is the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// PartitionDir is the directory of partition p's log.
func (s *FileStore) PartitionDir(p int32) string {
	return filepath.Join(s.dir, DefaultStateTopic+"-"+strconv.Itoa(int(p)))
}

// Load implements Store: it claims partition for ownerEpoch (fencing lower epochs),
// opens and recovers its log on first use and replays it into fn.
func (s *FileStore) Load(ctx context.Context, partition, ownerEpoch int32, fn func(records.StateRecord) error) error {
	if partition < 0 || partition >= s.opts.NumPartitions {
		return fmt.Errorf("coordinator: partition %d out of range [0,%d)", partition, s.opts.NumPartitions)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if cur, ok := s.owner[partition]; ok && ownerEpoch < cur {
		s.mu.Unlock()
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: cur}
	}
	s.owner[partition], s.loaded[partition] = ownerEpoch, false
	l := s.logs[partition]
	s.mu.Unlock()
	if l == nil {
		// Opened outside the lock: the recovery scan of one partition does not hold up
		// the others. Calls for one partition are not concurrent (Store contract).
		opened, err := statelog.Open(s.PartitionDir(partition), statelog.Options{CompactMinRecords: s.opts.CompactMinRecords})
		if err != nil {
			return fmt.Errorf("coordinator: open state partition %d: %w", partition, err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = opened.Close()
			return ErrClosed
		}
		s.logs[partition] = opened
		s.mu.Unlock()
		l = opened
	}
	err := l.Replay(ctx, func(off int64, key, value []byte) error {
		r, err := records.DecodeStateRecord(key, value)
		if err != nil {
			return &statelog.CorruptError{Path: l.Dir(), Position: -1, Reason: fmt.Sprintf("record at offset %d: %v", off, err)}
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("coordinator: replay of partition %d offset %d: %w", partition, off, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[partition] == ownerEpoch && !s.closed {
		s.loaded[partition] = true
	}
	return nil
}

// Append implements Store: recs become one batch, fsynced before Append returns.
func (s *FileStore) Append(ctx context.Context, partition, ownerEpoch int32, recs []records.StateRecord) error {
	kvs := make([]statelog.KV, len(recs))
	for i, r := range recs {
		k, v := records.EncodeStateRecord(r)
		if k == nil {
			return fmt.Errorf("coordinator: append to partition %d: record %d: %w", partition, i, r.Validate())
		}
		kvs[i] = statelog.KV{Key: k, Value: v}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	cur, ok := s.owner[partition]
	l := s.logs[partition]
	loaded := s.loaded[partition]
	s.mu.Unlock()
	switch {
	case ok && ownerEpoch < cur:
		return &FencedError{Partition: partition, Epoch: ownerEpoch, Current: cur}
	case !ok || ownerEpoch != cur || !loaded || l == nil:
		return fmt.Errorf("%w: partition %d epoch %d", ErrNotOwner, partition, ownerEpoch)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(kvs) == 0 {
		return nil
	}
	if _, err := l.Append(kvs); err != nil {
		return fmt.Errorf("coordinator: append to state partition %d: %w", partition, err)
	}
	return nil
}

// Unload implements Store: later Appends of ownerEpoch fail with ErrNotOwner until a new
// Load. The partition's log stays open.
func (s *FileStore) Unload(partition, ownerEpoch int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[partition] == ownerEpoch {
		s.loaded[partition] = false
	}
}

// Close closes every partition log (recording their clean length) and releases the
// directory lock. Later calls fail with ErrClosed; a second Close returns nil.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, l := range s.logs {
		errs = append(errs, l.Close())
	}
	errs = append(errs, s.lock.Close())
	return errors.Join(errs...)
}
