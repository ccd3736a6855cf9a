package mirrorsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/coordinator"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/metasync"
	"github.com/kmirror/kmirror/records"
	"github.com/kmirror/kmirror/statemachine"
)

// LogSpec names the log a LogFactory is asked for.
type LogSpec struct {
	// Seed is the seed of the run (runs of different seeds may be in progress at once).
	Seed uint64
	// Site is the site's name ("s0", "s1", ...), Topic and Partition the partition's.
	Site      string
	Topic     string
	Partition int32
	// Reopen is false for the first open of the log in a run: the factory must return an
	// empty log (a seed may run more than once over the same storage). It is true when
	// the simulation reopens the log after a crash: the factory must open the same log
	// again from its storage.
	Reopen bool
}

// LogFactory makes the log of one partition of one site. The simulation owns the
// returned log until the end of the run. A log that has a Crash() method (as
// fetcher.MemoryLog) is crashed in place by the crash steps; any other log is crashed by
// closing it and asking the factory for it again with Reopen set (a reopen from disk).
// At the end of the run every log is closed, with Discard() error instead of Close when
// the log has that method (scratch logs that delete their storage). An error of the
// factory fails the run.
type LogFactory func(spec LogSpec) (fetcher.Log, error)

// MemoryLogFactory is the default LogFactory: a fetcher.MemoryLog whose appends are
// durable at once (a crash is a process restart; losing an acknowledged tail is what
// the unclean-election step models).
func MemoryLogFactory(LogSpec) (fetcher.Log, error) {
	return fetcher.NewMemoryLog(fetcher.MemoryLogOptions{SyncEveryAppend: true}), nil
}

// PeerWrapper wraps the Peer that site uses to reach peerSite during PREPARING (the
// LME lookup of spec §6.3). Tests use it to break the protocol on purpose.
type PeerWrapper func(site, peerSite string, p mirror.Peer) mirror.Peer

// Options configures a Sim. Zero fields take the documented defaults.
type Options struct {
	// Sites is the number of sites, 2 or 3; 0 lets each seed choose.
	Sites int
	// Partitions is the number of partitions of the simulated topic, 1 to 8; 0 lets
	// each seed choose between 1 and 3.
	Partitions int
	// Steps is the number of random steps per seed (default DefaultSteps).
	Steps int
	// LogFactory makes the partition logs (default MemoryLogFactory).
	LogFactory LogFactory
	// WaitTimeout bounds every wait for quiescence (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// WrapPeer, when set, wraps every Peer a site uses for the LME lookup.
	WrapPeer PeerWrapper
	// Logger receives the facade's logs (default: discarded).
	Logger *slog.Logger
	// ReplayOptions is the Go expression of these Options that the replay hint of a
	// Failure prints (for example "simOptions()" when a function of the embedder builds
	// them); by default the hint prints a literal of the set fields, with a placeholder
	// for every function.
	ReplayOptions string

	// strictStop makes the committed-not-lost check of a failover require every
	// committed record the mirror held, including those behind a transaction still
	// open at the stop (STOPPING appends ABORT markers, issue 11 item 1). Without it, a
	// STOPPING that truncates to the last stable offset passes: only the committed
	// records below the first open transaction must survive. Default: defaultStrictStop.
	strictStop bool
	// noLMECheck turns the direct LME check off (tests prove that the convergence
	// invariant alone also catches a broken LME truncation).
	noLMECheck bool
}

// defaultStrictStop is whether every Sim checks that a failover keeps the committed
// records behind an open transaction (Options.strictStop): true, since STOPPING appends
// ABORT markers instead of truncating to the LSO (spec §8.1).
const defaultStrictStop = true

// Defaults of Options.
const (
	DefaultSteps       = 24
	DefaultWaitTimeout = 15 * time.Second
)

// Errors of the simulation.
var (
	// ErrInvariant is matched by every *InvariantError.
	ErrInvariant = errors.New("mirrorsim: invariant violated")
	// ErrStuck is returned when a wait for quiescence (a state, a catch-up) timed out
	// without a violated invariant to blame.
	ErrStuck = errors.New("mirrorsim: no quiescence")
	// ErrInvalidOptions is wrapped by the errors of invalid Options.
	ErrInvalidOptions = errors.New("mirrorsim: invalid options")
)

// InvariantError is a violated invariant, with the facts that show it.
type InvariantError struct {
	// Invariant names the invariant ("lme", "committed-not-lost", "convergence",
	// "state-epoch-monotonic", "stale-write-refused", ...).
	Invariant string
	Detail    string
}

