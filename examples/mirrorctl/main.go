package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options holds the parsed command line.
type options struct {
	bootstrap       string
	commandConfig   string
	mirrorConfig    string
	create, start   bool
	stop, pause     bool
	resume, del     bool
	recover         bool
	list, describe  bool
	mirror          string
	topics          string
	exclude         string
	state           string
	sourceClusterID string
	output          string
	failed          bool
	wait            bool
	timeout         time.Duration
	plan            planOpts // --dry-run, --allow-truncation (plan.go)
	addACL          bool
	removeACL       bool
	acl             aclOptions          // flags of --add-acl and --remove-acl (acl.go)
	aclOps          []kmsg.ACLOperation // parsed --operation
}

// usageError is a command-line mistake (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes one mirrorctl invocation and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("mirrorctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "`host:port` of the destination's kmirror admin server (required; comma list allowed)")
	fs.StringVar(&o.commandConfig, "command-config", "", "properties `file` for the admin client's own connection, as in Kafka's tools:\n"+
		"client.id, security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),\n"+
		"ssl.truststore.location / ssl.truststore.certificates (PEM), ssl.keystore.location or\n"+
		"ssl.keystore.certificate.chain + ssl.keystore.key (PEM), ssl.endpoint.identification.algorithm,\n"+
		"sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config or sasl.username + sasl.password")
	fs.StringVar(&o.mirrorConfig, "mirror-config", "", "properties `file` with the mirror's configs (required with --create)")
	fs.BoolVar(&o.create, "create", false, "create a cluster mirror")
	fs.BoolVar(&o.start, "start", false, "start mirroring topics")
	fs.BoolVar(&o.stop, "stop", false, "stop mirroring topics (failover: the topics become writable)")
	fs.BoolVar(&o.pause, "pause", false, "pause mirroring topics")
	fs.BoolVar(&o.resume, "resume", false, "resume paused mirror topics")
	fs.BoolVar(&o.recover, "recover", false, "restart the FAILED partitions of mirror topics (retry attempts reset)")
	fs.BoolVar(&o.del, "delete", false, "delete a cluster mirror (all its topics must be stopped)")
	fs.BoolVar(&o.list, "list", false, "list cluster mirrors")
	fs.BoolVar(&o.describe, "describe", false, "describe mirror partitions")
	fs.StringVar(&o.mirror, "mirror", "", "cluster mirror `name`")
	fs.StringVar(&o.topics, "topics", "", "comma `list` of topic names or regular expressions")
	topicAlias := fs.String("topic", "", "alias of --topics, as in Kafka's tools")
	version := fs.Bool("version", false, "print the version and exit")
	fs.StringVar(&o.exclude, "exclude", "", "comma `list` of topic regular expressions to exclude (only with --start)")
	fs.StringVar(&o.state, "state", "", "list only topics whose desired `state` is this (MIRRORING, PAUSED, STOPPED)")
	fs.StringVar(&o.sourceClusterID, "source-cluster-id", "", "list only mirrors of this source cluster `id`")
	fs.StringVar(&o.sourceClusterID, "sourceClusterId", "", "alias of --source-cluster-id")
	fs.StringVar(&o.output, "output", "table", "output `format`: table or json")
	jsonFlag := fs.Bool("json", false, "alias of --output json")
	registerPlanFlags(fs, &o.plan)
	fs.BoolVar(&o.failed, "failed", false, "with --describe: show only failing partitions (FAILED, or their source unreachable) with their retry count, state and error")
	fs.BoolVar(&o.wait, "wait", false, "with --stop, --pause or --resume: return once every partition of the topics\n"+
		"is actually STOPPED, PAUSED or MIRRORING (bounded by --timeout)")
	fs.BoolVar(&o.addACL, "add-acl", false, "grant --principal the --operation(s) on the cluster mirror --mirror (CreateAcls)")
	fs.BoolVar(&o.removeACL, "remove-acl", false, "remove the ACLs --add-acl would create (DeleteAcls)")
	fs.StringVar(&o.acl.principal, "principal", "", "with --add-acl/--remove-acl: the `principal` (User:alice)")
	fs.StringVar(&o.acl.operations, "operation", "", "with --add-acl/--remove-acl: comma `list` of operations (Describe, Alter, Create, All, ...)")
	fs.StringVar(&o.acl.host, "host", "*", "with --add-acl/--remove-acl: the client `host` the ACL applies to")
	fs.BoolVar(&o.acl.deny, "deny", false, "with --add-acl/--remove-acl: a DENY ACL instead of ALLOW")
	o.timeout = 30 * time.Second
	fs.Var((*msDuration)(&o.timeout), "timeout", "how long to wait for the server (and, with --wait, for the partitions):\n"+
		"milliseconds as in Kafka's tools (30000) or a Go duration (30s)")
	fs.Usage = func() {} // printed below: -help on stdout, mistakes on stderr
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stdout)
			return exitOK
		}
		fmt.Fprint(stderr, shortUsage) // flag already printed the problem
		return exitUsage
	}
	if *version {
		fmt.Fprintf(stdout, "mirrorctl %s\n", buildVersion())
		return exitOK
	}
	if *jsonFlag {
		o.output = "json"
	}
	if *topicAlias != "" {
		if o.topics != "" && o.topics != *topicAlias {
			return usage(stderr, usagef("--topic and --topics name the same flag: give one"))
		}
		o.topics = *topicAlias
	}
	if fs.NArg() > 0 {
		return usage(stderr, usagef("unexpected argument %q", fs.Arg(0)))
	}
	if err := o.validate(); err != nil {
		return usage(stderr, err)
	}

	opts := append(admin.ClientOpts(), kgo.SeedBrokers(splitList(o.bootstrap)...))
	if o.commandConfig != "" {
		extra, err := commandConfigOpts(o.commandConfig)
		if err != nil {
			return usage(stderr, err)
		}
		opts = append(opts, extra...)
	}
	kcl, err := kgo.NewClient(opts...)
	if err != nil {
		return fail(stderr, err)
	}
	defer kcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	c := &cli{o: &o, cl: admin.NewClient(kcl), kcl: kcl, out: stdout, errOut: stderr}
	if err := c.dispatch(ctx); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return usage(stderr, err)
		}
		return fail(stderr, explain(kcl, o.bootstrap, err))
	}
	if c.partial {
		return exitError
	}
	return exitOK
}

