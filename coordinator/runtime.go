package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/records"
)

// partition status values.
const (
	statusLoading int32 = iota
	statusActive
	statusFailed // load failed: COORDINATOR_NOT_AVAILABLE
	statusFenced // a newer owner took over: NOT_COORDINATOR
)

// Runtime runs the shards of the __mirror_state partitions this process owns.
//
// The host grants and revokes ownership per partition with an epoch (Load,
// Unload); a call with an epoch older than the current one is ignored. Each
// owned partition has one owner goroutine that loads the shard by replaying
// the Store, then serves requests in arrival order: a command runs on the
// working shard, its records are replayed into the working shard at once
// (so later commands see them) and queued into the partition's batch. The
// batch is appended when AppendLinger has passed since its first record, or
// when it holds MaxBatchRecords records. Responses are sent only after the
// append is durable; a response that carries no record but was computed while
// records were pending waits for them too.
//
// Rollback: the goroutine keeps two shards, the committed one (replayed only
// after a successful append) and the working one. A failed append replaces
// the working shard by a clone of the committed one and fails exactly the
// requests waiting on that batch: with COORDINATOR_NOT_AVAILABLE (retriable)
// for any store error, or NOT_COORDINATOR when the store reports ErrFenced —
// then the partition is given up until the host loads it again with a newer
// epoch.
//
// Requests for a partition being loaded get COORDINATOR_LOAD_IN_PROGRESS;
// for a partition not owned, NOT_COORDINATOR; for a partition whose load
// failed, COORDINATOR_NOT_AVAILABLE. The codes are per partition in the
// responses; a Go error is returned only for a cancelled context or a closed
// runtime.
//
// Runtime is safe for concurrent use. Close stops every owner goroutine and
// waits for them; it does not close the Store.
type Runtime struct {
	cfg   Config
	store Store

	mu     sync.Mutex           // guards the fields below
	parts  map[int32]*partition // current owners
	last   map[int32]*partition // newest goroutine per partition, also after Unload
	epochs map[int32]int32      // highest epoch granted or revoked per partition
	closed bool

	wg sync.WaitGroup
}

// New returns a Runtime over store. Zero Config fields take their defaults.
func New(cfg Config, store Store) (*Runtime, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	return &Runtime{cfg: cfg, store: store, parts: make(map[int32]*partition),
		last: make(map[int32]*partition), epochs: make(map[int32]int32)}, nil
}

// Config returns the runtime's configuration with defaults applied.
func (r *Runtime) Config() Config { return r.cfg }

// PartitionFor returns the __mirror_state partition that holds the key of
// (mirror, topicID, partition).
func (r *Runtime) PartitionFor(mirror string, topicID records.UUID, partition int32) int32 {
	return records.PartitionFor(records.StateKey(mirror, topicID, partition), r.cfg.NumPartitions)
}

type partition struct {
	id, epoch int32
	status    atomic.Int32
	loadErr   error // set before loaded is closed
	ctx       context.Context
	stop      context.CancelFunc
	reqs      chan *op
	loaded    chan struct{} // closed when the load finished (either way)
	done      chan struct{} // closed when the goroutine has exited

	// mu guards committed, the shard of what the store holds: the owner
	// goroutine replays each appended batch into it under the write lock,
	// and reads that write nothing are answered from it under the read lock,
	// without queueing behind the appends in flight.
	mu        sync.RWMutex
	committed *Shard // set before status turns active
}

// readCommitted answers req from the committed shard, as Kafka's coordinator
// runtime answers its read operations from the last committed offset. It
// reports false when the read would raise a stored leader epoch (a write, done
// by the owner goroutine) or the shard is not loaded.
func (p *partition) readCommitted(req ReadRequest) (opResult, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.committed == nil {
		return opResult{}, false
	}
	c := p.committed.ReadMirrorStates(req)
	if len(c.Records) > 0 {
		return opResult{}, false
	}
	return opResult{read: c.Response}, true
}

type opKind uint8

const (
	opRead opKind = iota
	opWrite
	opDelete
)

type op struct {
	kind   opKind
	read   ReadRequest
	write  WriteRequest
	mirror string
	resp   chan opResult // buffered, capacity 1
	owner  *partition    // set by submit
}

type opResult struct {
	read  ReadResponse
	write WriteResponse
	del   DeleteResponse
	code  admin.Code
	err   error
}

