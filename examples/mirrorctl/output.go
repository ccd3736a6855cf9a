package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/admin"
)

// Table headers (spec §14.7, §14.8).
var (
	listHeader     = []string{"MIRROR", "TOPICS", "SOURCE-CLUSTER-ID", "SOURCE-BOOTSTRAP-SERVER"}
	describeHeader = []string{"MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "TIME-LAG", "STATE", "LME", "VERIFIED", "ERROR"}
	failedHeader   = []string{"MIRROR", "TOPIC", "PARTITION", "RETRY", "STATE", "ERROR"}
)

// listEntry is one mirror of --list --output json.
type listEntry struct {
	Mirror          string   `json:"mirror"`
	TopicCount      int32    `json:"topicCount"`
	Topics          []string `json:"topics"`
	SourceClusterID string   `json:"sourceClusterId"`
	SourceBootstrap string   `json:"sourceBootstrap"`
}

// mirrorDesc is one mirror of --describe --output json.
type mirrorDesc struct {
	Mirror          string          `json:"mirror"`
	SourceBootstrap string          `json:"sourceBootstrap"`
	SourceClusterID string          `json:"sourceClusterId"`
	ErrorCode       int16           `json:"errorCode,omitempty"`
	Error           string          `json:"error,omitempty"`
	Partitions      []partitionDesc `json:"partitions"`
}

// partitionDesc is one partition of a mirrorDesc.
type partitionDesc struct {
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	State             string `json:"state"`
	SourceOffset      int64  `json:"sourceOffset"`
	DestinationOffset int64  `json:"destinationOffset"`
	Lag               int64  `json:"lag"`
	LastMirrorEpoch   int32  `json:"lastMirrorEpoch"`
	LastMirrorOffset  int64  `json:"lastMirrorOffset"`
	RetryAttempt      int16  `json:"retryAttempt"`
	ErrorCode         int16  `json:"errorCode,omitempty"`
	Error             string `json:"error,omitempty"`
	// TimeLagMs is the age of the oldest unmirrored source record, -1 when unknown.
	TimeLagMs int64 `json:"timeLagMs"`
	// LastFetch is when the last fetch response was processed (RFC 3339), "" for none.
	LastFetch string `json:"lastFetch,omitempty"`
	// SourceErrorCode and SourceError are the cause of an unreachable source.
	SourceErrorCode        int16  `json:"sourceErrorCode,omitempty"`
	SourceError            string `json:"sourceError,omitempty"`
	SourceUnreachableSince string `json:"sourceUnreachableSince,omitempty"`
	// SourceOffsetTime is when sourceOffset was read (RFC 3339), "" when unknown.
	SourceOffsetTime string `json:"sourceOffsetTime,omitempty"`
	// VerifiedOffset is how far the fidelity check found the copy identical to the
	// source (-1 before the first check); Verified when it last reached the source.
	VerifiedOffset int64  `json:"verifiedOffset"`
	Verified       string `json:"verified,omitempty"`
}

// errorColumn is the ERROR cell of a partition: its own error, else the cause of an
// unreachable source, else "-".
func (p partitionDesc) errorColumn() string {
	switch {
	case p.ErrorCode != 0:
		return codeText(admin.Code(p.ErrorCode), p.Error)
	case p.SourceErrorCode != 0:
		msg := fmt.Sprintf("source unreachable since %s: %s", p.SourceUnreachableSince, codeText(admin.Code(p.SourceErrorCode), p.SourceError))
		if p.Error != "" {
			msg += "; " + p.Error
		}
		return msg
	case p.Error != "":
		return p.Error // the reason of a FAILED state
	}
	return "-"
}

// durationText prints a time lag in milliseconds, "-" when unknown (negative).
func durationText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// timeText renders a Unix-millisecond timestamp as RFC 3339 UTC, "" when unknown.
func timeText(ms int64) string {
	if ms < 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// opResult is the JSON result of create, delete and the topic operations.
type opResult struct {
	Mirror    string        `json:"mirror"`
	Operation string        `json:"operation"`
	Patterns  []string      `json:"patterns,omitempty"`
	Topics    []topicResult `json:"topics"`
	// DryRun says the server only planned the operation (--dry-run): nothing changed.
	DryRun bool `json:"dryRun,omitempty"`
}

// topicResult is one topic's outcome of a topic operation.
type topicResult struct {
	Topic     string `json:"topic"`
	ErrorCode int16  `json:"errorCode"`
	ErrorName string `json:"errorName,omitempty"`
	Error     string `json:"error,omitempty"`
	// Note explains a success that changed nothing ("is already stopped").
	Note string `json:"note,omitempty"`
	// State is the actual state every partition reached, with --wait.
	State string `json:"state,omitempty"`
	// Plan is, per partition, what the operation did or (--dry-run) would do (plan.go).
	Plan []planRow `json:"plan,omitempty"`
}

func newTopicResult(topic string, code int16, msg *string) topicResult {
	r := topicResult{Topic: topic, ErrorCode: code, Error: deref(msg)}
	if code != 0 {
		r.ErrorName = admin.Code(code).String()
	}
	return r
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints an aligned table like kafka-consumer-groups.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// offsetText prints an offset or lag, "-" when unknown (-1).
func offsetText(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
