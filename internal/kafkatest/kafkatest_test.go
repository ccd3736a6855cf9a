package kafkatest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTB records Skip and Fatal instead of stopping the goroutine, so the env logic can be
// tested without real Kafka.
type fakeTB struct {
	testing.TB
	skipped  bool
	failed   bool
	msg      string
	cleanups []func()
}

type stop struct{}

func (f *fakeTB) Helper() {}

// Cleanup records fn; run calls the recorded functions last-first, as testing does.
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fakeTB) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
	panic(stop{})
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	panic(stop{})
}

// run calls fn with f and swallows the stop panic of Skip and Fatalf.
func (f *fakeTB) run(fn func(testing.TB)) {
	defer func() {
		for i := len(f.cleanups) - 1; i >= 0; i-- {
			f.cleanups[i]()
		}
		f.cleanups = nil
	}()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
		}
	}()
	fn(f)
}

func TestBootstrap(t *testing.T) {
	t.Setenv(EnvA, " 127.0.0.1:1, 127.0.0.1:2,,127.0.0.1:3 ")
	t.Setenv(EnvB, "127.0.0.1:9")
	a, err := Bootstrap(A)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, a)
	b, err := Bootstrap(B)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:9"}, b)

	t.Setenv(EnvB, " , ")
	_, err = Bootstrap(B)
	require.ErrorIs(t, err, ErrNotRunning)
	t.Setenv(EnvB, "")
	_, err = Bootstrap(B)
	require.ErrorIs(t, err, ErrNotRunning)
}

func TestMissingEnvSkipsOrFails(t *testing.T) {
	cases := []struct {
		name, ci, require string
		wantFail          bool
	}{
		{"local", "", "", false},
		{"ci without require", "true", "", false},
		{"require without ci", "", "1", false},
		{"ci and require", "true", "1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvA, "")
			t.Setenv(EnvB, "")
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvRequire, tc.require)
			require.Equal(t, tc.wantFail, Required())

			for _, fn := range []func(testing.TB){
				func(tb testing.TB) { ClusterA(tb) },
				func(tb testing.TB) { ClusterB(tb) },
			} {
				f := &fakeTB{}
				f.run(fn)
				require.Equal(t, tc.wantFail, f.failed, f.msg)
				require.Equal(t, !tc.wantFail, f.skipped, f.msg)
				require.Contains(t, f.msg, "scripts/kafka/kafka.sh start")
			}

			f := &fakeTB{}
			f.run(RequireCI)
			require.Equal(t, tc.wantFail, f.failed, f.msg)
			require.False(t, f.skipped)
		})
	}
}

func TestPresentEnvNeitherSkipsNorFails(t *testing.T) {
	t.Setenv("CI", "true")
	t.Setenv(EnvRequire, "1")
	t.Setenv(EnvA, "127.0.0.1:1")
	t.Setenv(EnvB, "127.0.0.1:2")
	t.Setenv(EnvClasspath, "/nonexistent.jar")
	t.Setenv(EnvWorkdir, t.TempDir())
	f := &fakeTB{}
	f.run(func(tb testing.TB) {
		RequireCI(tb)
		require.Equal(t, []string{"127.0.0.1:1"}, ClusterA(tb))
		require.Equal(t, []string{"127.0.0.1:2"}, ClusterB(tb))
	})
	require.False(t, f.failed, f.msg)
	require.False(t, f.skipped, f.msg)
}

func TestParseBatchesRejectsGarbage(t *testing.T) {
	raw := make([]byte, 70)
	raw[11] = 58 // length 58: one 70-byte batch
	raw[16] = 1  // magic 1
	_, err := parseBatches(raw)
	require.ErrorIs(t, err, errBadBatch)

	raw[16] = 2
	_, err = parseBatches(raw)
	require.ErrorIs(t, err, errBadBatch, "CRC of zeroes must not match")

	// A partial trailing batch is not an error.
	got, err := parseBatches(raw[:65])
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestClusterCSkipsOrFails(t *testing.T) {
	t.Setenv(EnvC, "")
	t.Setenv("CI", "true")
	t.Setenv(EnvRequire, "1")
	for _, req := range []string{"", "1"} {
		t.Setenv(EnvRequireC, req)
		f := &fakeTB{}
		f.run(func(tb testing.TB) { ClusterC(tb) })
		require.Equal(t, req == "1", f.failed, "%s=%q: %s", EnvRequireC, req, f.msg)
		require.Equal(t, req != "1", f.skipped, "%s=%q", EnvRequireC, req)
		require.Contains(t, f.msg, "KMIRROR_KAFKA_CLUSTERS=c")
	}
	t.Setenv(EnvC, "127.0.0.1:7")
	c, err := Bootstrap(C)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:7"}, c)
	require.Equal(t, "C", C.String())
}
