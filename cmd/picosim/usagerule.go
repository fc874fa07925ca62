package main

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleUsageRow: a generation's usage row is its current attempt's (§8.2):
// the attempt its last start (a patch to streaming) numbered, in its own
// conversation; a done attempt's row carries the usage and model of the
// answer its commit writes.
const ruleUsageRow oracleRule = "usage-row-is-its-attempts"

// attemptStarted notes the attempt a generation's patch to streaming
// starts.
func (o *oracle) attemptStarted(w storage.Write) {
	var st struct {
		Attempt int `json:"attempt"`
	}
	if w.Status == "streaming" && json.Unmarshal(w.State, &st) == nil && st.Attempt > 0 {
		o.attempts[w.ID] = st.Attempt
	}
}

// resyncAttempts reads the generations' current attempts, and theirs and
// the jobs' statuses, from a restarted process's store, which may hold
// starts the oracle never saw commit.
func (o *oracle) resyncAttempts(tasks []*storage.Task) {
	for _, t := range tasks {
		switch t.Kind {
		case agent.GenerationKindName:
			o.attemptStarted(storage.Write{Status: "streaming", ID: t.ID, State: t.State})
			o.statuses[t.ID] = t.Status
		case agent.JobKindName:
			o.statuses[t.ID] = t.Status
		}
	}
}

// usageRow holds a generation's usage row, appended at seq in batch b, to
// the rule.
func (o *oracle) usageRow(row agent.UsageRow, b storage.CommitBatch, by string, seq storage.ID) error {
	if row.Kind != agent.GenerationKindName || o.kinds[row.TaskID] != agent.GenerationKindName {
		return nil
	}
	if attempt, known := o.attempts[row.TaskID]; known && row.Attempt != attempt {
		return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as attempt %d; its current attempt is %d", by, row.TaskID, seq, row.Attempt, attempt))
	}
	if conv := o.convs[row.TaskID]; row.ConversationID != conv {
		return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d in conversation %d; it is conversation %d's", by, row.TaskID, seq, row.ConversationID, conv))
	}
	if row.Outcome != "done" {
		return nil
	}
	for _, w := range b.Writes {
		if w.Type != storage.WriteEntry || w.Entry == nil || w.Entry.ByTaskID != row.TaskID || w.Entry.Kind != "assistant" || len(w.Entry.Model) == 0 {
			continue
		}
		if m := w.Entry.Model[0]; !reflect.DeepEqual(m.Usage, row.Usage) || m.Model != row.Model {
			return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as %+v of %q; its answer %d used %+v of %q",
				by, row.TaskID, seq, row.Usage, row.Model, w.Entry.ID, m.Usage, m.Model))
		}
		return nil
	}
	return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as done, in a commit without its answer", by, row.TaskID, seq))
}

// ruleToolUsage: a tool call's settlement records the usage its output
// holds (§9.3), whatever it ended as: one usage row of the call, in the
// same commit, with the settlement's status as its outcome and the
// output's usage, and none when the output holds none.
const ruleToolUsage oracleRule = "tool-usage-row-is-its-output"

// toolUsage holds w, a settlement of a tool call at seq in batch b, to
// the rule.
func (o *oracle) toolUsage(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.ToolKindName {
		return nil
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
		return nil
	}
	var rows []agent.UsageRow
	for _, x := range b.Writes {
		var row agent.UsageRow
		if x.Type == storage.WriteListAppend && x.Addr != nil && *x.Addr == agent.UsageList.Address &&
			json.Unmarshal(x.Value, &row) == nil && row.TaskID == w.ID {
			rows = append(rows, row)
		}
	}
	want := 0
	if st.Output.Usage != nil {
		want = 1
	}
	if len(rows) != want {
		return o.fail(broke(ruleToolUsage, "%s settled tool call %d %s at %d with usage %+v and %d usage rows of it in its commit; want %d",
			by, w.ID, w.Status, seq, st.Output.Usage, len(rows), want))
	}
	if want == 0 {
		return nil
	}
	if r := rows[0]; r.Kind != agent.ToolKindName || r.Outcome != w.Status || r.ConversationID != o.convs[w.ID] || !reflect.DeepEqual(r.Usage, st.Output.Usage) {
		return o.fail(broke(ruleToolUsage, "%s settled tool call %d %s at %d with usage %+v; its row says %s, %s, conversation %d, %+v",
			by, w.ID, w.Status, seq, st.Output.Usage, r.Kind, r.Outcome, r.ConversationID, r.Usage))
	}
	return nil
}