// Error names the invariant and gives the detail.
func (e *InvariantError) Error() string {
	return fmt.Sprintf("mirrorsim: invariant %q violated: %s", e.Invariant, e.Detail)
}

// Is makes errors.Is(err, ErrInvariant) true.
func (e *InvariantError) Is(target error) bool { return target == ErrInvariant }

func violation(name, format string, args ...any) error {
	return &InvariantError{Invariant: name, Detail: fmt.Sprintf(format, args...)}
}

// Failure is the error of a failed seed: the seed, the step that failed and the trace
// of every step run so far (replay it with Replay(seed)).
type Failure struct {
	Seed  uint64
	Step  int
	Trace []string
	Err   error
	// Call is the Go code that replays the seed with the Options that failed.
	Call string
	// Log holds the last lines the facade logged (all sites, debug level), oldest
	// first; Error does not print them.
	Log []string
}

// Error prints the seed, the failing step, the cause, how to replay and the trace.
func (f *Failure) Error() string {
	var b strings.Builder
	call := f.Call
	if call == "" {
		call = fmt.Sprintf("mirrorsim.Replay(%d)", f.Seed)
	}
	fmt.Fprintf(&b, "mirrorsim: seed %d failed at step %d: %v\nreplay: %s\ntrace:\n", f.Seed, f.Step, f.Err, call)
	for _, t := range f.Trace {
		b.WriteString("  ")
		b.WriteString(t)
		b.WriteByte('\n')
	}
	return b.String()
}

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Err }

// Sim runs seeds with one set of Options.
type Sim struct {
	opts Options
	orig Options // as given to New, for the replay hint
}

// New returns a Sim. It validates o, wrapping ErrInvalidOptions.
func New(o Options) (*Sim, error) {
	orig := o
	if o.Sites != 0 && (o.Sites < 2 || o.Sites > 3) {
		return nil, fmt.Errorf("%w: Sites %d not in [2,3]", ErrInvalidOptions, o.Sites)
	}
	if o.Partitions < 0 || o.Partitions > 8 {
		return nil, fmt.Errorf("%w: Partitions %d not in [0,8]", ErrInvalidOptions, o.Partitions)
	}
	if o.Steps < 0 || o.WaitTimeout < 0 {
		return nil, fmt.Errorf("%w: negative Steps or WaitTimeout", ErrInvalidOptions)
	}
	if o.Steps == 0 {
		o.Steps = DefaultSteps
	}
	if o.LogFactory == nil {
		o.LogFactory = MemoryLogFactory
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.strictStop = o.strictStop || defaultStrictStop
	return &Sim{opts: o, orig: orig}, nil
}

// Run runs one seed and returns nil or a *Failure.
func (s *Sim) Run(seed uint64) error {
	_, err := s.Replay(seed)
	return err
}

// Replay runs one seed and returns its trace (every step, human readable) and nil or
// a *Failure. The same seed always runs the same steps.
func (s *Sim) Replay(seed uint64) ([]string, error) {
	r := newRun(s.opts, seed)
	err := r.run()
	if cerr := r.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return r.trace, &Failure{Seed: seed, Step: r.step, Trace: r.trace, Err: err, Log: r.logs.tail(), Call: replayCall(s.orig, seed)}
	}
	return r.trace, nil
}

// RunSeeds runs seeds from, from+1, ..., from+n-1 and returns the first *Failure.
func (s *Sim) RunSeeds(from, n uint64) error {
	for seed := from; seed < from+n; seed++ {
		if err := s.Run(seed); err != nil {
			return err
		}
	}
	return nil
}

// Run runs one seed with the default Options.
func Run(seed uint64) error {
	s, _ := New(Options{})
	return s.Run(seed)
}

// Replay runs one seed with the default Options and returns its trace.
func Replay(seed uint64) ([]string, error) {
	s, _ := New(Options{})
	return s.Replay(seed)
}

// RunSeeds runs n seeds from from with the default Options.
func RunSeeds(from, n uint64) error {
	s, _ := New(Options{})
	return s.RunSeeds(from, n)
}

// topic is the simulated topic.
const topic = "orders"

// statePartitions is the __mirror_state partition count of every site.
const statePartitions = 3

// simEpoch is the fixed clock of the simulation (control-record timestamps).
var simEpoch = time.UnixMilli(1_700_000_000_000)

// site is one simulated cluster.
type site struct {
	idx     int
	name    string
	dest    *dest
	store   *coordinator.MemoryStore
	ctrlLog *mirror.MemoryControllerLog
	owner   []int32 // coordinator ownership epoch per __mirror_state partition

	mu sync.Mutex
	m  *mirror.Mirror // nil while the site is down
}

