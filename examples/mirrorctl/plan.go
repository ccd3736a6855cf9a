package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/admin"
	"github.com/kmirror/kmirror/statemachine"
)

// planOpts are the plan flags of the lifecycle actions (version 1 of their RPCs).
type planOpts struct {
	// dryRun sends ValidateOnly: the server answers the plan and changes nothing.
	dryRun bool
	// allowTruncation lets a start (or a recover) remove records written on this site.
	allowTruncation bool
}

// registerPlanFlags adds --dry-run and --allow-truncation to fs.
func registerPlanFlags(fs *flag.FlagSet, p *planOpts) {
	fs.BoolVar(&p.dryRun, "dry-run", false, "with --start, --stop, --pause, --resume or --recover: print what the operation would do,\n"+
		"per partition (state now and after, the LME found, the truncation and the records it removes,\n"+
		"the records written here since the stop that would go, the open transactions a stop aborts),\n"+
		"and change nothing")
	fs.BoolVar(&p.allowTruncation, "allow-truncation", false, "with --start or --recover: allow removing records written on this cluster (a full\n"+
		"truncation of a log with records, or an LME truncation below local writes), within the\n"+
		"plan the request answers; without it such a start or recover is refused with its plan")
}

// validate checks the plan flags against the chosen action.
func (p planOpts) validate(o *options) error {
	lifecycle := o.start || o.stop || o.pause || o.resume || o.recover
	if p.dryRun && !lifecycle {
		return usagef("--dry-run is only valid with --start, --stop, --pause, --resume or --recover")
	}
	if p.allowTruncation && !o.start && !o.recover {
		return usagef("--allow-truncation is only valid with --start or --recover")
	}
	if p.dryRun && o.wait {
		return usagef("--dry-run changes nothing: --wait is not valid with it")
	}
	return nil
}

// needPlanVersion makes sure the server decodes the plan fields of RPC key (version
// 1; AllowTruncation of RecoverMirrorTopics: version 2) before a request that uses
// them is sent: an older server would ignore ValidateOnly and carry the operation out.
func (c *cli) needPlanVersion(ctx context.Context, key int16) error {
	if !c.o.plan.dryRun && !c.o.plan.allowTruncation {
		return nil
	}
	version := int16(1)
	if key == admin.KeyRecoverMirrorTopics && c.o.plan.allowTruncation {
		version = 2
	}
	ok, err := c.cl.ServesVersion(ctx, key, version)
	if err != nil {
		return err
	}
	if !ok {
		name := strconv.Itoa(int(key))
		if api, found := admin.LookupAPI(key); found {
			name = api.Name
		}
		return fmt.Errorf("the server does not serve version %d of %s: --dry-run and --allow-truncation need it; nothing was sent", version, name)
	}
	return nil
}

// planRow is one partition of a plan, in --output json and the plan table.
type planRow struct {
	Partition        int32    `json:"partition"`
	StateNow         string   `json:"stateNow"`
	StateAfter       string   `json:"stateAfter"`
	LastMirrorEpoch  int32    `json:"lastMirrorEpoch"`
	LMECluster       string   `json:"lmeCluster,omitempty"`
	LMEMirror        string   `json:"lmeMirror,omitempty"`
	LogStart         int64    `json:"logStartOffset"`
	LogEnd           int64    `json:"logEndOffset"`
	TruncationOffset int64    `json:"truncationOffset"`
	FullTruncation   bool     `json:"fullTruncation"`
	DivergenceOffset int64    `json:"divergenceOffset"`
	Removed          rangeRow `json:"removed"`
	LocalWrites      rangeRow `json:"localWrites"`
	SourceLogStart   int64    `json:"sourceLogStartOffset"`
	OpenTransactions []txnRow `json:"openTransactions"`
}

// rangeRow is an offset range [from, to) and its data records.
type rangeRow struct {
	From    int64 `json:"fromOffset"`
	To      int64 `json:"toOffset"`
	Records int64 `json:"records"`
}

// txnRow is one open transaction a stop aborts.
type txnRow struct {
	ProducerID    int64 `json:"producerId"`
	ProducerEpoch int16 `json:"producerEpoch"`
	FirstOffset   int64 `json:"firstOffset"`
}

// The wire shape of a plan partition, the same in every lifecycle response.
type (
	wireTxn = struct {
		ProducerId    int64
		ProducerEpoch int16
		FirstOffset   int64
		UnknownTags   kmsg.Tags
	}
	wirePartition[TX any] = struct {
		PartitionIndex       int32
		StateNow             int8
		StateAfter           int8
		LastMirrorEpoch      int32
		LmeClusterId         *string
		LmeMirrorName        *string
		LogStartOffset       int64
		LogEndOffset         int64
		TruncationOffset     int64
		FullTruncation       bool
		DivergenceOffset     int64
		RemovedFromOffset    int64
		RemovedToOffset      int64
		RemovedRecords       int64
		LocalFromOffset      int64
		LocalToOffset        int64
		LocalRecords         int64
		SourceLogStartOffset int64
		OpenTransactions     []TX
		UnknownTags          kmsg.Tags
	}
)

