package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror"
	"github.com/kmirror/kmirror/mirror/adminhandler"
	"github.com/kmirror/kmirror/mirror/auth"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dataplane"
	"github.com/kmirror/kmirror/mirror/kmprom"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// options holds the parsed command line.
type options struct {
	listen       string
	advertise    string
	data         string
	clusterID    string
	syncInterval time.Duration
	retry        mirror.RetryConfig // the FAILED retry (mirror.failed.retry.* flags)
	unreachable  time.Duration      // -source-unreachable-after (mirror.WithSourceUnreachableAfter)
	logLevel     slog.Level
	logFormat    string
	cpuProfile   string
	memProfile   string
	metrics      string // host:port of the Prometheus /metrics endpoint, "" for none
	enforceACLs  bool
	superUsers   []string
	security     securityOptions // TLS, SASL, -add-scram, -allow-anonymous (security.go)
	// initialRebalanceDelay is the data plane's group.initial.rebalance.delay.ms
	// (negative: none).
	initialRebalanceDelay time.Duration
	// groupRejoinGrace is the data plane's GroupRejoinGrace (negative: none).
	groupRejoinGrace time.Duration
	// fetchSessionSlots is -fetch-session-cache-slots.
	fetchSessionSlots int
	// activeReconcilers is -active-reconcilers.
	activeReconcilers int
}

// usageError is a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// run starts the daemon, serves until ctx is done (SIGTERM, SIGINT) or the
// server fails, stops it, and returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "kmirrord: %v\nRun 'kmirrord -help' for usage.\n", err)
		}
		return exitUsage
	}
	log := newLogger(o, stderr)
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			log.Error("kmirrord: cannot start", "err", err)
			return exitRuntime
		}
		defer stopProfile()
	}
	d, err := start(o, log)
	if err != nil {
		log.Error("kmirrord: cannot start", "err", err)
		var ue *usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitRuntime
	}
	if err := d.serve(ctx); err != nil {
		log.Error("kmirrord: stopped with an error", "err", err)
		return exitRuntime
	}
	return exitOK
}

