package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A generation's usage row is its current attempt's, in its conversation,
// and a done row carries its answer's usage and model.
func TestTheUsageRuleHoldsARowToItsAttempt(t *testing.T) {
	used := &ai.Usage{Input: 10, Output: 2, TotalTokens: 12}
	answer := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 20, ConversationID: 1, Kind: "assistant", ByTaskID: 6,
		Model: []ai.Message{{Role: ai.RoleAssistant, Model: "faux-1", Usage: used, Content: ai.Blocks(ai.Text("done"))}}}}
	check := func(row agent.UsageRow, writes ...storage.Write) error {
		o := newOracle()
		o.kinds[6], o.convs[6] = agent.GenerationKindName, 1
		o.attemptStarted(storage.Write{Type: storage.WritePatch, ID: 6, Status: "streaming", State: json.RawMessage(`{"attempt":2}`)})
		return o.usageRow(row, storage.CommitBatch{Kind: storage.BatchMain, Writes: writes}, "task 6's execute", 21)
	}
	good := agent.UsageRow{ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: used}
	if err := check(good, answer); err != nil {
		t.Fatalf("the attempt's own row: %v", err)
	}
	retry := good
	retry.Outcome, retry.Usage = "retry", nil
	if err := check(retry); err != nil {
		t.Fatalf("a retry's row: %v", err)
	}
	other := *used
	other.Output = 3
	for name, row := range map[string]agent.UsageRow{
		"another attempt":      {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 1, Outcome: "done", Usage: used},
		"another conversation": {ConversationID: 2, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: used},
		"other usage":          {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: &other},
		"another model":        {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-2", Attempt: 2, Outcome: "done", Usage: used},
	} {
		var oe *oracleError
		if err := check(row, answer); !errors.As(err, &oe) || oe.Rule != ruleUsageRow {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleUsageRow)
		}
	}
	var oe *oracleError
	if err := check(good); !errors.As(err, &oe) || oe.Rule != ruleUsageRow {
		t.Errorf("a done row without its answer: %v; want a %s violation", err, ruleUsageRow)
	}
}

// A tool call's settlement is held to the usage rows its commit appends:
// one with its status and its output's usage when the output holds usage,
// none otherwise, aborted or not.
func TestAToolSettlementRecordsItsOutputsUsage(t *testing.T) {
	usage := &ai.Usage{Input: 2, Output: 3, TotalTokens: 5}
	settle := func(status string, u *ai.Usage, rows ...agent.UsageRow) storage.CommitBatch {
		state, _ := json.Marshal(map[string]any{"output": agent.ToolOutputState{ToolResultData: agent.ToolResultData{Usage: u}}})
		b := storage.CommitBatch{Kind: storage.BatchMain}
		for _, r := range rows {
			raw, _ := json.Marshal(r)
			addr := agent.UsageList.Address
			b.Writes = append(b.Writes, storage.Write{Type: storage.WriteListAppend, Addr: &addr, Value: raw})
		}
		b.Writes = append(b.Writes, storage.Write{Type: storage.WriteSettle, ID: 8, Status: status, Role: storage.RoleTerminal, State: state})
		return b
	}
	row := func(outcome string, u *ai.Usage) agent.UsageRow {
		return agent.UsageRow{ConversationID: 1, TaskID: 8, Kind: agent.ToolKindName, Outcome: outcome, Usage: u}
	}
	other := row("done", usage)
	other.TaskID = 9
	cases := []struct {
		name   string
		b      storage.CommitBatch
		broken bool
	}{
		{name: "done with its row", b: settle("done", usage, row("done", usage))},
		{name: "aborted with its row", b: settle("aborted", usage, row("aborted", usage))},
		{name: "no usage, no row", b: settle("aborted", nil)},
		{name: "no usage, another call's row", b: settle("done", nil, other)},
		{name: "aborted without its row", b: settle("aborted", usage), broken: true},
		{name: "a row without usage", b: settle("done", nil, row("done", usage)), broken: true},
		{name: "a row of another outcome", b: settle("aborted", usage, row("done", usage)), broken: true},
		{name: "a row of other usage", b: settle("done", usage, row("done", &ai.Usage{Output: 3})), broken: true},
		{name: "two rows", b: settle("done", usage, row("done", usage), row("done", usage)), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[8], o.convs[8] = agent.ToolKindName, 1
			holdsOrBreaks(t, o.toolUsage(tc.b.Writes[len(tc.b.Writes)-1], tc.b, "a test", 20), ruleToolUsage, tc.broken)
		})
	}
}