// ruleUsageOutcome: a generation's or collapse's usage row names what its
// attempt came to, as the commit that records it says (§8.2): an abort's
// row "aborted"; a retry a restart forced (the recover's patch to
// retry_wait) "interrupted", one a rate limit forced "retry"; a deferred
// answer "deferred"; a settlement done "done"; one failed "overflow" when
// a collapse took the turn over, "stale" when a newer head made the
// summary moot, else "failed".
const ruleUsageOutcome oracleRule = "usage-row-names-its-outcome"

// usageOutcome holds a generation's or collapse's usage row, appended at
// seq in batch b by its own invocation inv, to the rule.
func (o *oracle) usageOutcome(inv core.Invocation, byTask bool, row agent.UsageRow, b storage.CommitBatch, by string, seq storage.ID) error {
	if !byTask || inv.Task != row.TaskID || row.Kind != agent.GenerationKindName && row.Kind != agent.CollapseKindName {
		return nil
	}
	var w *storage.Write
	for i := range b.Writes {
		if x := &b.Writes[i]; (x.Type == storage.WritePatch || x.Type == storage.WriteSettle) && x.ID == row.TaskID {
			w = x
		}
	}
	if w == nil {
		return nil
	}
	var st struct {
		Reason  string `json:"reason"`
		Failure string `json:"failure"`
	}
	_ = json.Unmarshal(w.State, &st)
	var want string
	switch {
	case inv.Method == core.MethodAbort:
		want = "aborted"
	case w.Type == storage.WritePatch && w.Status == "retry_wait" && inv.Method == core.MethodRecover:
		want = "interrupted"
	case w.Type == storage.WritePatch && w.Status == "retry_wait":
		want = "retry"
	case w.Type == storage.WritePatch && w.Status == "deferred":
		want = "deferred"
	case w.Type == storage.WriteSettle && w.Status == "done":
		want = "done"
	case w.Type == storage.WriteSettle && w.Status == "failed" && strings.HasPrefix(st.Reason, "overflow:"):
		want = "overflow"
	case w.Type == storage.WriteSettle && w.Status == "failed" && st.Failure == agent.CollapseStale:
		want = agent.CollapseStale
	case w.Type == storage.WriteSettle && w.Status == "failed":
		want = "failed"
	default:
		return nil
	}
	if row.Outcome != want {
		return o.fail(broke(ruleUsageOutcome, "%s recorded %s %d's usage at %d as %q, in a commit that %s it %s; want %q",
			by, row.Kind, row.TaskID, seq, row.Outcome, map[storage.WriteType]string{storage.WritePatch: "patches", storage.WriteSettle: "settles"}[w.Type], w.Status, want))
	}
	return nil
}

// abortRows holds batch b's generation settlements by their abort to the
// outcome rule's other half: an abort records the usage row of the attempt
// it cuts short (outcome aborted) exactly when the generation was
// streaming, an attempt under way; one waiting to start or retry has none
// to record. Then it notes each generation's status as b leaves it.
func (o *oracle) abortRows(inv core.Invocation, byTask bool, b storage.CommitBatch, by string, r storage.Range) error {
	for i, w := range b.Writes {
		status, known := o.statuses[w.ID]
		if !byTask || inv.Method != core.MethodAbort || w.Type != storage.WriteSettle || w.ID != inv.Task || !known || o.kinds[w.ID] != agent.GenerationKindName {
			continue
		}
		rows := 0
		for _, x := range b.Writes {
			var row agent.UsageRow
			if x.Type == storage.WriteListAppend && x.Addr != nil && *x.Addr == agent.UsageList.Address && json.Unmarshal(x.Value, &row) == nil && row.TaskID == w.ID {
				rows++
			}
		}
		if want := b2n(status == "streaming"); rows != want {
			return o.fail(broke(ruleUsageOutcome, "%s settled generation %d, %s, at %d with %d usage rows; want %d",
				by, w.ID, status, r.First+storage.ID(i), rows, want))
		}
	}
	for _, w := range b.Writes {
		switch {
		case w.Type == storage.WriteTask && w.Task != nil && (w.Task.Kind == agent.GenerationKindName || w.Task.Kind == agent.JobKindName):
			o.statuses[w.Task.ID] = w.Task.Status
		case (w.Type == storage.WritePatch || w.Type == storage.WriteSettle) && w.Status != "" && (o.kinds[w.ID] == agent.GenerationKindName || o.kinds[w.ID] == agent.JobKindName):
			o.statuses[w.ID] = w.Status
		}
	}
	return nil
}