// sessionSlots is the data plane's FetchSessionCacheSlots for the flag's n
// (0: off).
func sessionSlots(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// parseFlags parses and checks the command line. Its error is flag.ErrHelp,
// a *usageError to print, or a flag package error the flag package has
// already printed with the usage.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kmirrord", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "", "`host:port` of the admin RPCs and the data plane (required; port 0 picks one)")
	fs.StringVar(&o.advertise, "advertise", "", "`host:port` clients are told to connect to (default: the listen address)")
	fs.StringVar(&o.data, "data", "", "data `directory` of the site's destination and state (required)")
	fs.StringVar(&o.clusterID, "cluster-id", "", "cluster `id` of the site, used on first start and stored in the data directory (default: random)")
	fs.DurationVar(&o.syncInterval, "sync-interval", mirror.DefaultSyncInterval, "period of each mirror's metadata sync (negative: off)")
	refreshMs := fs.Int64(controller.KeyMetadataRefreshIntervalMs, mirror.DefaultSyncInterval.Milliseconds(),
		"period of each mirror's metadata sync in `ms` (0: off; the prototype's name of -sync-interval; a mirror's own config of the same name overrides it)")
	def := mirror.DefaultRetryConfig()
	initialMs := fs.Int64(controller.KeyFailedRetryInitialBackoffMs, def.Initial.Milliseconds(), "first back-off of the automatic retry of a FAILED partition, in `ms` (doubles per attempt)")
	maxMs := fs.Int64(controller.KeyFailedRetryMaxBackoffMs, def.Max.Milliseconds(), "largest back-off of the FAILED retry, in `ms`")
	fs.IntVar(&o.retry.MaxAttempts, controller.KeyFailedRetryMaxAttempts, def.MaxAttempts, "automatic retries of a FAILED partition before it waits for mirrorctl --recover (`n`, 0: none)")
	delayMs := fs.Int64("group.initial.rebalance.delay.ms", dataplane.DefaultInitialRebalanceDelay.Milliseconds(),
		"time the first rebalance of an empty consumer group waits for more members, in `ms` (Kafka's setting; extended per join up to the rebalance timeout; 0: none)")
	graceMs := fs.Int64("group.rejoin.grace.ms", dataplane.DefaultGroupRejoinGrace.Milliseconds(),
		"how long after the start every consumer group counts as having members, in `ms`: membership is not kept across a restart, so the mirrors' offset sync leaves the groups alone while their members rejoin (0: none, for a site whose groups have no members to wait for)")
	fs.DurationVar(&o.unreachable, "source-unreachable-after", mirror.DefaultSourceUnreachableAfter,
		"how long a mirror's source must have failed a partition before describe and the metrics show it unreachable (0: at the first failure)")
	level := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to `file` until the daemon stops")
	fs.StringVar(&o.memProfile, "memprofile", "", "write a heap profile (after a GC) to `file` when the daemon is told to stop, before it shuts down")
	fs.IntVar(&o.fetchSessionSlots, "fetch-session-cache-slots", dataplane.DefaultFetchSessionCacheSlots,
		"incremental fetch sessions (KIP-227) the data plane holds at once, as Kafka's max.incremental.fetch.session.cache.slots (`n`, 0: sessions off)")
	fs.IntVar(&o.activeReconcilers, "active-reconcilers", mirror.DefaultActiveReconcilers,
		"mirror partitions that run a turn of their state machine at once (a start, a stop, a state change); the others wait in a queue with no goroutine: fewer lower the memory of a mass start or failover, more shorten it (`n`)")
	fs.BoolVar(&o.enforceACLs, "enforce-acls", false, "authorize every request (the mirror RPCs and the data plane) with the site's ACLs: its own (CreateAcls) and those its mirrors synced (principals: see -sasl-mechanisms, -tls-client-ca)")
	superUsers := fs.String("super-users", "", "`principals` allowed everything with -enforce-acls, separated by ';' as Kafka's super.users or by ',' (User:admin;User:CN=ops,O=acme)")
	o.security.register(fs)
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics (kmirror_*) on `host:port` at /metrics (default: off)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kmirrord -listen HOST:PORT -data DIR [-cluster-id ID] [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("kmirrord: %w", err) // printed by flag
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set[controller.KeyMetadataRefreshIntervalMs] {
		if set["sync-interval"] {
			return nil, usagef("-sync-interval and -%s name the same setting: give one", controller.KeyMetadataRefreshIntervalMs)
		}
		if *refreshMs < 0 {
			return nil, usagef("-%s: %d is negative", controller.KeyMetadataRefreshIntervalMs, *refreshMs)
		}
		o.syncInterval = time.Duration(*refreshMs) * time.Millisecond
		if *refreshMs == 0 {
			o.syncInterval = -1 // off
		}
	}
	o.retry.Initial, o.retry.Max = time.Duration(*initialMs)*time.Millisecond, time.Duration(*maxMs)*time.Millisecond
	if *initialMs < 1 || *maxMs < 1 {
		return nil, usagef("-%s and -%s must be at least 1", controller.KeyFailedRetryInitialBackoffMs, controller.KeyFailedRetryMaxBackoffMs)
	}
	if err := o.retry.Validate(); err != nil {
		return nil, usagef("FAILED retry flags: %v", err)
	}
	if *delayMs < 0 {
		return nil, usagef("-group.initial.rebalance.delay.ms: %d is negative", *delayMs)
	}
	o.initialRebalanceDelay = time.Duration(*delayMs) * time.Millisecond
	if *delayMs == 0 {
		o.initialRebalanceDelay = -1 // none
	}
	if *graceMs < 0 {
		return nil, usagef("-group.rejoin.grace.ms: %d is negative", *graceMs)
	}
	o.groupRejoinGrace = time.Duration(*graceMs) * time.Millisecond
	if *graceMs == 0 {
		o.groupRejoinGrace = -1 // none
	}
	if o.unreachable < 0 {
		return nil, usagef("-source-unreachable-after: %v is negative", o.unreachable)
	}
	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, usagef("-log-level: %v", err)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, usagef("-log-format must be text or json, got %q", o.logFormat)
	}
	if o.fetchSessionSlots < 0 {
		return nil, usagef("-fetch-session-cache-slots: %d is negative", o.fetchSessionSlots)
	}
	if o.activeReconcilers <= 0 {
		return nil, usagef("-active-reconcilers: %d is not positive", o.activeReconcilers)
	}
	if o.listen == "" {
		return nil, usagef("-listen is required")
	}
	if _, _, err := splitHostPort(o.listen, true); err != nil {
		return nil, usagef("-listen: %v", err)
	}
	if o.advertise != "" {
		host, _, err := splitHostPort(o.advertise, false)
		if err != nil {
			return nil, usagef("-advertise: %v", err)
		}
		if host == "" {
			return nil, usagef("-advertise: empty host in %q", o.advertise)
		}
	}
	if strings.TrimSpace(o.data) == "" {
		return nil, usagef("-data is required")
	}
	if o.metrics != "" {
		if _, _, err := splitHostPort(o.metrics, true); err != nil {
			return nil, usagef("-metrics: %v", err)
		}
	}
	if *superUsers != "" {
		if !o.enforceACLs {
			return nil, usagef("-super-users needs -enforce-acls")
		}
		for _, p := range splitPrincipals(*superUsers) {
			p = strings.TrimSpace(p)
			if kind, name, ok := strings.Cut(p, ":"); !ok || kind == "" || name == "" {
				return nil, usagef("-super-users: %q is not a principal TYPE:NAME (User:admin)", p)
			}
			o.superUsers = append(o.superUsers, p)
		}
	}
	if err := o.security.check(o.listen); err != nil {
		return nil, err
	}
	if o.clusterID != "" {
		if err := validClusterID(o.clusterID); err != nil {
			return nil, usagef("-cluster-id: %v", err)
		}
	}
	return o, nil
}