// shortUsage is what a mistake on the command line prints after the problem.
const shortUsage = "Usage: mirrorctl --bootstrap-server HOST:PORT ACTION [flags]\nRun 'mirrorctl --help' for usage.\n"

// msDuration is the value of --timeout: plain milliseconds, as Kafka's tools take
// them, or a Go duration ("30s").
type msDuration time.Duration

func (d *msDuration) String() string { return time.Duration(*d).String() }

func (d *msDuration) Set(v string) error {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return fmt.Errorf("%d ms is out of range", ms)
		}
		*d = msDuration(time.Duration(ms) * time.Millisecond)
		return nil
	}
	v2, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is neither milliseconds nor a duration (30000, 30s)", v)
	}
	*d = msDuration(v2)
	return nil
}

// buildVersion is the version of the kmirror module the binary was built from
// ("(devel)" for a build from a source tree), with its VCS revision when known.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			v += " (commit " + s.Value + ")"
		}
	}
	return v
}

// printUsage prints the usage text and every flag to w.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: mirrorctl --bootstrap-server HOST:PORT ACTION [flags]\n"+
		"Actions: --create --start --stop --pause --resume --recover --delete --list --describe --add-acl --remove-acl (exactly one).\n"+
		"--stop, --pause and --resume take --wait: return once every partition reached the state (within --timeout).\n"+
		"Flags may be written with one dash or two.\n\nFlags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

func usage(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "mirrorctl: %v\nRun 'mirrorctl --help' for usage.\n", err)
	return exitUsage
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "Error: %s\n", errText(err))
	return exitError
}

// errText renders an error for people: an admin protocol error shows its
// Kafka name and message (or the code's description when there is none).
func errText(err error) string {
	var ae *admin.Error
	if errors.As(err, &ae) {
		return codeText(ae.Code, ae.Message)
	}
	return err.Error()
}

func codeText(code admin.Code, msg string) string {
	if msg == "" {
		info, _ := code.Info()
		msg = info.Description
	}
	if msg == "" {
		return code.String()
	}
	return code.String() + ": " + msg
}