// b2n is 1 for true, 0 for false.
func b2n(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ruleUsageEvents: a session watch delivers the usage totals with the
// usage events that change them, each carrying the totals as its batch
// left them, and never as a value event of their own (core.Watched): the
// totals would reach a client twice per row.
const ruleUsageEvents oracleRule = "usage-totals-ride-usage-events"

// sessionEventSeen holds one event a session watch delivered to the rule.
func (o *oracle) sessionEventSeen(ev core.SessionEvent) {
	if ev.Type == core.SessionEventValue && ev.Addr == agent.UsageTotals.Address.String() {
		_ = o.fail(broke(ruleUsageEvents, "a session watch delivered the usage totals as a value event at %d; they ride the usage events", ev.ReadAt))
	}
}

// ruleRetryCause: an attempt waits to retry (retry_wait, from its own
// execute) only after a rate limit (§8.2): a generation or a collapse's
// summarizer whose answer failed otherwise settles failed. The program's
// answers say what each asker was served (served, on the asker's actor);
// a recover's retry after a restart is not an execute's.
const ruleRetryCause oracleRule = "a-retry-follows-a-rate-limit"

// served notes the kind of answer the current actor's request got.
func (o *oracle) served(kind string) {
	if o.actor != nil {
		o.servedTo[o.actor()] = kind
	}
}

// retriesCaused holds batch b's patches to retry_wait by their own execute
// to the rule.
func (o *oracle) retriesCaused(inv core.Invocation, byTask bool, b storage.CommitBatch, by string, r storage.Range) error {
	if !byTask || inv.Method != core.MethodExecute || o.actor == nil {
		return nil
	}
	kind, known := o.servedTo[o.actor()]
	for i, w := range b.Writes {
		if w.Type != storage.WritePatch || w.ID != inv.Task || w.Status != "retry_wait" || !known || kind == "" {
			continue
		}
		if kind != "rate-limited" {
			return o.fail(broke(ruleRetryCause, "%s patched %s %d to retry_wait at %d after its model answered %s, no rate limit",
				by, o.kinds[w.ID], w.ID, r.First+storage.ID(i), kind))
		}
	}
	return nil
}

// lastAttemptSeeds is how often a drawn program stops the process while a
// generation's last attempt waits for its answer: every ninth seed from 8,
// not the golden traces' seed 1.
const lastAttemptSeeds = 9

// drawLastAttemptRestarts has such a program begin with a turn of the root
// whose model is rate-limited twice and then slow to answer, and a reopen
// once the third attempt, the last the retry policy allows, has begun and
// before anything streamed: the recovered generation has no attempt left
// and fails instead of retrying. The sleep covers the two retry waits (the
// swarm's delay and its double).
func drawLastAttemptRestarts(p *program, seed uint64) {
	if seed%lastAttemptSeeds != 8 {
		return
	}
	delay := p.retry
	if delay == 0 {
		delay = int(time.Second / time.Millisecond) // agent's default
	}
	p.lines = append([]progLine{{op: "respond", args: []string{"rate-limited"}}, {op: "respond", args: []string{"rate-limited"}},
		{op: "respond", args: []string{"slow", "5000", "slowly"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}},
		{op: "sleep", args: []string{strconv.Itoa(3*delay + 100)}}, {op: "reopen"}, {op: "drive", args: []string{"c0"}}}, p.lines...)
}