// splitHostPort splits a HOST:PORT flag value; the port must be 1-65535, or
// 0 when zeroOK.
func splitHostPort(v string, zeroOK bool) (string, int, error) {
	host, ps, err := net.SplitHostPort(v)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 || (port == 0 && !zeroOK) {
		return "", 0, fmt.Errorf("invalid port %q in %q", ps, v)
	}
	return host, port, nil
}

func newLogger(o *options, w io.Writer) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.logLevel}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// daemon is a started site: destination, Mirror, server and listener.
type daemon struct {
	log *slog.Logger
	// memProfile is -memprofile: where serve writes the heap profile when told to stop.
	memProfile string
	dest       *mirror.LocalDestination
	m          *mirror.Mirror
	dp         *dataplane.DataPlane
	// groups is the mirror's view of the data plane's group membership,
	// bound to dp once the listener is built.
	groups *groupGuard
	srv    *admin.Server
	ln     net.Listener
	// metricsSrv serves /metrics (nil without -metrics); metricsAddr is its bound address.
	metricsSrv  *http.Server
	metricsAddr net.Addr
	prom        *kmprom.Metrics // nil without -metrics
	creds       *auth.Store     // the SCRAM credentials of the data directory
	done        chan error      // Serve's result
	closeTimes  []slog.Attr     // how long each step of close took, in ms
	// served is set once Serve's result was taken from done.
	served bool
}