// validate checks the flag combination (spec §15.2).
func (o *options) validate() error {
	actions := []struct {
		set  bool
		name string
	}{
		{o.create, "--create"}, {o.start, "--start"}, {o.stop, "--stop"}, {o.pause, "--pause"},
		{o.resume, "--resume"}, {o.recover, "--recover"}, {o.del, "--delete"}, {o.list, "--list"}, {o.describe, "--describe"},
		{o.addACL, "--add-acl"}, {o.removeACL, "--remove-acl"},
	}
	var chosen []string
	for _, a := range actions {
		if a.set {
			chosen = append(chosen, a.name)
		}
	}
	switch len(chosen) {
	case 0:
		return usagef("one action is required: --create, --start, --stop, --pause, --resume, --recover, --delete, --list, --describe, --add-acl or --remove-acl")
	case 1:
	default:
		return usagef("only one action may be given, got %s", strings.Join(chosen, " "))
	}
	action := chosen[0]
	if o.bootstrap == "" {
		return usagef("--bootstrap-server is required")
	}
	if o.output != "table" && o.output != "json" {
		return usagef("--output must be table or json, got %q", o.output)
	}
	if o.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	needMirror := !o.list && !o.describe
	if needMirror && o.mirror == "" {
		return usagef("%s requires --mirror", action)
	}
	if o.mirrorConfig != "" && !o.create {
		return usagef("--mirror-config is only valid with --create")
	}
	if o.create && o.mirrorConfig == "" {
		return usagef("--create requires --mirror-config")
	}
	lifecycle := o.start || o.stop || o.pause || o.resume || o.recover
	if lifecycle && strings.TrimSpace(o.topics) == "" {
		return usagef("%s requires --topics", action)
	}
	if o.topics != "" && !lifecycle && !o.describe {
		return usagef("--topics is not valid with %s", action)
	}
	if o.exclude != "" && !o.start {
		return usagef("--exclude is only valid with --start")
	}
	if (o.state != "" || o.sourceClusterID != "") && !o.list {
		return usagef("--state and --source-cluster-id are only valid with --list")
	}
	if o.failed && !o.describe {
		return usagef("--failed is only valid with --describe")
	}
	if o.wait && !o.stop && !o.pause && !o.resume {
		return usagef("--wait is only valid with --stop, --pause or --resume")
	}
	if o.state != "" {
		d, err := statemachine.ParseDesired(o.state)
		if err != nil || d == statemachine.DesiredUnknown {
			return usagef("--state must be MIRRORING, PAUSED or STOPPED, got %q", o.state)
		}
		o.state = d.String()
	}
	ops, err := o.validateACL()
	if err != nil {
		return err
	}
	o.aclOps = ops
	for _, p := range append(splitList(o.topics), splitList(o.exclude)...) {
		if _, err := compileFull(p); err != nil {
			return usagef("invalid topic pattern %q: %v", p, err)
		}
	}
	return o.plan.validate(o)
}

// commandConfigOpts reads the admin client properties file (security.go).
func commandConfigOpts(path string) ([]kgo.Opt, error) {
	props, err := readProperties(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCommandConfig, err)
	}
	sec, err := parseCommandConfig(props)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sec.opts(), nil
}

func readProperties(path string) ([]property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, err := parseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// splitList splits a comma list, dropping empty items and spaces.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// compileFull compiles a topic pattern that must match a whole name.
func compileFull(p string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + p + ")$")
}

// isLiteral reports whether p is a plain topic name rather than a regex.
func isLiteral(p string) bool { return regexp.QuoteMeta(p) == p }

// cli runs one action.
type cli struct {
	o       *options
	cl      *admin.Client
	kcl     *kgo.Client // for the standard requests (CreateAcls, DeleteAcls)
	out     io.Writer
	errOut  io.Writer
	partial bool // some per-topic or per-mirror result failed
}