// A generation's or collapse's usage row names what its commit made of the
// attempt.
func TestTheUsageOutcomeRuleReadsTheCommit(t *testing.T) {
	patch := func(status string) storage.Write {
		return storage.Write{Type: storage.WritePatch, ID: 6, Status: status, State: json.RawMessage(`{}`)}
	}
	settle := func(status, state string) storage.Write {
		return storage.Write{Type: storage.WriteSettle, ID: 6, Status: status, State: json.RawMessage(state)}
	}
	check := func(kind string, method core.Method, outcome string, w storage.Write) error {
		row := agent.UsageRow{TaskID: 6, Kind: kind, Outcome: outcome}
		return newOracle().usageOutcome(core.Invocation{Task: 6, Method: method}, true, row, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}}, "task 6", 9)
	}
	gen, col := agent.GenerationKindName, agent.CollapseKindName
	cases := []struct {
		kind    string
		method  core.Method
		w       storage.Write
		outcome string
	}{
		{gen, core.MethodExecute, settle("done", `{}`), "done"},
		{gen, core.MethodExecute, settle("failed", `{"reason":"the provider refused"}`), "failed"},
		{gen, core.MethodExecute, settle("failed", `{"reason":"overflow: too long"}`), "overflow"},
		{gen, core.MethodExecute, patch("retry_wait"), "retry"},
		{gen, core.MethodRecover, patch("retry_wait"), "interrupted"},
		{gen, core.MethodExecute, patch("deferred"), "deferred"},
		{gen, core.MethodAbort, settle("failed", `{"reason":"aborted"}`), "aborted"},
		{col, core.MethodExecute, settle("failed", `{"failure":"stale"}`), "stale"},
		{col, core.MethodExecute, settle("failed", `{"failure":"summarizer"}`), "failed"},
		{col, core.MethodRecover, patch("retry_wait"), "interrupted"},
	}
	outcomes := []string{"done", "failed", "overflow", "retry", "interrupted", "deferred", "aborted", "stale"}
	for _, c := range cases {
		for _, o := range outcomes {
			err := check(c.kind, c.method, o, c.w)
			if o == c.outcome && err != nil {
				t.Errorf("%s %s %s %s as %q: %v", c.kind, c.method, c.w.Type, c.w.Status, o, err)
			}
			var oe *oracleError
			if o != c.outcome && (!errors.As(err, &oe) || oe.Rule != ruleUsageOutcome) {
				t.Errorf("%s %s %s %s as %q: %v; want %s broken", c.kind, c.method, c.w.Type, c.w.Status, o, err, ruleUsageOutcome)
			}
		}
	}
	// A row another invocation records, or a tool's, is not the rule's.
	if err := newOracle().usageOutcome(core.Invocation{Task: 7}, true, agent.UsageRow{TaskID: 6, Kind: gen, Outcome: "x"}, storage.CommitBatch{Writes: []storage.Write{patch("retry_wait")}}, "task 7", 9); err != nil {
		t.Errorf("another task's commit: %v", err)
	}
}