// Load grants ownership of partition p with the given epoch and starts
// loading it in the background (see WaitLoaded). It is ignored when the epoch
// is older than the newest epoch granted or revoked for p, or equal to it —
// except to retry a load that failed. A previous owner goroutine with an
// older epoch is stopped first (its waiting requests get NOT_COORDINATOR) and
// the new one waits for it to exit before it touches the Store. Load returns
// an error only for a partition out of range or a closed runtime.
func (r *Runtime) Load(p, epoch int32) error {
	if p < 0 || p >= r.cfg.NumPartitions {
		return fmt.Errorf("coordinator: partition %d out of range [0,%d)", p, r.cfg.NumPartitions)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if hi, ok := r.epochs[p]; ok && epoch < hi {
		return nil
	}
	if cur := r.parts[p]; cur != nil {
		if epoch == cur.epoch && cur.status.Load() != statusFailed {
			return nil
		}
		cur.stop()
	} else if hi, ok := r.epochs[p]; ok && epoch == hi {
		return nil // unloaded with this epoch
	}
	prev := r.last[p]
	r.epochs[p] = epoch
	ctx, cancel := context.WithCancel(context.Background())
	np := &partition{id: p, epoch: epoch, ctx: ctx, stop: cancel, reqs: make(chan *op, r.cfg.QueueSize),
		loaded: make(chan struct{}), done: make(chan struct{})}
	r.parts[p] = np
	r.last[p] = np
	r.wg.Add(1)
	go r.run(np, prev)
	return nil
}

// Unload revokes ownership of p when epoch is at least the newest epoch
// granted for p (older epochs are ignored); the owner goroutine stops and its
// waiting requests get NOT_COORDINATOR. A later Load needs a higher epoch.
func (r *Runtime) Unload(p, epoch int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hi, ok := r.epochs[p]; !ok || epoch < hi {
		return
	}
	r.epochs[p] = epoch
	if cur := r.parts[p]; cur != nil {
		cur.stop()
		delete(r.parts, p)
	}
}

// WaitLoaded blocks until the current load of p has finished and returns its
// error (nil when loaded). It returns a NOT_COORDINATOR *admin.Error when p
// is not owned.
func (r *Runtime) WaitLoaded(ctx context.Context, p int32) error {
	r.mu.Lock()
	cur := r.parts[p]
	r.mu.Unlock()
	if cur == nil {
		return admin.NewError(admin.CodeNotCoordinator, fmt.Sprintf("state partition %d is not owned", p))
	}
	select {
	case <-cur.loaded:
		return cur.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops every owner goroutine, fails their waiting requests with
// NOT_COORDINATOR and waits until all goroutines have exited.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	for id, p := range r.parts {
		p.stop()
		delete(r.parts, id)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// submit hands o to the owner of partition id, or returns the code that
// refuses it.
func (r *Runtime) submit(ctx context.Context, id int32, o *op) (admin.Code, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return admin.CodeNone, ErrClosed
	}
	p := r.parts[id]
	r.mu.Unlock()
	if p == nil {
		return admin.CodeNotCoordinator, nil
	}
	switch p.status.Load() {
	case statusLoading:
		return admin.CodeCoordinatorLoadInProgress, nil
	case statusFailed:
		return admin.CodeCoordinatorNotAvailable, nil
	case statusFenced:
		return admin.CodeNotCoordinator, nil
	}
	o.owner = p
	if o.kind == opRead {
		if res, ok := p.readCommitted(o.read); ok {
			o.resp <- res
			return admin.CodeNone, nil
		}
	}
	select {
	case p.reqs <- o:
		return admin.CodeNone, nil
	case <-p.ctx.Done():
		return admin.CodeNotCoordinator, nil
	case <-ctx.Done():
		return admin.CodeNone, ctx.Err()
	}
}

// wait returns the answer to a submitted op. The owner goroutine sends every
// answer it will ever send before it closes done, so an op still unanswered
// then (queued after the goroutine stopped) gets NOT_COORDINATOR.
func wait(ctx context.Context, o *op) (opResult, error) {
	select {
	case res := <-o.resp:
		return res, nil
	case <-o.owner.done:
		select {
		case res := <-o.resp:
			return res, nil
		default:
			return opResult{code: admin.CodeNotCoordinator}, nil
		}
	case <-ctx.Done():
		return opResult{}, ctx.Err()
	}
}

// ReadMirrorStates answers a read, routing each partition to the
// __mirror_state partition that owns its key. Partitions of unowned or
// loading shards carry NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
func (r *Runtime) ReadMirrorStates(ctx context.Context, req ReadRequest) (ReadResponse, error) {
	out, err := scatter(ctx, r, req.Partitions,
		func(p ReadPartition) int32 { return r.PartitionFor(req.MirrorName, p.TopicID, p.Partition) },
		func(sub []ReadPartition) *op {
			return &op{kind: opRead, read: ReadRequest{MirrorName: req.MirrorName, Partitions: sub}, resp: make(chan opResult, 1)}
		},
		func(res opResult) []ReadPartitionResult { return res.read.Partitions },
		func(p ReadPartition, code admin.Code) ReadPartitionResult {
			return ReadPartitionResult{TopicID: p.TopicID, Partition: p.Partition, State: -1,
				LeaderEpoch: -1, StateEpoch: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1, ErrorCode: code}
		})
	if err != nil {
		return ReadResponse{}, err
	}
	return ReadResponse{Partitions: out}, nil
}

// WriteMirrorStates answers a write, routing each partition to the
// __mirror_state partition that owns its key. It returns once every accepted
// record is durable (or its append failed).
func (r *Runtime) WriteMirrorStates(ctx context.Context, req WriteRequest) (WriteResponse, error) {
	out, err := scatter(ctx, r, req.Partitions,
		func(p WritePartition) int32 { return r.PartitionFor(req.MirrorName, p.TopicID, p.Partition) },
		func(sub []WritePartition) *op {
			return &op{kind: opWrite, write: WriteRequest{MirrorName: req.MirrorName, Partitions: sub}, resp: make(chan opResult, 1)}
		},
		func(res opResult) []WritePartitionResult { return res.write.Partitions },
		func(p WritePartition, code admin.Code) WritePartitionResult {
			return WritePartitionResult{TopicID: p.TopicID, Partition: p.Partition, StateEpoch: -1,
				ErrorCode: code, ErrorMessage: code.String()}
		})
	if err != nil {
		return WriteResponse{}, err
	}
	return WriteResponse{Partitions: out}, nil
}

// scatter routes the partitions of one request to the __mirror_state partitions that
// own their keys (owner), submits one op per owner (mk builds it from that owner's
// partitions), waits for every op and gathers the answers in request order (take reads
// an op's answers). A group refused as a whole (not owned, loading, failed append) is
// answered partition by partition with fill.
func scatter[P, R any](ctx context.Context, r *Runtime, parts []P, owner func(P) int32,
	mk func([]P) *op, take func(opResult) []R, fill func(P, admin.Code) R) ([]R, error) {
	groups := make(map[int32][]int)
	for i, p := range parts {
		id := owner(p)
		groups[id] = append(groups[id], i)
	}
	out := make([]R, len(parts))
	fillAll := func(idx []int, code admin.Code) {
		for _, i := range idx {
			out[i] = fill(parts[i], code)
		}
	}
	type sent struct {
		idx []int
		o   *op
	}
	var pending []sent
	for id, idx := range groups {
		sub := make([]P, len(idx))
		for j, i := range idx {
			sub[j] = parts[i]
		}
		o := mk(sub)
		code, err := r.submit(ctx, id, o)
		if err != nil {
			return nil, err
		}
		if code != admin.CodeNone {
			fillAll(idx, code)
			continue
		}
		pending = append(pending, sent{idx, o})
	}
	for _, s := range pending {
		res, err := wait(ctx, s.o)
		if err != nil {
			return nil, err
		}
		if res.code != admin.CodeNone {
			fillAll(s.idx, res.code)
			continue
		}
		got := take(res)
		for j, i := range s.idx {
			out[i] = got[j]
		}
	}
	return out, nil
}

// DeleteMirror writes tombstones for both keys of every partition of mirror
// in every __mirror_state partition this runtime owns. Other partitions are
// the business of their own coordinators. It returns the tombstoned
// partitions and, joined, an *admin.Error for every owned shard that could
// not do it (loading, failed append, ...).
func (r *Runtime) DeleteMirror(ctx context.Context, mirror string) (DeleteResponse, error) {
	r.mu.Lock()
	ids := make([]int32, 0, len(r.parts))
	for id := range r.parts {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	var (
		resp    DeleteResponse
		errs    []error
		pending []*op
		pids    []int32
	)
	for _, id := range ids {
		o := &op{kind: opDelete, mirror: mirror, resp: make(chan opResult, 1)}
		code, err := r.submit(ctx, id, o)
		if err != nil {
			return DeleteResponse{}, err
		}
		if code != admin.CodeNone {
			errs = append(errs, admin.NewError(code, fmt.Sprintf("state partition %d", id)))
			continue
		}
		pending = append(pending, o)
		pids = append(pids, id)
	}
	for i, o := range pending {
		res, err := wait(ctx, o)
		if err != nil {
			return DeleteResponse{}, err
		}
		if res.code != admin.CodeNone {
			errs = append(errs, admin.NewError(res.code, fmt.Sprintf("state partition %d", pids[i])))
			continue
		}
		resp.Partitions = append(resp.Partitions, res.del.Partitions...)
	}
	return resp, errors.Join(errs...)
}
