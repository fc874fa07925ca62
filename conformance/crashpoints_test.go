package conformance_test

// Crash-point exploration (reference §7.4, §10.2): the agent-loop scenario
// runs once to count the batches it commits, then once per crash point with
// the process dying there — after batch k is durable, and for JSONL also in
// the middle of writing batch k (its line torn at a seeded offset). The
// restarted process reopens the files, drives to completion and the run is
// held to three properties: every accepted input ends in exactly one
// terminal result, no id is reused, and no committed batch is lost.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// Limits of the exploration.
const (
	// crashSeed fixes the schedule every crash point of a backend replays,
	// so that batch k is the same batch in every run.
	crashSeed = 1
	// crashTearSeedsMax is how many torn offsets each JSONL batch is cut at.
	crashTearSeedsMax = 3
	// crashRecoveryAnswersMax bounds the model calls the restarted process
	// may make.
	crashRecoveryAnswersMax = 16
	// crashRequestID is the request id of the scenario's first input.
	crashRequestID = "req-go"
	// crashToolTime is how long each tool runs, in virtual time: long
	// enough that the host steers while the tools run.
	crashToolTime = time.Second
)

// crashBackend is a durable backend the crash points run on.
type crashBackend struct {
	name  string
	disk  func(dir string) fault.Disk
	tears bool // whether a commit can die half-written
}