// planRows converts the plan partitions of one response topic.
func planRows[PP ~wirePartition[TX], TX ~wireTxn](ps []PP) []planRow {
	if ps == nil {
		return nil
	}
	out := make([]planRow, 0, len(ps))
	for _, wp := range ps {
		p := wirePartition[TX](wp)
		r := planRow{Partition: p.PartitionIndex, StateNow: statemachine.State(p.StateNow).String(), StateAfter: statemachine.State(p.StateAfter).String(),
			LastMirrorEpoch: p.LastMirrorEpoch, LMECluster: deref(p.LmeClusterId), LMEMirror: deref(p.LmeMirrorName),
			LogStart: p.LogStartOffset, LogEnd: p.LogEndOffset, TruncationOffset: p.TruncationOffset, FullTruncation: p.FullTruncation, DivergenceOffset: p.DivergenceOffset,
			Removed:          rangeRow{From: p.RemovedFromOffset, To: p.RemovedToOffset, Records: p.RemovedRecords},
			LocalWrites:      rangeRow{From: p.LocalFromOffset, To: p.LocalToOffset, Records: p.LocalRecords},
			SourceLogStart:   p.SourceLogStartOffset,
			OpenTransactions: []txnRow{}}
		for _, t := range p.OpenTransactions {
			tx := wireTxn(t)
			r.OpenTransactions = append(r.OpenTransactions, txnRow{ProducerID: tx.ProducerId, ProducerEpoch: tx.ProducerEpoch, FirstOffset: tx.FirstOffset})
		}
		out = append(out, r)
	}
	return out
}

// planHeader is the header of the plan table.
var planHeader = []string{"TOPIC", "PARTITION", "STATE-NOW", "STATE-AFTER", "LME", "LME-FOUND-IN", "LOG", "TRUNCATE-AT",
	"REMOVED-OFFSETS", "REMOVED-RECORDS", "LOCAL-RECORDS-LOST", "OPEN-TXNS"}

// printPlan prints the plan table of results (table output) when there is one to show:
// always with --dry-run, else when a plan removes records or aborts transactions. It
// reports whether the plan was the answer (--dry-run: nothing changed).
func (c *cli) printPlan(op string, results []topicResult) bool {
	show := c.o.plan.dryRun
	for _, r := range results {
		for _, p := range r.Plan {
			show = show || p.Removed.Records > 0 || len(p.OpenTransactions) > 0
		}
	}
	if !show {
		return false
	}
	if c.o.plan.dryRun {
		fmt.Fprintf(c.out, "Dry run of --%s on mirror %q: nothing was changed.\n", op, c.o.mirror)
	} else {
		fmt.Fprintf(c.out, "Plan carried out by --%s on mirror %q:\n", op, c.o.mirror)
	}
	var rows [][]string
	for _, r := range results {
		for _, p := range r.Plan {
			rows = append(rows, planCells(r.Topic, p))
		}
	}
	_ = writeTable(c.out, planHeader, rows)
	return c.o.plan.dryRun
}

// planCells is one row of the plan table.
func planCells(topic string, p planRow) []string {
	where, trunc, removed := "-", "-", "-"
	if p.LMEMirror != "" {
		where = p.LMEMirror + "@" + p.LMECluster
	}
	switch {
	case p.FullTruncation:
		trunc = "FULL"
	case p.TruncationOffset >= 0:
		trunc = strconv.FormatInt(p.TruncationOffset, 10)
	}
	if p.DivergenceOffset >= 0 {
		trunc += fmt.Sprintf(" then %d (divergence)", p.DivergenceOffset)
		if p.TruncationOffset < 0 {
			trunc = fmt.Sprintf("%d (divergence)", p.DivergenceOffset)
		}
	}
	if p.Removed.To > p.Removed.From {
		removed = fmt.Sprintf("[%d,%d)", p.Removed.From, p.Removed.To)
	}
	local := strconv.FormatInt(p.LocalWrites.Records, 10)
	if p.LocalWrites.Records > 0 {
		local += fmt.Sprintf(" [%d,%d)", p.LocalWrites.From, p.LocalWrites.To)
	}
	txns := strconv.Itoa(len(p.OpenTransactions))
	for i, t := range p.OpenTransactions {
		sep := " "
		if i > 0 {
			sep = ","
		}
		txns += fmt.Sprintf("%spid %d@%d", sep, t.ProducerID, t.FirstOffset)
	}
	return []string{topic, strconv.Itoa(int(p.Partition)), p.StateNow, p.StateAfter, epochText(p.LastMirrorEpoch), where,
		fmt.Sprintf("[%d,%d)", p.LogStart, p.LogEnd), trunc, removed, strconv.FormatInt(p.Removed.Records, 10), local, txns}
}