func (c *cli) dispatch(ctx context.Context) error {
	switch {
	case c.o.create:
		return c.doCreate(ctx)
	case c.o.start:
		return c.doStart(ctx)
	case c.o.stop:
		return c.doStop(ctx)
	case c.o.pause:
		return c.doPauseResume(ctx, true)
	case c.o.resume:
		return c.doPauseResume(ctx, false)
	case c.o.recover:
		return c.doRecover(ctx)
	case c.o.del:
		return c.doDelete(ctx)
	case c.o.list:
		return c.doList(ctx)
	case c.o.addACL:
		return c.doAddACL(ctx)
	case c.o.removeACL:
		return c.doRemoveACL(ctx)
	default:
		return c.doDescribe(ctx)
	}
}

// timeoutMs is the server-side timeout carried in requests.
func (c *cli) timeoutMs() int32 {
	ms := c.o.timeout.Milliseconds()
	if ms > 1<<31-1 {
		ms = 1<<31 - 1
	}
	return int32(ms)
}

func (c *cli) doCreate(ctx context.Context) error {
	props, err := readProperties(c.o.mirrorConfig)
	if err != nil {
		return err
	}
	req := admin.NewPtrCreateClusterMirrorRequest()
	req.MirrorName = c.o.mirror
	for _, p := range props {
		v := p.Value
		req.Configs = append(req.Configs, admin.CreateClusterMirrorRequestConfig{Name: p.Key, Value: &v})
	}
	if _, err := c.cl.CreateClusterMirror(ctx, req); err != nil {
		return err
	}
	if c.o.output == "json" {
		return writeJSON(c.out, opResult{Mirror: c.o.mirror, Operation: "create", Topics: []topicResult{}})
	}
	fmt.Fprintf(c.out, "Created cluster mirror %q.\n", c.o.mirror)
	return nil
}

func (c *cli) doDelete(ctx context.Context) error {
	req := admin.NewPtrDeleteClusterMirrorsRequest()
	req.MirrorName = c.o.mirror
	req.TimeoutMs = c.timeoutMs()
	if _, err := c.cl.DeleteClusterMirrors(ctx, req); err != nil {
		return err
	}
	if c.o.output == "json" {
		return writeJSON(c.out, opResult{Mirror: c.o.mirror, Operation: "delete", Topics: []topicResult{}})
	}
	fmt.Fprintf(c.out, "Deleted cluster mirror %q.\n", c.o.mirror)
	return nil
}

func (c *cli) doStart(ctx context.Context) error {
	include, exclude := splitList(c.o.topics), splitList(c.o.exclude)
	excl := make([]*regexp.Regexp, 0, len(exclude))
	for _, p := range exclude {
		re, _ := compileFull(p) // validated
		excl = append(excl, re)
	}
	req := admin.NewPtrStartMirrorTopicsRequest()
	req.MirrorName = c.o.mirror
	req.IncludePatterns = include
	req.ExcludePatterns = exclude
	req.TimeoutMs = c.timeoutMs()
	// Plain names are also sent as explicit topics (the server fills their
	// id and partition count from the source); regexes only extend the
	// mirror's include list, and discovery starts what they match.
	for _, name := range include {
		if isLiteral(name) && !matchesAny(excl, name) {
			t := admin.NewStartMirrorTopicsRequestTopic()
			t.Name = name
			req.Topics = append(req.Topics, t)
		}
	}
	req.ValidateOnly, req.AllowTruncation = c.o.plan.dryRun, c.o.plan.allowTruncation
	if err := c.needPlanVersion(ctx, admin.KeyStartMirrorTopics); err != nil {
		return err
	}
	resp, err := c.cl.StartMirrorTopics(ctx, req)
	if err != nil {
		return err
	}
	var results []topicResult
	for _, t := range resp.Topics {
		r := newTopicResult(t.Name, t.ErrorCode, t.ErrorMessage)
		r.Plan = planRows(t.Partitions)
		results = append(results, r)
	}
	return c.report("start", "Started mirroring", results, include)
}