// start opens the data directory, the Mirror and the listener, and starts
// serving.
func start(o *options, log *slog.Logger) (_ *daemon, err error) {
	stored, err := readClusterID(o.data)
	if err != nil {
		return nil, err
	}
	id, err := chooseClusterID(o.clusterID, stored)
	if err != nil {
		return nil, err
	}
	dest, err := mirror.OpenFileDestination(o.data, id, fetcher.FileLogOptions{})
	if errors.Is(err, mirror.ErrDestinationLocked) {
		return nil, fmt.Errorf("kmirrord: data directory %s is in use by another kmirrord (or another kmirror host): %w", o.data, err)
	}
	if err != nil {
		return nil, fmt.Errorf("kmirrord: open data directory: %w", err)
	}
	d := &daemon{log: log, dest: dest, memProfile: o.memProfile, done: make(chan error, 1)}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.close())
		}
	}()
	if err := persistClusterID(o.data, id, stored); err != nil {
		return nil, err
	}
	if d.creds, err = openCredentials(o.data, o.security.addScram, log); err != nil {
		return nil, err
	}
	d.groups = &groupGuard{}
	mopts := []mirror.Option{mirror.WithLogger(log), mirror.WithFailedRetry(o.retry), mirror.WithGroupGuard(d.groups),
		mirror.WithSourceUnreachableAfter(o.unreachable)}
	var metrics *kmprom.Metrics
	if o.metrics != "" {
		metrics = kmprom.New("")
		mopts = append(mopts, mirror.WithMetrics(metrics))
	}
	m, err := mirror.New(mirror.Config{Destination: dest, SyncInterval: o.syncInterval, ActiveReconcilers: o.activeReconcilers}, mopts...)
	if err != nil {
		return nil, fmt.Errorf("kmirrord: open mirror state: %w", err)
	}
	d.m, d.prom = m, metrics
	if metrics != nil {
		if err := d.serveMetrics(o.metrics, metrics); err != nil {
			return nil, err
		}
	}
	if err := d.listen(o); err != nil {
		return nil, err
	}
	return d, nil
}

// listen opens the listener, builds the data plane and the server, and
// starts serving.
func (d *daemon) listen(o *options) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("kmirrord: listen: %w", err)
	}
	host, port, err := advertised(o, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	dp, err := dataplane.New(dataplane.Config{Destination: d.dest, AdvertisedHost: host, AdvertisedPort: int32(port),
		EnforceACLs: o.enforceACLs, ACLPolicy: dataplane.ACLPolicy{SuperUsers: o.superUsers},
		InitialRebalanceDelay: o.initialRebalanceDelay, GroupRejoinGrace: o.groupRejoinGrace,
		FetchSessionCacheSlots: sessionSlots(o.fetchSessionSlots)})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("kmirrord: data plane: %w", err)
	}
	d.dp = dp
	d.groups.dp.Store(dp)
	extra := append(dp.APIs(), describeConfigsAPI(d.dest, dp))
	extra = append(extra, credentialAPIs(d.creds, dp)...)
	extra = append(extra, describeClientQuotasAPI(dp))
	if o.enforceACLs {
		if err := checkAuthzRules(extra); err != nil {
			_ = ln.Close()
			return err
		}
	}
	tlsCfg, err := o.security.tlsConfig()
	if err != nil {
		_ = ln.Close()
		return err
	}
	var sasl *admin.SASLConfig
	if len(o.security.saslMechanisms) > 0 {
		sasl = &admin.SASLConfig{Mechanisms: o.security.saslMechanisms, Credentials: d.creds, OnAuth: newAuthLog(d.log).event}
		if len(d.creds.Users()) == 0 {
			d.log.Warn("kmirrord: -sasl-mechanisms without any SCRAM credential: no client can authenticate; add one with -add-scram")
		}
	}
	srv, err := admin.NewServer(admin.ServerConfig{
		Handler: adminhandler.New(d.m),
		// The mirror RPCs are authorized with the data plane's decision
		// (nil, allowing everything, without -enforce-acls).
		Authorizer: dp.Authorizer(),
		Extra:      extra,
		TLS:        tlsCfg,
		SASL:       sasl,
		OnError:    d.serverError,
	})
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("kmirrord: server: %w", err)
	}
	if d.prom != nil {
		if err := registerAuthMetrics(d.prom.Registry(), srv); err != nil {
			_ = ln.Close()
			return err
		}
	}
	d.srv, d.ln = srv, ln
	go func() { d.done <- srv.Serve(ln) }()
	d.log.Info("kmirrord listening", "addr", ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(port)),
		"data", o.data, "cluster_id", d.dest.ClusterID(), "enforce_acls", o.enforceACLs,
		"security_protocol", o.security.protocol(), "sasl_mechanisms", strings.Join(o.security.saslMechanisms, ","))
	return nil
}

