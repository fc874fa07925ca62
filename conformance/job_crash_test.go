package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
)

// crashShell is the fake machine the crash scenarios' shell tools run on.
var crashShell = proc.Scripts{Commands: map[string]proc.Script{
	"make test": {Chunks: []proc.Chunk{
		{AfterMs: 500, Stream: proc.StreamStdout, Data: "part one\n"},
		{AfterMs: 2500, Stream: proc.StreamStdout, Data: "part two\n"},
	}},
}}

// A bash call that outlives its budget, cut at every commit (§8.3, §8.6):
// the call creates its job and records it, waits a second, settles
// delegated with the output so far, the turn ends, and the job's end
// appends its notice. A restart loses nothing: the call (safe to replay)
// finds the job it recorded and never makes a second one, and a delegated
// job gets exactly one notice, whether it exited or was lost.
var bashBudgetCrashes = crashScenario{
	test:  "TestCrashPointsOfABashCallPastItsBudget",
	first: crashBashPastBudget,
	transcript: []string{"user:run the tests", "system:", "assistant:call bash",
		"tool_result:part one\n<harness>\n[info] still running as job 22 after 1s; use the job tool's wait, status, output or stop with id 22\n</harness>",
		"assistant:they are running",
		"notice:Job 22 (make test) exited with code 0.\nOutput (use the job tool's output command with id 22 for all of it):\npart one\npart two\n"},
	results:    []agent.InputStatus{agent.InputDone},
	background: crashJobsEnd,
	after:      crashOneJobOneNotice,
}

func TestCrashPointsOfABashCallPastItsBudget(t *testing.T) { exploreCrashPoints(t, bashBudgetCrashes) }

func crashBashPastBudget(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord) {
	r.first.Storage = store
	a, err := openCrashAgent(ctx, s, &r.first, nil)
	if errors.Is(err, fault.ErrCrashed) {
		return
	}
	crashMust(0, err)
	c := a.h.Root()
	crashed := func(what string, err error) bool {
		if err != nil && !errors.Is(err, fault.ErrCrashed) {
			r.problems = append(r.problems, fmt.Sprintf("the first process's %s failed without a crash: %v", what, err))
		}
		return err != nil
	}
	cfg := crashMust(c.Settings())
	if crashed("budget", cfg.Set(ctx, map[string]any{"budgetMs": 1000})) {
		r.end(ctx, a, c)
		return
	}
	args, _ := json.Marshal(map[string]string{"command": "make test"})
	a.faux.SetResponses(faux.Reply(faux.ToolCall("call-test", agent.BashToolName, string(args))).WithStop(ai.StopToolUse),
		faux.Reply(faux.Text("they are running")))
	id, err := c.Accept(ctx, ai.PlainText("run the tests"), agent.AcceptOptions{})
	if !crashed("accept", err) {
		r.inputs = append(r.inputs, id)
		if _, err := c.Drive(ctx); !crashed("drive", err) {
			crashJobsEnd(ctx, s, a.h) // the job runs on in the background
		}
	}
	r.end(ctx, a, c)
}

// crashJobsEnd waits, in virtual time and at most a minute, until no job
// is live: the job's end (and its notice) happen in the background.
func crashJobsEnd(ctx context.Context, s *sim.Sim, h *agent.Harness) {
	live := true
	for range 600 {
		jobs, err := h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: agent.JobKindName, Live: &live})
		if err != nil || len(jobs.Items) == 0 || s.Runtime().Sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

// crashOneJobOneNotice: at most one job (the call made it once), and a
// delegated job is terminal with exactly one notice; one the call still
// waited for has none.
func crashOneJobOneNotice(ctx context.Context, h *agent.Harness) []string {
	var problems []string
	store := h.Store()
	jobs := crashMust(store.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, Kind: agent.JobKindName})).Items
	if len(jobs) > 1 {
		problems = append(problems, fmt.Sprintf("%d jobs; the bash call makes its job once", len(jobs)))
	}
	delegated := map[ID]bool{}
	for _, e := range crashMust(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: 1, Kind: core.ToolResultKind.Kind()})).Items {
		var d agent.ToolResultData
		if json.Unmarshal(e.Data, &d) == nil && d.Delegated != 0 {
			delegated[d.Delegated] = true
		}
	}
	notices := map[ID]int{}
	for _, e := range crashMust(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: 1, Kind: core.NoticeKind.Kind()})).Items {
		var d agent.JobNoticeData
		if json.Unmarshal(e.Data, &d) == nil {
			notices[d.Job]++
		}
	}
	for _, j := range jobs {
		want := 0
		if delegated[j.ID] {
			want = 1
		}
		switch {
		case j.Live():
			problems = append(problems, fmt.Sprintf("job %d is still %s after the restarted process's drives", j.ID, j.Status))
		case notices[j.ID] != want:
			problems = append(problems, fmt.Sprintf("job %d (%s, delegated %v) has %d notices; want %d", j.ID, j.Status, delegated[j.ID], notices[j.ID], want))
		}
	}
	return problems
}
