package metasync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/fetcher"
	"github.com/kmirror/kmirror/mirror/controller"
	"github.com/kmirror/kmirror/mirror/dest"
	"github.com/kmirror/kmirror/mirror/localdest"
)

// aclSource is a fakeSource whose DescribeACLs answers err, or acls.
type aclSource struct {
	fakeSource
	mu    sync.Mutex
	err   error
	acls  []dest.ACL
	calls int
}

func (a *aclSource) DescribeACLs(context.Context) ([]dest.ACL, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	return a.acls, a.err
}

// logRecords is a slog handler keeping every record's level and message.
type logRecords struct {
	mu   sync.Mutex
	recs []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l.recs = append(l.recs, line)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }
func (l *logRecords) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if strings.Contains(r, s) {
			out = append(out, r)
		}
	}
	return out
}

type observed struct {
	active bool
	cycles int64
}

type conditionLog struct{ seen []observed }

func (c *conditionLog) SyncCondition(mirror, condition string, active bool, cycles int64) {
	if mirror == "m" && condition == ConditionACLsSecurityDisabled {
		c.seen = append(c.seen, observed{active, cycles})
	}
}

// A source without an authorizer is warned about once, asked again only every
// ConditionRecheck, and the end of the condition is logged with the skipped cycles.
func TestACLSyncSecurityDisabledWarnsOnce(t *testing.T) {
	ctx := context.Background()
	src := &aclSource{err: fmt.Errorf("%w: describe ACLs: %w (no authorizer)", ErrSourceAdmin, kerr.SecurityDisabled)}
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "127.0.0.1:1"}))
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	logs, obs := &logRecords{}, &conditionLog{}
	now := time.Unix(1000, 0)
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d, Logger: slog.New(logs),
		Observer: obs, ConditionRecheck: time.Minute, Clock: func() time.Time { return now }})
	require.NoError(t, err)
	for range 5 {
		st, err := s.SyncOnce(ctx)
		require.NoError(t, err)
		require.Empty(t, st.Errors, "a condition, not an error per cycle")
		require.Equal(t, []string{ConditionACLsSecurityDisabled}, st.Conditions)
		now = now.Add(10 * time.Second)
	}
	require.Len(t, logs.matching("WARN"), 1, "%v", logs.recs)
	require.Len(t, logs.matching("SECURITY_DISABLED"), 1)
	require.Equal(t, 1, src.calls, "skipped until the recheck")

	now = now.Add(time.Minute) // the recheck asks again: still disabled, no new warning
	_, err = s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, src.calls)
	require.Len(t, logs.matching("WARN"), 1)

	src.mu.Lock() // the source gets an authorizer
	src.err, src.acls = nil, []dest.ACL{{ResourceType: "TOPIC", ResourceName: "t", PatternType: "LITERAL",
		Principal: "User:a", Host: "*", Operation: "READ", PermissionType: "ALLOW"}}
	src.mu.Unlock()
	now = now.Add(time.Minute)
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Conditions)
	require.Equal(t, 1, st.ACLsSynced)
	resumed := logs.matching("ACL sync resumed")
	require.Len(t, resumed, 1)
	require.Contains(t, resumed[0], "skipped_cycles=6")
	require.Equal(t, observed{true, 1}, obs.seen[0])
	require.Equal(t, observed{false, 6}, obs.seen[len(obs.seen)-1])
	require.Len(t, obs.seen, 7)
}

type allConditions struct{ seen []string }

func (c *allConditions) SyncCondition(mirror, condition string, active bool, cycles int64) {
	c.seen = append(c.seen, fmt.Sprintf("%s %v %d", condition, active, cycles))
}

// A failure that repeats from cycle to cycle is logged when it starts and when it is
// resolved, with the number of cycles, while every cycle still reports it in Errors.
func TestSyncErrorLoggedAtStartAndEnd(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{}
	ctl, err := controller.OpenController(ctx, &controller.MemoryControllerLog{})
	require.NoError(t, err)
	require.NoError(t, ctl.CreateMirror(ctx, "m", map[string]string{controller.KeyBootstrapServers: "127.0.0.1:1"}))
	_, err = ctl.StartTopics(ctx, "m", []controller.TopicMeta{{Name: "t", TopicID: uuid(9), NumPartitions: 1}}, nil, nil)
	require.NoError(t, err)
	d := localdest.NewMemory("dst", fetcher.MemoryLogOptions{})
	logs, obs := &logRecords{}, &allConditions{}
	s, err := NewSyncer(SyncConfig{Mirror: "m", Controller: ctl, Source: src, Destination: d, Logger: slog.New(logs), Observer: obs})
	require.NoError(t, err)
	for range 3 {
		st, err := s.SyncOnce(ctx)
		require.NoError(t, err)
		require.Len(t, st.Errors, 1)
		require.ErrorIs(t, st.Errors[0], ErrSourceTopicMissing)
	}
	require.Len(t, logs.matching("WARN mirror sync error"), 1, "%v", logs.recs)

	src.topics = []SourceTopic{{Name: "t", TopicID: uuid(9), Partitions: 1}} // the topic is back
	st, err := s.SyncOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Errors)
	resolved := logs.matching("mirror sync error resolved")
	require.Len(t, resolved, 1)
	require.Contains(t, resolved[0], "cycles=3")
	require.Equal(t, []string{"sync-errors true 1", "sync-errors true 2", "sync-errors true 3", "sync-errors false 3"}, obs.seen)
}