// serverError logs what the server reports: a failing Accept (no new connection is
// taken until it passes, e.g. out of descriptors) as a warning, connection-level
// problems, which any client can cause, at debug level.
func (d *daemon) serverError(err error) {
	if errors.Is(err, admin.ErrAccept) {
		d.log.Warn("kmirrord: accepting connections fails", "err", err)
		return
	}
	d.log.Debug("kmirrord: connection error", "err", err)
}

// advertised returns the host and port Metadata names.
func advertised(o *options, bound net.Addr) (string, int, error) {
	if o.advertise != "" {
		return splitHostPort(o.advertise, false)
	}
	host, _, _ := net.SplitHostPort(o.listen)
	port := bound.(*net.TCPAddr).Port
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		h, err := os.Hostname()
		if err != nil {
			return "", 0, fmt.Errorf("kmirrord: no -advertise and no host name for the unspecified listen host: %w", err)
		}
		host = h
	}
	return host, port, nil
}

// serve waits for ctx or a server failure, then stops everything.
func (d *daemon) serve(ctx context.Context) error {
	var serveErr error
	select {
	case <-ctx.Done():
		d.log.Info("kmirrord stopping", "cause", context.Cause(ctx))
		if d.memProfile != "" {
			if err := writeHeapProfile(d.memProfile); err != nil {
				d.log.Error("kmirrord: -memprofile", "err", err)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			d.log.Info("kmirrord memory", "heap_inuse", ms.HeapInuse, "heap_retained", ms.HeapIdle-ms.HeapReleased,
				"stack_inuse", ms.StackInuse, "runtime_other", ms.Sys-ms.HeapSys-ms.StackSys, "goroutines", runtime.NumGoroutine())
		}
	case serveErr = <-d.done:
		d.served = true
		d.log.Error("kmirrord: server failed", "err", serveErr)
	}
	err := errors.Join(serveErr, d.close())
	if err == nil {
		d.log.LogAttrs(context.Background(), slog.LevelInfo, "kmirrord stopped", d.closeTimes...)
	}
	return err
}

// serveMetrics serves the Prometheus registry of metrics at /metrics on addr.
func (d *daemon) serveMetrics(addr string, metrics *kmprom.Metrics) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kmirrord: -metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler())
	d.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	d.metricsAddr = ln.Addr()
	go func() {
		if err := d.metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("kmirrord: metrics server failed", "err", err)
		}
	}()
	d.log.Info("kmirrord metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return nil
}

// close stops the metrics endpoint, the server (listener and connections), the data
// plane, then the Mirror, then the destination; each step runs even when an earlier one
// fails.
func (d *daemon) close() error {
	var errs []error
	// How long each step took, for the "kmirrord stopped" line: a shutdown at
	// thousands of partitions is measured by step (BenchmarkShutdownAtScale).
	step := time.Now()
	took := func(name string) {
		now := time.Now()
		d.closeTimes = append(d.closeTimes, slog.Int64(name, now.Sub(step).Milliseconds()))
		step = now
	}
	defer took("destination_ms")
	if d.metricsSrv != nil {
		errs = append(errs, d.metricsSrv.Close())
		d.metricsSrv = nil
	}
	if d.srv != nil {
		errs = append(errs, d.srv.Close())
		if !d.served {
			if err := <-d.done; !errors.Is(err, admin.ErrServerClosed) {
				errs = append(errs, err)
			}
			d.served = true
		}
		d.srv = nil
	}
	took("server_ms")
	if d.dp != nil {
		errs = append(errs, d.dp.Close())
		d.dp = nil
	}
	took("dataplane_ms")
	if d.m != nil {
		errs = append(errs, d.m.Close())
		d.m = nil
	}
	took("mirror_ms")
	if d.dest != nil {
		errs = append(errs, d.dest.Close())
		d.dest = nil
	}
	return errors.Join(errs...)
}

// writeHeapProfile writes the live heap, after a GC, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}

// startCPUProfile starts writing a CPU profile to path; the returned func
// stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("kmirrord: -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("kmirrord: -cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