func (c *cli) doStop(ctx context.Context) error {
	items := splitList(c.o.topics)
	names, err := c.resolveTopics(ctx, items)
	if err != nil {
		return err
	}
	req := admin.NewPtrStopMirrorTopicsRequest()
	req.MirrorName = c.o.mirror
	req.Patterns = items
	req.TimeoutMs = c.timeoutMs()
	for _, n := range names {
		req.Topics = append(req.Topics, admin.StopMirrorTopicsRequestTopic{TopicName: n})
	}
	req.ValidateOnly = c.o.plan.dryRun
	if err := c.needPlanVersion(ctx, admin.KeyStopMirrorTopics); err != nil {
		return err
	}
	resp, err := c.cl.StopMirrorTopics(ctx, req)
	if err != nil {
		return err
	}
	var results []topicResult
	for _, t := range resp.Topics {
		r := newTopicResult(t.TopicName, t.ErrorCode, t.ErrorMessage)
		r.Plan = planRows(t.Partitions)
		results = append(results, r)
	}
	return c.lifecycle(ctx, "stop", results, items)
}

func (c *cli) doPauseResume(ctx context.Context, pause bool) error {
	items := splitList(c.o.topics)
	names, err := c.resolveTopics(ctx, items)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no topic of mirror %q matches %s", c.o.mirror, strings.Join(items, ","))
	}
	var results []topicResult
	if pause {
		req := admin.NewPtrPauseMirrorTopicsRequest()
		req.MirrorName = c.o.mirror
		req.TimeoutMs = c.timeoutMs()
		for _, n := range names {
			req.Topics = append(req.Topics, admin.PauseMirrorTopicsRequestTopic{TopicName: n})
		}
		req.ValidateOnly = c.o.plan.dryRun
		if err := c.needPlanVersion(ctx, admin.KeyPauseMirrorTopics); err != nil {
			return err
		}
		resp, err := c.cl.PauseMirrorTopics(ctx, req)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			r := newTopicResult(t.TopicName, t.ErrorCode, t.ErrorMessage)
			if c.o.plan.dryRun { // a pause changes no data: its plan is only asked for
				r.Plan = planRows(t.Partitions)
			}
			results = append(results, r)
		}
		return c.lifecycle(ctx, "pause", results, items)
	}
	req := admin.NewPtrResumeMirrorTopicsRequest()
	req.MirrorName = c.o.mirror
	req.TimeoutMs = c.timeoutMs()
	for _, n := range names {
		req.Topics = append(req.Topics, admin.ResumeMirrorTopicsRequestTopic{TopicName: n})
	}
	req.ValidateOnly = c.o.plan.dryRun
	if err := c.needPlanVersion(ctx, admin.KeyResumeMirrorTopics); err != nil {
		return err
	}
	resp, err := c.cl.ResumeMirrorTopics(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		r := newTopicResult(t.TopicName, t.ErrorCode, t.ErrorMessage)
		if c.o.plan.dryRun { // a resume changes no data: its plan is only asked for
			r.Plan = planRows(t.Partitions)
		}
		results = append(results, r)
	}
	return c.lifecycle(ctx, "resume", results, items)
}