var crashBackends = []crashBackend{
	{name: "jsonl", tears: true, disk: func(dir string) fault.Disk {
		return fault.JSONL(filepath.Join(dir, "s.jsonl"), jsonl.Options{})
	}},
	// A SQLite commit is a transaction: the process dies before it commits
	// (the same durable state as dying after the previous batch) or after.
	{name: "sqlite", disk: func(dir string) fault.Disk {
		path := filepath.Join(dir, "s.db")
		return fault.Disk{Open: func(ctx context.Context) (storage.Storage, error) {
			s, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
	}},
}

// crashScenario is a first process the crash points cut, and what it must
// leave when nothing cuts it.
type crashScenario struct {
	test  string // the test that explores it, for the replay line
	first func(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord)
	// transcript and results are what the uninterrupted run must end with;
	// sorted orders tool results that may settle in either order.
	transcript []string
	results    []agent.InputStatus
	sorted     func(transcript []string)
	// background, if set, waits in the restarted process, after its
	// drives, for the background work the scenario started (a drive waits
	// only for foreground work).
	background func(ctx context.Context, s *sim.Sim, h *agent.Harness)
	// after, if set, checks the restarted session once it is idle.
	after func(ctx context.Context, h *agent.Harness) []string
}

// The agent loop's scenario: both tools ran (their results in either
// order: parallel tools settle as they finish), post_tools landed the
// write and then the steer, which joined the turn, and one final answer
// ended it.
var agentLoopCrashes = crashScenario{
	test:  "TestCrashPointsOfTheAgentLoop",
	first: crashFirstProcess,
	transcript: []string{"user:go", "system:", "assistant:call a,call b", "tool_result:a done", "tool_result:b done",
		"notice:note w", "user:focus on b", "assistant:final answer"},
	results: []agent.InputStatus{agent.InputDone, agent.InputDone, agent.InputPlaced},
	sorted: func(tr []string) {
		if len(tr) > 4 && tr[3] > tr[4] {
			tr[3], tr[4] = tr[4], tr[3]
		}
	},
}

func TestCrashPointsOfTheAgentLoop(t *testing.T) { exploreCrashPoints(t, agentLoopCrashes) }

// exploreCrashPoints runs a scenario on every durable backend, once whole
// and once per crash point.
func exploreCrashPoints(t *testing.T, sc crashScenario) {
	for _, b := range crashBackends {
		t.Run(b.name, func(t *testing.T) {
			base := runCrashPoint(t, b, sc, fault.Plan{})
			if t.Failed() {
				t.Fatalf("the scenario fails without a crash; crash points would not tell anything")
			}
			if sc.sorted != nil {
				sc.sorted(base.transcript)
			}
			if diff := cmp.Diff(sc.transcript, base.transcript); diff != "" || base.crash != nil {
				t.Fatalf("the uninterrupted scenario's transcript (-want +got):\n%s", diff)
			}
			if !slices.Equal(sc.results, base.results) {
				t.Fatalf("the uninterrupted scenario's inputs ended %v; want %v", base.results, sc.results)
			}
			explored, tears := 0, 0
			if b.tears {
				tears = crashTearSeedsMax
			}
			for k := 1; k <= base.commits; k++ {
				plans := []fault.Plan{{Faults: []fault.Fault{{Name: fmt.Sprintf("after-%d", k), Kind: fault.Crash, Commit: k, Persist: true}}}}
				for tear := uint32(1); tear <= uint32(tears); tear++ {
					plans = append(plans, fault.Plan{Faults: []fault.Fault{{Name: fmt.Sprintf("torn-%d-%d", k, tear), Kind: fault.Crash, Commit: k, Tear: tear}}})
				}
				for _, plan := range plans {
					t.Run(plan.Faults[0].Name, func(t *testing.T) {
						got := runCrashPoint(t, b, sc, plan)
						switch f := plan.Faults[0]; {
						case got.crash == nil:
							t.Fatalf("%s never fired; the scenario is not deterministic (%d commits before, %d now)", f, base.commits, got.commits)
						case f.Tear != 0 && got.crash.Torn == nil:
							t.Fatalf("%s fired without tearing a line: %+v", f, *got.crash)
						}
					})
					explored++
				}
			}
			t.Logf("%s: %d batches (%d main, %d scratch), %d crash points explored (seed %d, %d torn offsets per batch)",
				b.name, base.commits, base.kinds[storage.BatchMain], base.kinds[storage.BatchScratch],
				explored, crashSeed, tears)
		})
	}
}

// crashOutcome is what one run observed.
type crashOutcome struct {
	commits int                       // commits that reached the first process's handle
	kinds   map[storage.BatchKind]int // of those commits, how many of each batch kind
	crash   *fault.Firing             // the plan's crash, once it fired
	// transcript and results are what the first process saw at its end,
	// when it lived to see it.
	transcript []string
	results    []agent.InputStatus
}

// runCrashPoint runs the scenario in one simulation: the first process
// under plan, then the restarted one, and checks the run. Every violation
// is reported with the command that replays the crash point.
func runCrashPoint(t *testing.T, b crashBackend, sc crashScenario, plan fault.Plan) crashOutcome {
	t.Helper()
	var out crashOutcome
	var problems []string
	s := sim.New(sim.Options{Seed: crashSeed})
	err := s.Run(context.Background(), func(ctx context.Context) {
		r := &crashRecord{}
		first := crashMust(fault.WrapDisk(ctx, s.Runtime(), b.disk(t.TempDir()), plan, s))
		sc.first(ctx, s, first, r)
		out.transcript, out.results = r.transcript, r.results
		out.commits, out.kinds = len(r.first.attempts), map[storage.BatchKind]int{}
		for _, a := range r.first.attempts {
			out.kinds[a.batch.Kind]++
		}
		for _, f := range first.Fired() {
			if f.Kind == fault.Crash {
				out.crash = &f
			}
		}
		r.durable = r.first.durable(out.crash)
		problems = append(problems, r.problems...)
		second := crashMust(first.Restart(ctx, fault.Plan{}))
		problems = append(problems, crashCheckNothingLost(ctx, second, r.durable)...)
		problems = append(problems, crashSecondProcess(ctx, s, sc, second, r)...)
	})
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		t.Errorf("backend %s, seed %d, plan %s:\n  %s\nreplay: go test ./conformance -run '%s/%s/%s$' -v",
			b.name, crashSeed, plan, strings.Join(problems, "\n  "), sc.test, b.name, crashPointName(plan))
	}
	return out
}

// crashPointName is the subtest of the plan's crash point; the run without
// a crash is the backend's test itself, which "^$" selects alone.
func crashPointName(plan fault.Plan) string {
	if len(plan.Faults) == 0 {
		return "^"
	}
	return plan.Faults[0].Name
}

// crashRecord is what both processes committed.
type crashRecord struct {
	first, second crashLedger
	durable       []crashBatch // the first process's batches that are on disk
	inputs        []ID         // the inputs the hosts were told were accepted
	// transcript and results are what the first process read at its end.
	transcript []string
	results    []agent.InputStatus
	problems   []string // what went wrong in the first process
}

// crashLedger sits between a harness and its storage handle and records
// every commit attempt and its outcome, as the process saw it.
type crashLedger struct {
	storage.Storage
	attempts []crashBatch
}

type crashBatch struct {
	batch storage.CommitBatch
	r     storage.Range
	err   error
}

func (l *crashLedger) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := l.Storage.Commit(ctx, b)
	l.attempts = append(l.attempts, crashBatch{batch: b, r: r, err: err})
	return r, err
}