func (s *site) mirror() *mirror.Mirror {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

func (s *site) setMirror(m *mirror.Mirror) {
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
}

func mirrorName(from *site) string { return "from-" + from.name }

// errSiteDown is returned by the peer of a site that is down.
var errSiteDown = errors.New("mirrorsim: site down")

// peerProxy is the Peer of a site as seen by another: it forwards to the site's
// current Mirror (a crashed site gets a new one).
type peerProxy struct{ s *site }

func (p peerProxy) ListClusterMirrors(ctx context.Context, f mirror.ListFilter) ([]mirror.MirrorListing, error) {
	m := p.s.mirror()
	if m == nil {
		return nil, errSiteDown
	}
	return m.ListClusterMirrors(ctx, f)
}

func (p peerProxy) DescribeClusterMirrors(ctx context.Context, names []string, o mirror.DescribeOptions) ([]mirror.MirrorDescription, error) {
	m := p.s.mirror()
	if m == nil {
		return nil, errSiteDown
	}
	return m.DescribeClusterMirrors(ctx, names, o)
}

// run is one seed's world.
type run struct {
	opts    Options
	seed    uint64
	rng     *rand.Rand
	n       *notifier
	sites   []*site
	parts   int32
	topicID records.UUID
	ule     bool

	primary int
	src     []int // per site: the site it mirrors from; -1 for the primary

	gmu   sync.Mutex
	gates map[[2]int][]int64 // (source, destination) -> per-partition gate

	logs *logRing
	log  *slog.Logger

	prod  producer
	model []partModel // of the primary's partitions: what the source wrote and committed
	seen  map[stateKey]stateSeen
	le    map[[2]int]int32 // (site, partition) -> highest leader epoch seen
	trace []string
	step  int
}

func newRun(o Options, seed uint64) *run {
	r := &run{opts: o, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), n: newNotifier(),
		gates: map[[2]int][]int64{}, seen: map[stateKey]stateSeen{}, le: map[[2]int]int32{}}
	r.prod = producer{nextPID: 1000, idem: map[int32]*pidSeq{}, txn: map[int32]*pidSeq{}}
	r.logs = newLogRing(o.Logger.Handler())
	r.log = slog.New(r.logs)
	return r
}

func (r *run) tracef(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("step %d: ", r.step)+fmt.Sprintf(format, args...))
}

func (r *run) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.opts.WaitTimeout)
}

// gate returns how far site dst may fetch partition p from site src.
func (r *run) gate(src, dst int, p int32) int64 {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	g := r.gates[[2]int{src, dst}]
	if g == nil {
		return 0
	}
	return g[p]
}

func (r *run) setGate(src, dst int, p int32, v int64) {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	g := r.gates[[2]int{src, dst}]
	if g == nil {
		g = make([]int64, r.parts)
		r.gates[[2]int{src, dst}] = g
	}
	g[p] = v
	r.n.notify()
}

// siteByName returns the site named name.
func (r *run) siteByName(name string) (*site, bool) {
	for _, s := range r.sites {
		if s.name == name {
			return s, true
		}
	}
	return nil, false
}

// sourceFactory builds, for site d, the Source and SourceAdmin of mirror "from-X": a
// LocalSource over X's logs seen through the (X, d) gate.
func (r *run) sourceFactory(d *site) mirror.SourceFactory {
	return func(name string, cfg mirror.MirrorConfig) (fetcher.Source, mirror.SourceAdmin, error) {
		s, ok := r.siteByName(strings.TrimPrefix(name, "from-"))
		if !ok {
			return nil, nil, fmt.Errorf("mirrorsim: mirror %q names no site", name)
		}
		ls := fetcher.NewLocalSource(fetcher.ReadUncommitted)
		spec, ok := s.dest.Topic(topic)
		if ok {
			for p := int32(0); p < spec.Partitions; p++ {
				l, err := s.dest.log(topic, p)
				if err != nil {
					return nil, nil, err
				}
				src, dst, part := s.idx, d.idx, p
				ls.Add(topic, spec.TopicID, p, &gatedLog{Log: l, gate: func() int64 { return r.gate(src, dst, part) }})
			}
		}
		return ls, metasync.NewLocalSourceAdmin(s.dest, nil), nil
	}
}