// An abort records the cut attempt's usage row exactly when the generation
// was streaming.
func TestAnAbortRecordsTheAttemptItCuts(t *testing.T) {
	row := func() storage.Write {
		raw, _ := json.Marshal(agent.UsageRow{TaskID: 6, Kind: agent.GenerationKindName, Outcome: "aborted"})
		a := agent.UsageList.Address
		return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: raw}
	}
	check := func(status string, rows int) error {
		o := newOracle()
		o.kinds[6] = agent.GenerationKindName
		if err := o.abortRows(core.Invocation{}, false, main1(storage.Write{Type: storage.WritePatch, ID: 6, Status: status}), "a host", storage.Range{First: 1, Last: 1}); err != nil {
			t.Fatal(err)
		}
		ws := []storage.Write{}
		for range rows {
			ws = append(ws, row())
		}
		ws = append(ws, storage.Write{Type: storage.WriteSettle, ID: 6, Status: "failed", State: json.RawMessage(`{"reason":"aborted"}`)})
		return o.abortRows(core.Invocation{Task: 6, Method: core.MethodAbort}, true, main1(ws...), "task 6's abort", storage.Range{First: 2, Last: storage.ID(1 + len(ws))})
	}
	for _, ok := range []struct {
		status string
		rows   int
	}{{"streaming", 1}, {"retry_wait", 0}, {"planned", 0}, {"deferred", 0}} {
		if err := check(ok.status, ok.rows); err != nil {
			t.Errorf("%s with %d rows: %v", ok.status, ok.rows, err)
		}
	}
	for _, bad := range []struct {
		status string
		rows   int
	}{{"streaming", 0}, {"retry_wait", 1}, {"streaming", 2}} {
		var oe *oracleError
		if err := check(bad.status, bad.rows); !errors.As(err, &oe) || oe.Rule != ruleUsageOutcome {
			t.Errorf("%s with %d rows: %v; want %s broken", bad.status, bad.rows, err, ruleUsageOutcome)
		}
	}
}

// The usage totals reach a session watch inside usage events only; any
// other value may come as a value event.
func TestUsageTotalsRideUsageEvents(t *testing.T) {
	totals := agent.UsageTotals.Address.String()
	for _, ev := range []core.SessionEvent{
		{Type: core.SessionEventUsage, Addr: totals, Row: json.RawMessage(`{}`), Totals: json.RawMessage(`{}`)},
		{Type: core.SessionEventValue, Addr: agent.BudgetUsedValue.Address.String(), Value: json.RawMessage(`{}`)},
	} {
		o := newOracle()
		if o.sessionEventSeen(ev); o.first != nil {
			t.Errorf("%s event of %s: %v", ev.Type, ev.Addr, o.first)
		}
	}
	o := newOracle()
	o.sessionEventSeen(core.SessionEvent{Type: core.SessionEventValue, Addr: totals, Value: json.RawMessage(`{}`), ReadAt: 9})
	var oe *oracleError
	if !errors.As(o.first, &oe) || oe.Rule != ruleUsageEvents {
		t.Errorf("the totals as a value event: %v; want a %s violation", o.first, ruleUsageEvents)
	}
}

// An execute waits to retry only after its model's answer was a rate
// limit; an answer the oracle did not see served, or a recover's retry,
// is not judged.
func TestARetryFollowsARateLimit(t *testing.T) {
	actor := new(int)
	retry := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 6, Status: "retry_wait"}}}
	check := func(kind string, served bool, m core.Method) error {
		o := newOracle()
		o.kinds[6] = agent.CollapseKindName
		o.actor = func() any { return actor }
		if served {
			o.served(kind)
		}
		return o.retriesCaused(core.Invocation{Task: 6, Method: m}, true, retry, "task 6's "+string(m), storage.Range{First: 9, Last: 9})
	}
	for _, tc := range []struct {
		kind   string
		served bool
		m      core.Method
	}{
		{"rate-limited", true, core.MethodExecute}, {"fail", false, core.MethodExecute},
		{"", true, core.MethodExecute}, {"fail", true, core.MethodRecover},
	} {
		if err := check(tc.kind, tc.served, tc.m); err != nil {
			t.Errorf("%q served %v, %s: %v", tc.kind, tc.served, tc.m, err)
		}
	}
	for _, kind := range []string{"fail", "aborted", "text"} {
		var oe *oracleError
		if err := check(kind, true, core.MethodExecute); !errors.As(err, &oe) || oe.Rule != ruleRetryCause {
			t.Errorf("a retry after %q: %v; want a %s violation", kind, err, ruleRetryCause)
		}
	}
}