// durable lists the committed batches, with the one a persisted crash hit.
func (l *crashLedger) durable(crash *fault.Firing) []crashBatch {
	var out []crashBatch
	for i, a := range l.attempts {
		switch {
		case a.err == nil:
			out = append(out, a)
		case crash != nil && crash.Persisted && crash.Commit == i+1:
			a.r = storage.Range{First: crash.FirstSeq, Last: crash.FirstSeq + ID(len(a.batch.Writes)) - 1}
			out = append(out, a)
		}
	}
	return out
}

func (l *crashLedger) committed() []crashBatch {
	var out []crashBatch
	for _, a := range l.attempts {
		if a.err == nil {
			out = append(out, a)
		}
	}
	return out
}

// crashAgent opens a harness over store with the scenario's tools and a
// faux provider, and collects what it reports.
type crashAgent struct {
	h       *agent.Harness
	faux    *faux.Provider
	reports []error
}

func openCrashAgent(ctx context.Context, s *sim.Sim, store storage.Storage, running core.Event) (*crashAgent, error) {
	a := &crashAgent{faux: simtest.Must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))}
	var err error
	a.h, err = agent.Open(ctx, store, agent.Options{
		Runtime: s.Runtime(), CheckInvariants: true,
		// One tool may run again after a crash, the other may not: both
		// recoveries are on the crash path.
		// bash and job run their commands on fake processes (crashShell).
		Tools: []agent.Tool{crashTool("a", agent.ReplaySafe, running), crashTool("b", agent.ReplayNever, running),
			agent.BashTool(), agent.JobTool()},
		Env:    proc.New(s.Runtime(), crashShell),
		Models: agent.NewModels(agent.ModelSource{Provider: a.faux, Models: a.faux.Models()}),
		Report: func(err error) { a.reports = append(a.reports, err) },
	})
	return a, err
}

