package fetcher

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kmirror/kmirror/records"
)

// TestFileLogKafkaDumpLogSegments checks that Kafka's own
// org.apache.kafka.tools.DumpLogSegments (kafka-dump-log.sh) reads what FileLog writes (segments and
// indexes, with deep iteration and index verification). It runs with the jars that
// scripts/kafka/kafka.sh installs (KMIRROR_KAFKA_CLASSPATH, exported by its env file), and
// is required in CI (KMIRROR_REQUIRE_KAFKA=1).
func TestFileLogKafkaDumpLogSegments(t *testing.T) {
	cp := os.Getenv("KMIRROR_KAFKA_CLASSPATH")
	if cp == "" {
		if os.Getenv("KMIRROR_REQUIRE_KAFKA") == "1" {
			t.Fatal("KMIRROR_KAFKA_CLASSPATH is not set: run scripts/kafka/kafka.sh install and source its env file")
		}
		t.Skip("Kafka jars not installed: run scripts/kafka/kafka.sh install and source its env file")
	}
	java, err := exec.LookPath("java")
	require.NoError(t, err, "java is needed to run Kafka's DumpLogSegments")
	class := os.Getenv("KMIRROR_KAFKA_DUMP_LOG_CLASS")
	if class == "" {
		class = "org.apache.kafka.tools.DumpLogSegments"
	}
	dir := t.TempDir()
	l := openFile(t, dir, FileLogOptions{SegmentBytes: 4000, IndexIntervalBytes: 300})
	appendN(t, l, 30)
	require.NoError(t, l.Append(txnBatch(t, l.LogEndOffset(), 5, 77, 3, 2)))
	_, err = l.BumpLeaderEpoch(9)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(ctrlBatch(0, 0, 77, 3, records.ControlAbort))
	require.NoError(t, err)
	_, err = l.AppendAsLeader(ctrlBatch(0, 0, -1, -1, records.ControlMirrorPIDReset))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	var files []string
	for _, p := range segmentFiles(t, dir) {
		files = append(files, p, strings.TrimSuffix(p, ".log")+".index")
	}
	for _, extra := range [][]string{{"--deep-iteration"}, {"--verify-index-only"}, {"--index-sanity-check"}} {
		args := append([]string{"-Xmx256m", "-cp", cp, class, "--files", strings.Join(files, ",")}, extra...)
		out, err := exec.Command(java, args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		s := string(out)
		t.Logf("%v:\n%s", extra, s)
		for _, bad := range []string{"Exception", "Mismatches", "corrupt", "isvalid: false"} {
			require.NotContains(t, s, bad)
		}
		// The tool starts its consecutive-offset check at -1 in every file,
		// so a segment whose base is not 0 always reports "-1 is followed
		// by <base>" (it does so for Kafka's own segments too); any other
		// pair would be a real gap.
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, " is followed by ") {
				require.True(t, strings.HasPrefix(strings.TrimSpace(line), "-1 is followed by "), line)
			}
		}
		if extra[0] == "--deep-iteration" {
			require.Contains(t, s, "endTxnMarker: ABORT")
			require.Contains(t, s, "isTransactional: true")
		}
	}
}