// peerFactory returns the Peer of mirror "from-X" on site d: X's current Mirror.
func (r *run) peerFactory(d *site) mirror.PeerFactory {
	return func(name string, cfg mirror.MirrorConfig) (mirror.Peer, error) {
		s, ok := r.siteByName(strings.TrimPrefix(name, "from-"))
		if !ok {
			return nil, fmt.Errorf("mirrorsim: mirror %q names no site", name)
		}
		var p mirror.Peer = peerProxy{s}
		if r.opts.WrapPeer != nil {
			p = r.opts.WrapPeer(d.name, s.name, p)
		}
		return p, nil
	}
}

// openSite starts a new Mirror on the site's destination, stores and controller log,
// and grants it every __mirror_state partition with a new ownership epoch.
func (r *run) openSite(s *site) error {
	for q := range s.owner {
		s.owner[q]++
	}
	clears := make([]int, r.parts)
	for p := range r.parts {
		clears[p] = s.dest.clearCount(topic, p)
	}
	m, err := mirror.New(mirror.Config{
		Destination:                s.dest,
		ControllerLog:              s.ctrlLog,
		Store:                      s.store,
		Coordinator:                coordinator.Config{NumPartitions: statePartitions, AppendLinger: -1},
		ManualCoordinatorOwnership: true,
		SyncInterval:               -1,
		FetchIdleWait:              time.Millisecond,
	},
		mirror.WithSourceFactory(r.sourceFactory(s)),
		mirror.WithPeerFactory(r.peerFactory(s)),
		mirror.WithClock(func() time.Time { return simEpoch }),
		// No automatic FAILED retry: its timers and jitter are outside the
		// simulation's schedule, and a FAILED partition must stay visible to the
		// invariant checks.
		mirror.WithFailedRetry(mirror.RetryConfig{}),
		mirror.WithEvents(func(mirror.StateChange) { r.n.notify() }),
		mirror.WithLogger(r.log.With("site", s.name)),
	)
	if err != nil {
		return fmt.Errorf("mirrorsim: open site %s: %w", s.name, err)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	for q := range s.owner {
		if err := m.Coordinator().Load(int32(q), s.owner[q]); err != nil {
			_ = m.Close()
			return fmt.Errorf("mirrorsim: site %s: load state partition %d: %w", s.name, q, err)
		}
	}
	for q := range s.owner {
		if err := m.Coordinator().WaitLoaded(ctx, int32(q)); err != nil {
			_ = m.Close()
			return fmt.Errorf("mirrorsim: site %s: load state partition %d: %w", s.name, q, err)
		}
	}
	s.setMirror(m)
	return r.awaitStopped(s, clears)
}

// awaitStopped waits, after a Mirror started on s, until a topic whose mirror is
// desired STOPPED is STOPPED again and its re-asserted ClearReadOnly has run (the
// read-only flag was cleared since clears were counted). The facade re-runs it
// asynchronously after a restart; a start of another mirror right away would race with
// it and could leave the new mirror's partition writable.
func (r *run) awaitStopped(s *site, clears []int) error {
	m := s.mirror()
	ts, ok := m.Controller().Topic(topic)
	if !ok || ts.Mirror == "" || ts.Desired != statemachine.DesiredStopped {
		return nil
	}
	ctx, cancel := r.ctx()
	defer cancel()
	if err := m.WaitForStates(ctx, ts.Mirror, []string{topic}, statemachine.Stopped); err != nil {
		return fmt.Errorf("%w: %s restart: %w", ErrStuck, s.name, err)
	}
	for p := range r.parts {
		if err := r.waitUntil(func() (bool, error) {
			return s.dest.clearCount(topic, p) > clears[p] && !s.dest.ReadOnly(topic, p),
				violation("stopped-writable", "%s %s-%d: STOPPED after a restart but ClearReadOnly not re-run (read-only %v)", s.name, topic, p, s.dest.ReadOnly(topic, p))
		}); err != nil {
			return err
		}
	}
	return nil
}

// closeSite closes the site's Mirror (the site is down until openSite).
func (r *run) closeSite(s *site) error {
	m := s.mirror()
	if m == nil {
		return nil
	}
	s.setMirror(nil)
	if err := m.Close(); err != nil {
		return fmt.Errorf("mirrorsim: close site %s: %w", s.name, err)
	}
	return nil
}

// close stops every site and closes the logs.
func (r *run) close() error {
	var errs []error
	for _, s := range r.sites {
		errs = append(errs, r.closeSite(s))
	}
	for _, s := range r.sites {
		errs = append(errs, s.dest.closeLogs())
	}
	return errors.Join(errs...)
}

// setup builds the sites, creates the topic on the primary (site 0) and starts every
// other site mirroring from it.
func (r *run) setup() error {
	nSites := r.opts.Sites
	if nSites == 0 {
		nSites = 2 + r.rng.IntN(2)
	}
	r.parts = int32(r.opts.Partitions)
	if r.parts == 0 {
		r.parts = 1 + r.rng.Int32N(3)
	}
	r.model = make([]partModel, r.parts)
	r.ule = r.rng.IntN(4) == 0
	for i := range 16 {
		r.topicID[i] = byte(r.rng.IntN(256))
	}
	r.topicID[0] |= 1 // never the zero id
	r.tracef("setup: %d sites, topic %s with %d partitions, id %s, mirror.support.unclean.leader.election=%v",
		nSites, topic, r.parts, r.topicID, r.ule)
	for i := range nSites {
		name := fmt.Sprintf("s%d", i)
		s := &site{idx: i, name: name, dest: newDest(r.seed, name, "cluster-"+name, r.opts.LogFactory, r.n),
			store: coordinator.NewMemoryStore(), ctrlLog: &mirror.MemoryControllerLog{}, owner: make([]int32, statePartitions)}
		r.sites = append(r.sites, s)
		r.src = append(r.src, -1)
		if err := r.openSite(s); err != nil {
			return err
		}
	}
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.sites[0].dest.CreateTopic(ctx, mirror.TopicSpec{Name: topic, TopicID: r.topicID, Partitions: r.parts}); err != nil {
		return err
	}
	for p := range r.parts {
		if _, err := r.sites[0].dest.log(topic, p); err != nil {
			return err
		}
	}
	r.primary = 0
	for i := 1; i < nSites; i++ {
		if err := r.startMirror(r.sites[i], r.sites[0]); err != nil {
			return err
		}
	}
	return nil
}

// upMirrors returns the sites that are up and are not the primary (the mirrors).
func (r *run) upMirrors() []*site {
	var out []*site
	for _, s := range r.sites {
		if s.idx != r.primary && s.mirror() != nil {
			out = append(out, s)
		}
	}
	return out
}

// downSites returns the sites whose Mirror is closed (crashed primaries).
func (r *run) downSites() []*site {
	var out []*site
	for _, s := range r.sites {
		if s.mirror() == nil {
			out = append(out, s)
		}
	}
	return out
}

// run runs the setup, the steps and the final convergence check.
func (r *run) run() error {
	if err := r.setup(); err != nil {
		return err
	}
	if err := r.checkAll(); err != nil {
		return err
	}
	for r.step = 1; r.step <= r.opts.Steps; r.step++ {
		if err := r.randomStep(); err != nil {
			return err
		}
		if err := r.settle(); err != nil {
			return err
		}
		if err := r.checkAll(); err != nil {
			return err
		}
	}
	r.step = r.opts.Steps + 1
	for _, s := range r.downSites() {
		if err := r.recover(s); err != nil {
			return err
		}
	}
	for _, d := range r.upMirrors() {
		if err := r.catchUp(d, true); err != nil {
			return err
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	if err := r.checkAll(); err != nil {
		return err
	}
	return r.checkConverged()
}

// randomStep picks and runs one step.
func (r *run) randomStep() error {
	mirrors := r.upMirrors()
	down := r.downSites()
	type choice struct {
		w  int
		fn func() error
	}
	choices := []choice{
		{30, func() error { return r.produce(r.rng.Int32N(r.parts)) }},
		{6, r.uncleanElection},
		{5, func() error { return r.crashRestart(r.sites[r.rng.IntN(len(r.sites))]) }},
		{5, r.ownershipChange},
		{5, r.staleWrite},
	}
	if len(mirrors) > 0 {
		pick := func() *site { return mirrors[r.rng.IntN(len(mirrors))] }
		choices = append(choices,
			choice{15, func() error { return r.catchUp(pick(), r.rng.IntN(3) == 0) }},
			choice{8, func() error { return r.failover(pick(), false) }},
			choice{5, func() error { return r.failover(pick(), true) }},
			choice{3, func() error { return r.pauseResume(pick()) }},
			choice{4, func() error { return r.strayWrite(pick()) }},
		)
	}
	if len(down) > 0 {
		choices = append(choices, choice{25, func() error { return r.recover(down[r.rng.IntN(len(down))]) }})
	}
	total := 0
	for _, c := range choices {
		total += c.w
	}
	x := r.rng.IntN(total)
	for _, c := range choices {
		if x < c.w {
			return c.fn()
		}
		x -= c.w
	}
	return nil
}