// crashTool sets running (if any) and works for crashToolTime.
func crashTool(name string, replay agent.ReplayPolicy, running core.Event) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: "work " + name,
			Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}}}`)},
		Replay: replay,
		Execute: func(ctx context.Context, _ string, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			if running != nil {
				running.Set()
			}
			if err := rt.Sleep(ctx, rt.Now().Add(crashToolTime)); err != nil {
				return err
			}
			out.Write(name + " done")
			return nil
		},
	}
}

// crashFirstProcess is the scenario: accept an input whose answer calls both
// tools, steer and queue a write while they run, and let the turn finish
// with a final answer. Any step may meet the crash; the process then stops
// where it is, as a dead process does.
func crashFirstProcess(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord) {
	rt := s.Runtime()
	r.first.Storage = store
	running := rt.NewEvent("tools-running") // or the drive returned
	a, err := openCrashAgent(ctx, s, &r.first, running)
	if errors.Is(err, fault.ErrCrashed) {
		return // the root's creation met the crash
	}
	crashMust(0, err)
	a.faux.SetResponses(
		faux.Reply(faux.ToolCall("call-a", "a", `{"v":"a"}`), faux.ToolCall("call-b", "b", `{"v":"b"}`)).WithStop(ai.StopToolUse),
		faux.Reply(faux.Text("final answer")),
	)
	c := a.h.Root()
	// Every call either succeeds or meets the crash, which is the only
	// failure the scenario has.
	crashed := func(what string, err error) bool {
		if err != nil && !errors.Is(err, fault.ErrCrashed) {
			r.problems = append(r.problems, fmt.Sprintf("the first process's %s failed without a crash: %v", what, err))
		}
		return err != nil
	}
	accepted := func(what string) func(id ID, err error) bool {
		return func(id ID, err error) bool {
			if crashed(what, err) {
				return false
			}
			r.inputs = append(r.inputs, id)
			return true
		}
	}
	if accepted("accept")(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{RequestID: crashRequestID})) {
		drove := rt.NewEvent("drive-returned")
		rt.Go(ctx, "drive", func(ctx context.Context) {
			if got, err := c.Drive(ctx); !crashed("drive", err) && got != core.Idle {
				r.problems = append(r.problems, fmt.Sprintf("the first process's drive = %q; want idle", got))
			}
			running.Set()
			drove.Set()
		})
		crashMust(0, running.Wait(ctx))
		if accepted("steer")(c.Steer(ctx, ai.PlainText("focus on b"))) {
			w, _, err := c.Write(ctx, core.NoticeKind, core.EntryDraft{
				Data:  map[string]string{"text": "w"},
				Model: []ai.Message{ai.UserText("note w", 0)},
			})
			accepted("write")(w, err)
		}
		crashMust(0, drove.Wait(ctx))
	}
	r.end(ctx, a, c)
}

// end records what the first process reads at its end, if it can still
// read, and closes it.
func (r *crashRecord) end(ctx context.Context, a *crashAgent, c *agent.Conversation) {
	if page, err := a.h.Entries(ctx, c.ID, storage.Cursor{Limit: storage.PageLimitMax}); err == nil {
		for _, e := range page.Items {
			r.transcript = append(r.transcript, e.Kind+":"+crashSummary(e))
		}
		for _, id := range r.inputs {
			res, _, err := c.Result(ctx, id)
			if err != nil {
				break
			}
			r.results = append(r.results, res.Status)
		}
	}
	if err := a.h.Close(ctx); err != nil && !errors.Is(err, fault.ErrCrashed) {
		panic(err)
	}
}

// crashSecondProcess is the restarted process: the same tools, a model that
// answers whatever it is asked with text, a drive to completion, then one
// more input on the recovered session. It returns the violations found.
func crashSecondProcess(ctx context.Context, s *sim.Sim, sc crashScenario, store *fault.Storage, r *crashRecord) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	r.second.Storage = store
	a, err := openCrashAgent(ctx, s, &r.second, nil)
	if err != nil {
		return []string{fmt.Sprintf("open after restart: %v", err)}
	}
	for i := range crashRecoveryAnswersMax {
		a.faux.AppendResponses(faux.Respond(func(ai.Request) (faux.Step, error) {
			return faux.Reply(faux.Text(fmt.Sprintf("recovered %d", i))), nil
		}))
	}
	// An acceptance whose commit is durable answers its request id with the
	// original input, even when the reply was lost to the crash (§10.2).
	var want agent.Receipt
	for _, b := range r.durable {
		for j, w := range b.batch.Writes {
			var item agent.InboxItem
			if w.Type == storage.WriteListAppend && w.Addr.Namespace == agent.InboxList.Namespace &&
				json.Unmarshal(w.Value, &item) == nil && item.RequestID == crashRequestID {
				want = agent.Receipt{RequestID: crashRequestID, ConversationID: w.Addr.Scope.ID, InputID: b.r.First + ID(j)}
			}
		}
	}
	if got, ok, err := a.h.Acceptance(ctx, crashRequestID); err != nil || ok != (want.InputID != 0) || got != want {
		bad("acceptance(%q) after restart = %+v, %v, %v; want %+v", crashRequestID, got, ok, err, want)
	}
	if got, err := a.h.Drive(ctx); err != nil || got != core.Idle {
		bad("drive after restart = %q, %v; want idle", got, err)
	}
	c := a.h.Root()
	if id, err := c.Accept(ctx, ai.PlainText("after the restart"), agent.AcceptOptions{}); err != nil {
		bad("accept after restart: %v", err)
	} else {
		r.inputs = append(r.inputs, id)
	}
	if got, err := a.h.Drive(ctx); err != nil || got != core.Idle {
		bad("second drive after restart = %q, %v; want idle", got, err)
	}
	if sc.background != nil {
		sc.background(ctx, s, a.h)
	}
	if in := crashMust(a.h.Inspect(ctx)); len(in.Start)+len(in.Inflight) != 0 {
		bad("live tasks after the drives: start %v, inflight %v; want none", crashTaskIDs(in.Start), crashTaskIDs(in.Inflight))
	}
	for _, err := range a.reports {
		bad("the restarted process reported: %v", err)
	}
	all := append(slices.Clone(r.durable), r.second.committed()...)
	problems = append(problems, crashCheckIDs(all, r.durable)...)
	problems = append(problems, crashCheckInputs(ctx, a.h.Store(), c, all, r.inputs)...)
	if sc.after != nil {
		problems = append(problems, sc.after(ctx, a.h)...)
	}
	// Every other conversation with input (a subagent's child) is held to
	// the same: each of its inputs ends exactly once.
	for _, conv := range crashInputConversations(all) {
		if conv != c.ID {
			problems = append(problems, crashCheckInputs(ctx, a.h.Store(), crashMust(a.h.Conversation(ctx, conv)), all, nil)...)
		}
	}
	if err := a.h.Close(ctx); err != nil {
		bad("close: %v", err)
	}
	return problems
}

// crashSummary is an entry's text, or the tool calls it makes.
func crashSummary(e *storage.Entry) string {
	if len(e.Model) == 0 || e.Kind == "system" {
		return ""
	}
	m := e.Model[0]
	if m.Role != ai.RoleAssistant {
		return m.Content.TextOf()
	}
	var parts []string
	for _, b := range m.Content.Blocks {
		switch b.Type {
		case ai.BlockText:
			parts = append(parts, b.Text)
		case ai.BlockToolCall:
			parts = append(parts, "call "+b.Name)
		}
	}
	return strings.Join(parts, ",")
}

func crashTaskIDs(ts []*storage.Task) []ID {
	ids := make([]ID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// crashCheckIDs holds the committed history to its numbering: batches
// follow each other without a gap or an overlap (failed and torn commits consume
// no ids, and the restart continues after the last durable batch), and
// every entry, task and list element has its own id, the sequence of the
// write that created it.
func crashCheckIDs(all, durable []crashBatch) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	last := ID(0)
	seen := map[ID]string{}
	for i, b := range all {
		process := "first"
		if i >= len(durable) {
			process = "restarted"
		}
		n := ID(len(b.batch.Writes))
		if b.r.First != last+1 || b.r.Last != last+n {
			bad("the %s process's batch %d committed at %+v after lastSeq %d; want {%d %d}", process, i+1, b.r, last, last+1, last+n)
		}
		for j, w := range b.batch.Writes {
			seq := b.r.First + ID(j)
			var id ID
			switch {
			case w.Type == storage.WriteEntry:
				id = w.Entry.ID
			case w.Type == storage.WriteTask:
				id = w.Task.ID
			case w.Type == storage.WriteCreateConversation:
				id = w.Conversation.ID
			case w.Type == storage.WriteListAppend:
				id = seq
			default:
				continue
			}
			what := fmt.Sprintf("%s %d (write %d of the %s process's batch %d)", w.Type, id, j+1, process, i+1)
			if id != seq {
				bad("%s has id %d; want its sequence %d", what, id, seq)
			}
			if first, dup := seen[id]; dup {
				bad("%s reuses the id of %s", what, first)
			}
			seen[id] = what
		}
		last = max(last, b.r.Last)
	}
	return problems
}

// crashCheckInputs holds every accepted input to exactly one terminal
// result: the inputs the committed history appended to the inbox are
// exactly those with a result, each result was set terminal once and never
// changed after, and it is placed for a write and done, failed, cancelled
// or stopped for any other mode. Every input a host was told was accepted
// is among them.
func crashCheckInputs(ctx context.Context, store storage.Storage, c *agent.Conversation, all []crashBatch, told []ID) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	modes := map[ID]agent.InputMode{}
	terminal := map[ID]int{}
	for _, b := range all {
		for j, w := range b.batch.Writes {
			switch {
			case w.Addr == nil || w.Addr.Scope != storage.ConversationScope(c.ID):
			case w.Type == storage.WriteListAppend && w.Addr.Namespace == agent.InboxList.Namespace:
				var item agent.InboxItem
				crashMust(0, json.Unmarshal(w.Value, &item))
				modes[b.r.First+ID(j)] = item.Mode
			case w.Addr.Namespace == agent.InputResultValue.Namespace:
				id := ID(crashMust(strconv.ParseInt(w.Addr.Key, 10, 64)))
				if w.Type != storage.WriteValueSet {
					bad("input %d: its result is written by %s; a result is only ever set", id, w.Type)
					continue
				}
				var res agent.InputResult
				crashMust(0, json.Unmarshal(w.Value, &res))
				if terminal[id] > 0 {
					bad("input %d: result set to %q at %d after it was terminal", id, res.Status, b.r.First+ID(j))
				}
				if res.Status.Terminal() {
					terminal[id]++
				}
			}
		}
	}
	for _, id := range told {
		if _, ok := modes[id]; !ok {
			bad("input %d was accepted but no committed batch appended it to the inbox", id)
		}
	}
	page := crashMust(store.ScanValues(ctx, storage.ValueQuery{Scope: storage.ConversationScope(c.ID),
		Namespace: agent.InputResultValue.Namespace, Limit: storage.PageLimitMax}))
	var stored, ids []ID
	for _, kv := range page.Items {
		stored = append(stored, ID(crashMust(strconv.ParseInt(kv.Key, 10, 64))))
	}
	for id := range modes {
		ids = append(ids, id)
	}
	slices.Sort(stored)
	slices.Sort(ids)
	if !slices.Equal(stored, ids) {
		bad("inputs with a stored result %v; want exactly the inputs appended to the inbox %v", stored, ids)
	}
	for _, id := range ids {
		res, ok, err := c.Result(ctx, id)
		switch {
		case err != nil || !ok:
			bad("input %d (%s): no result (%v)", id, modes[id], err)
		case !res.Status.Terminal():
			bad("input %d (%s) ended %q; want a terminal result", id, modes[id], res.Status)
		case (modes[id] == agent.ModeWrite) != (res.Status == agent.InputPlaced):
			bad("input %d (%s) ended %q; a write ends placed, any other input done, failed, cancelled or stopped", id, modes[id], res.Status)
		case terminal[id] != 1:
			bad("input %d (%s) was set terminal %d times; want exactly once", id, modes[id], terminal[id])
		}
	}
	return problems
}

// crashInputConversations lists the conversations whose inbox the
// committed history appended to, ascending.
func crashInputConversations(all []crashBatch) []ID {
	var convs []ID
	for _, b := range all {
		for _, w := range b.batch.Writes {
			if w.Type == storage.WriteListAppend && w.Addr.Namespace == agent.InboxList.Namespace && !slices.Contains(convs, w.Addr.Scope.ID) {
				convs = append(convs, w.Addr.Scope.ID)
			}
		}
	}
	slices.Sort(convs)
	return convs
}

// crashCheckNothingLost compares the restarted store, before anything runs
// on it, with a memory store that committed exactly the first process's
// durable batches: the same lastSeq, and every conversation, entry, task,
// value and list those batches wrote reads back the same.
func crashCheckNothingLost(ctx context.Context, got storage.Storage, durable []crashBatch) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	want := memory.New()
	for _, b := range durable {
		if _, err := want.Commit(ctx, b.batch); err != nil {
			return []string{fmt.Sprintf("the durable history does not commit to memory: %v", err)}
		}
	}
	if got.LastSeq() != want.LastSeq() {
		bad("lastSeq after restart = %d; want %d, the last durable batch's", got.LastSeq(), want.LastSeq())
	}
	var ids []ID
	for id := range want.LastSeq() {
		ids = append(ids, id+1)
	}
	opts := cmpopts.EquateEmpty()
	compare := func(what string, w, g any, werr, gerr error) {
		if (werr == nil) != (gerr == nil) {
			bad("%s: error %v after restart; want %v", what, gerr, werr)
		} else if diff := cmp.Diff(w, g, opts); diff != "" {
			bad("%s after restart (-durable +got):\n%s", what, diff)
		}
	}
	{
		w, werr := want.GetConversations(ctx, ids)
		g, gerr := got.GetConversations(ctx, ids)
		compare("conversations", w, g, werr, gerr)
	}
	{
		w, werr := want.GetEntries(ctx, ids)
		g, gerr := got.GetEntries(ctx, ids)
		compare("entries", w, g, werr, gerr)
	}
	{
		w, werr := want.GetTasks(ctx, ids)
		g, gerr := got.GetTasks(ctx, ids)
		compare("tasks", w, g, werr, gerr)
	}
	lists, values := map[string]storage.Address{}, map[string]storage.Address{}
	for _, b := range durable {
		for _, w := range b.batch.Writes {
			switch w.Type {
			case storage.WriteValueSet, storage.WriteValueDelete:
				values[w.Addr.String()] = *w.Addr
			case storage.WriteListAppend, storage.WriteListRemove, storage.WriteListClear:
				lists[w.Addr.String()] = *w.Addr
			}
		}
	}
	for _, key := range crashSortedKeys(values) {
		addr := values[key]
		wv, wok, werr := want.GetValue(ctx, addr, 0)
		gv, gok, gerr := got.GetValue(ctx, addr, 0)
		compare("value "+key, struct {
			V  storage.Version
			Ok bool
		}{wv, wok}, struct {
			V  storage.Version
			Ok bool
		}{gv, gok}, werr, gerr)
	}
	for _, key := range crashSortedKeys(lists) {
		q := storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}}
		w, werr := want.ReadList(ctx, lists[key], q)
		g, gerr := got.ReadList(ctx, lists[key], q)
		compare("list "+key, w.Items, g.Items, werr, gerr)
	}
	return problems
}

func crashSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// crashMust returns v or panics with err; inside the simulation the panic
// fails the run with the actor's name and stack.
func crashMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