// resolveTopics turns --topics items into topic names: regexes are matched
// against the mirror's topics (ListClusterMirrors), plain names are kept
// even when the mirror does not know them (the server reports why).
func (c *cli) resolveTopics(ctx context.Context, items []string) ([]string, error) {
	req := admin.NewPtrListClusterMirrorsRequest()
	req.MirrorNameFilter = []string{c.o.mirror}
	req.IncludeTopicNames = true
	resp, err := c.cl.ListClusterMirrors(ctx, req)
	if err != nil {
		return nil, err
	}
	var known []string
	found := false
	for _, m := range resp.Mirrors {
		if m.MirrorName == c.o.mirror {
			found = true
			known = append(known, m.TopicNames...)
		}
	}
	if !found {
		return nil, admin.Errorf(admin.CodeUnknownClusterMirror, "cluster mirror %q does not exist", c.o.mirror)
	}
	set := map[string]bool{}
	for _, it := range items {
		if isLiteral(it) {
			set[it] = true
			continue
		}
		re, _ := compileFull(it) // validated
		for _, t := range known {
			if re.MatchString(t) {
				set[t] = true
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// report prints the per-topic results of a lifecycle operation; failed
// topics go to stderr and make the exit code 1.
func (c *cli) report(op, verb string, results []topicResult, items []string) error {
	sort.Slice(results, func(i, j int) bool { return results[i].Topic < results[j].Topic })
	for _, r := range results {
		if r.ErrorCode != 0 {
			c.partial = true
			fmt.Fprintf(c.errOut, "Error: topic %q: %s\n", r.Topic, codeText(admin.Code(r.ErrorCode), r.Error))
		}
	}
	if c.o.output == "json" {
		if results == nil {
			results = []topicResult{}
		}
		return writeJSON(c.out, opResult{Mirror: c.o.mirror, Operation: op, Patterns: items, Topics: results, DryRun: c.o.plan.dryRun})
	}
	if c.printPlan(op, results) {
		return nil
	}
	for _, r := range results {
		switch {
		case r.ErrorCode == 0 && r.Note != "":
			fmt.Fprintf(c.out, "Topic %q of mirror %q %s.\n", r.Topic, c.o.mirror, r.Note)
		case r.ErrorCode == 0:
			fmt.Fprintf(c.out, "%s topic %q of mirror %q.\n", verb, r.Topic, c.o.mirror)
		}
	}
	if len(results) == 0 {
		fmt.Fprintf(c.out, "%s topics matching %s of mirror %q.\n", verb, strings.Join(items, ","), c.o.mirror)
	}
	return nil
}

func (c *cli) doList(ctx context.Context) error {
	req := admin.NewPtrListClusterMirrorsRequest()
	if c.o.mirror != "" {
		req.MirrorNameFilter = []string{c.o.mirror}
	}
	if c.o.sourceClusterID != "" {
		req.SourceClusterIdFilter = []string{c.o.sourceClusterID}
	}
	if c.o.state != "" {
		req.DesiredMirrorStateFilter = []string{c.o.state}
	}
	req.IncludeTopicNames = c.o.output == "json"
	resp, err := c.cl.ListClusterMirrors(ctx, req)
	if err != nil {
		return err
	}
	mirrors := append([]admin.ListClusterMirrorsResponseMirror(nil), resp.Mirrors...)
	sort.Slice(mirrors, func(i, j int) bool { return mirrors[i].MirrorName < mirrors[j].MirrorName })
	if c.o.output == "json" {
		out := make([]listEntry, 0, len(mirrors))
		for _, m := range mirrors {
			names := append([]string{}, m.TopicNames...)
			sort.Strings(names)
			out = append(out, listEntry{
				Mirror: m.MirrorName, TopicCount: m.TopicCount, Topics: names,
				SourceClusterID: m.SourceClusterId, SourceBootstrap: m.SourceBootstrap,
			})
		}
		return writeJSON(c.out, out)
	}
	rows := make([][]string, 0, len(mirrors))
	for _, m := range mirrors {
		rows = append(rows, []string{m.MirrorName, fmt.Sprint(m.TopicCount), dash(m.SourceClusterId), dash(m.SourceBootstrap)})
	}
	return writeTable(c.out, listHeader, rows)
}

func (c *cli) doDescribe(ctx context.Context) error {
	req := admin.NewPtrDescribeClusterMirrorsRequest()
	if c.o.mirror != "" {
		req.MirrorNames = []string{c.o.mirror}
	}
	req.IncludeMirrorStates = true
	req.IncludeMirrorLags = true
	req.TimeoutMs = c.timeoutMs()
	resp, err := c.cl.DescribeClusterMirrors(ctx, req)
	if err != nil {
		return err
	}
	var filter []*regexp.Regexp
	for _, p := range splitList(c.o.topics) {
		re, _ := compileFull(p) // validated
		filter = append(filter, re)
	}
	descs := buildDescriptions(resp, filter, c.o.failed)
	for _, d := range descs {
		if d.ErrorCode != 0 {
			c.partial = true
			fmt.Fprintf(c.errOut, "Error: mirror %q: %s\n", d.Mirror, codeText(admin.Code(d.ErrorCode), d.Error))
		}
	}
	if c.o.output == "json" {
		return writeJSON(c.out, descs)
	}
	var rows [][]string
	var notes []string
	for _, d := range descs {
		if len(d.Partitions) == 0 && d.ErrorCode == 0 {
			if c.o.failed {
				notes = append(notes, fmt.Sprintf("Mirror %q has no failed partitions.", d.Mirror))
			} else {
				notes = append(notes, fmt.Sprintf("Mirror %q has no partitions to describe.", d.Mirror))
			}
		}
		for _, p := range d.Partitions {
			if c.o.failed {
				rows = append(rows, []string{d.Mirror, p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.RetryAttempt), p.State, p.errorColumn()})
				continue
			}
			rows = append(rows, []string{d.Mirror, p.Topic, fmt.Sprint(p.Partition),
				offsetText(p.SourceOffset), offsetText(p.DestinationOffset), offsetText(p.Lag), durationText(p.TimeLagMs),
				p.State, epochText(p.LastMirrorEpoch), offsetText(p.VerifiedOffset), p.errorColumn()})
		}
	}
	if len(rows) > 0 {
		header := describeHeader
		if c.o.failed {
			header = failedHeader
		}
		if err := writeTable(c.out, header, rows); err != nil {
			return err
		}
	}
	for _, n := range notes {
		fmt.Fprintln(c.out, n)
	}
	if len(descs) == 0 {
		fmt.Fprintln(c.out, "No cluster mirrors.")
	}
	return nil
}

// buildDescriptions flattens and sorts a describe response, keeping the
// partitions whose topic matches one of filter (all when empty) and, when
// failedOnly, whose state is FAILED.
func buildDescriptions(resp *admin.DescribeClusterMirrorsResponse, filter []*regexp.Regexp, failedOnly bool) []mirrorDesc {
	out := make([]mirrorDesc, 0, len(resp.Mirrors))
	for _, m := range resp.Mirrors {
		d := mirrorDesc{
			Mirror:          m.MirrorName,
			SourceBootstrap: deref(m.SourceBootstrap),
			SourceClusterID: deref(m.SourceClusterId),
			ErrorCode:       m.ErrorCode,
			Error:           deref(m.ErrorMessage),
			Partitions:      []partitionDesc{},
		}
		for _, t := range m.Topics {
			if len(filter) > 0 && !matchesAny(filter, t.TopicName) {
				continue
			}
			for _, p := range t.Partitions {
				st := statemachine.State(p.State)
				// A partition whose source is unreachable is failing even while a
				// retry has moved it out of FAILED.
				if failedOnly && st != statemachine.Failed && p.SourceUnreachableSince < 0 {
					continue
				}
				d.Partitions = append(d.Partitions, partitionDesc{
					Topic:                  t.TopicName,
					Partition:              p.PartitionIndex,
					State:                  st.String(),
					SourceOffset:           p.SourceOffset,
					DestinationOffset:      p.DestinationOffset,
					Lag:                    lag(p.SourceOffset, p.DestinationOffset, p.SourceUnreachableSince),
					LastMirrorEpoch:        p.LastMirrorEpoch,
					LastMirrorOffset:       p.LastMirrorOffset,
					RetryAttempt:           p.RetryAttempt,
					ErrorCode:              p.ErrorCode,
					Error:                  deref(p.ErrorMessage),
					TimeLagMs:              p.TimeLagMs,
					LastFetch:              timeText(p.LastFetchTimestamp),
					SourceErrorCode:        p.SourceErrorCode,
					SourceError:            deref(p.SourceErrorMessage),
					SourceUnreachableSince: timeText(p.SourceUnreachableSince),
					SourceOffsetTime:       timeText(p.SourceOffsetTimestamp),
					VerifiedOffset:         p.VerifiedOffset,
					Verified:               timeText(p.VerifiedTimestamp),
				})
			}
		}
		sort.Slice(d.Partitions, func(i, j int) bool {
			a, b := d.Partitions[i], d.Partitions[j]
			if a.Topic != b.Topic {
				return a.Topic < b.Topic
			}
			return a.Partition < b.Partition
		})
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Mirror < out[j].Mirror })
	return out
}

// epochText prints a leader epoch, "-" when none (-1).
func epochText(e int32) string {
	if e < 0 {
		return "-"
	}
	return fmt.Sprint(e)
}

// lag is max(0, source-destination), or -1 when either offset is unknown or the
// source is unreachable (unreachableSince set: the source offset is stale) (spec
// §15.1: lag is derived client-side).
func lag(src, dst, unreachableSince int64) int64 {
	if src < 0 || dst < 0 || unreachableSince >= 0 {
		return -1
	}
	return max(0, src-dst)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
