package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// Each oracle rejects a hand-broken history, naming its rule; the same
// history without the break passes.

func taskWrite(id storage.ID) storage.Write {
	return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, Kind: "k", Status: "planned"}}
}

func resultWrite(conv, input storage.ID, status agent.InputStatus) storage.Write {
	a := agent.InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(input), 10)).Address
	raw, _ := json.Marshal(agent.InputResult{Status: status})
	return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: raw}
}

func main1(ws ...storage.Write) storage.CommitBatch {
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}
}

func wantRule(t *testing.T, err error, rule oracleRule) {
	t.Helper()
	var oe *oracleError
	if !errors.As(err, &oe) || oe.Rule != rule {
		t.Fatalf("err = %v; want the %s rule", err, rule)
	}
}

type step struct {
	inv   core.Invocation
	byInv bool
	first storage.ID
	batch storage.CommitBatch
}

// play feeds steps to a fresh oracle and returns the first error.
func play(steps []step) error {
	o := newOracle()
	for _, s := range steps {
		r := storage.Range{First: s.first, Last: s.first + storage.ID(len(s.batch.Writes)) - 1}
		if err := o.commit(s.inv, s.byInv, r, s.batch); err != nil {
			return err
		}
	}
	return nil
}

func TestOracleIDsIncrease(t *testing.T) {
	ok := []step{{first: 1, batch: main1(taskWrite(1))}, {first: 2, batch: main1(taskWrite(2))}}
	if err := play(ok); err != nil {
		t.Fatalf("a contiguous history: %v", err)
	}
	wantRule(t, play([]step{{first: 1, batch: main1(taskWrite(1))}, {first: 3, batch: main1(taskWrite(3))}}), ruleIDsIncrease)
	wantRule(t, play([]step{{first: 1, batch: main1(taskWrite(1), taskWrite(2))}, {first: 2, batch: main1(taskWrite(2))}}), ruleIDsIncrease)
}

func TestOracleNoWriteAfterSettle(t *testing.T) {
	settle := storage.Write{Type: storage.WriteSettle, ID: 1, Status: "done"}
	patch := storage.Write{Type: storage.WritePatch, ID: 1, Status: "running"}
	if err := play([]step{{first: 1, batch: main1(taskWrite(1))}, {first: 2, batch: main1(patch)}, {first: 3, batch: main1(settle)}}); err != nil {
		t.Fatalf("patch then settle: %v", err)
	}
	wantRule(t, play([]step{{first: 1, batch: main1(taskWrite(1))}, {first: 2, batch: main1(settle)}, {first: 3, batch: main1(patch)}}), ruleSettledTask)
	a := storage.ScratchList[int]("x").In(1).Address
	scratch := storage.CommitBatch{Kind: storage.BatchScratch, Task: 1, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &a, Value: json.RawMessage("1")}}}
	wantRule(t, play([]step{{first: 1, batch: main1(taskWrite(1))}, {first: 2, batch: main1(settle)}, {first: 3, batch: scratch}}), ruleSettledTask)
}

func TestOracleNoWriteByAMarkedExecute(t *testing.T) {
	mark := storage.Write{Type: storage.WritePatch, ID: 1, Abort: true}
	exec := core.Invocation{Task: 1, Method: core.MethodExecute}
	abort := core.Invocation{Task: 1, Method: core.MethodAbort}
	write := main1(storage.Write{Type: storage.WritePatch, ID: 2, Status: "running"})
	base := []step{{first: 1, batch: main1(taskWrite(1), taskWrite(2))}, {first: 3, batch: main1(mark)}}
	if err := play(append(base, step{inv: abort, byInv: true, first: 4, batch: write})); err != nil {
		t.Fatalf("the fresh abort writes after the mark: %v", err)
	}
	if err := play([]step{{first: 1, batch: main1(taskWrite(1), taskWrite(2))}, {inv: exec, byInv: true, first: 3, batch: write}}); err != nil {
		t.Fatalf("an unmarked execute writes: %v", err)
	}
	wantRule(t, play(append(base, step{inv: exec, byInv: true, first: 4, batch: write})), ruleMarkedWrite)
}

func TestOracleTerminalInputResultsNeverChange(t *testing.T) {
	ok := []step{{first: 1, batch: main1(resultWrite(1, 5, agent.InputQueued))}, {first: 2, batch: main1(resultWrite(1, 5, agent.InputRunning))},
		{first: 3, batch: main1(resultWrite(1, 5, agent.InputStopped))}} // done would need its answer (answerrule.go)
	if err := play(ok); err != nil {
		t.Fatalf("queued, running, stopped: %v", err)
	}
	wantRule(t, play(append(ok, step{first: 4, batch: main1(resultWrite(1, 5, agent.InputCancelled))})), ruleInputResult)
	wantRule(t, play(append(ok, step{first: 4, batch: main1(resultWrite(1, 5, agent.InputDone))})), ruleInputResult)
}

func TestOracleOneInvocationPerTask(t *testing.T) {
	o := newOracle()
	exec, abort := core.Invocation{Task: 7, Method: core.MethodExecute}, core.Invocation{Task: 7, Method: core.MethodAbort}
	for _, c := range []struct {
		inv      core.Invocation
		returned bool
	}{{exec, false}, {exec, true}, {abort, false}, {abort, true}, {core.Invocation{Task: 8, Method: core.MethodExecute}, false}} {
		if err := o.invocation(c.inv, c.returned); err != nil {
			t.Fatalf("one at a time: %v", err)
		}
	}
	if err := o.invocation(exec, false); err != nil {
		t.Fatal(err)
	}
	wantRule(t, o.invocation(abort, false), ruleOneInvocation)
}

// A watch whose fold is broken by hand (an entry dropped from a
// conversation view, a conversation added to a session view) differs from
// a fresh capture once nothing is left to deliver.
func TestOracleWatchFoldEqualsAFreshCapture(t *testing.T) {
	sc, _ := findScenario("basic-turn")
	s := sim.New(sim.Options{Seed: 1})
	var got, gotSession, intact error
	err := s.Run(context.Background(), func(ctx context.Context) {
		e := newEnv(s, runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}, t.TempDir())
		if err := e.play(ctx); err != nil {
			intact = err
		}
		intact = errors.Join(intact, e.checkWatch(ctx, e.watch, root, rootWatched))
		sw, err := e.h.WatchSession(ctx)
		if err != nil {
			intact = err
			return
		}
		intact = errors.Join(intact, e.checkSessionWatch(ctx, sw))
		sv := sw.View()
		sv.Conversations = append(sv.Conversations, storage.Conversation{ID: 99})
		gotSession = e.checkSessionWatch(ctx, sw)
		v := e.watch.View()
		v.Entries = v.Entries[:0]
		got = e.checkWatch(ctx, e.watch, root, rootWatched)
		_ = e.h.Close(ctx)
		e.endHolds()
	})
	if err != nil || intact != nil {
		t.Fatalf("the intact run: %v %v", err, intact)
	}
	wantRule(t, got, ruleWatchFold)
	wantRule(t, gotSession, ruleWatchFold)
}

func TestOracleOneNoticePerJob(t *testing.T) {
	notice := func(job storage.ID) storage.Write {
		raw, _ := json.Marshal(agent.JobNoticeData{Job: job, Status: agent.JobExited})
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{Kind: "notice", Data: raw}}
	}
	if err := play([]step{{first: 1, batch: main1(notice(7))}, {first: 2, batch: main1(notice(8))}}); err != nil {
		t.Fatalf("one notice each: %v", err)
	}
	wantRule(t, play([]step{{first: 1, batch: main1(notice(7))}, {first: 2, batch: main1(notice(7))}}), ruleOneNotice)
}

func TestOracleAbortedCallLeavesNoOwnedJobRunning(t *testing.T) {
	state := func(j agent.ToolJob) json.RawMessage { raw, _ := json.Marshal(map[string]any{"job": j}); return raw }
	aborted := func(j agent.ToolJob) storage.Write {
		return storage.Write{Type: storage.WriteSettle, ID: 1, Status: "aborted", State: state(j)}
	}
	mark := storage.Write{Type: storage.WritePatch, ID: 2, Abort: true}
	base := step{first: 1, batch: main1(taskWrite(1), taskWrite(2))}
	for name, steps := range map[string][]step{
		"marked in the same commit": {base, {first: 3, batch: main1(mark, aborted(agent.ToolJob{ID: 2, CancelOnAbort: true}))}},
		"detached":                  {base, {first: 3, batch: main1(aborted(agent.ToolJob{ID: 2, Detached: true}))}},
		"already ended":             {base, {first: 3, batch: main1(storage.Write{Type: storage.WriteSettle, ID: 2, Status: "exited"})}, {first: 4, batch: main1(aborted(agent.ToolJob{ID: 2, CancelOnAbort: true}))}},
	} {
		if err := play(steps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	wantRule(t, play([]step{base, {first: 3, batch: main1(aborted(agent.ToolJob{ID: 2, CancelOnAbort: true}))}}), ruleAbortCleanup)
}

func TestOracleOneBoundaryPerProviderSession(t *testing.T) {
	entry := func(id string) storage.Write {
		raw, _ := json.Marshal(boundary.BoundaryData{Schema: 1, Provider: boundary.Claude, Source: "clear", SessionID: id})
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{Kind: "provider_boundary", Data: raw}}
	}
	if err := play([]step{{first: 1, batch: main1(entry("t1"))}, {first: 2, batch: main1(entry("t2"))}}); err != nil {
		t.Fatalf("two sessions: %v", err)
	}
	wantRule(t, play([]step{{first: 1, batch: main1(entry("t1"))}, {first: 2, batch: main1(entry("t1"))}}), ruleOneBoundary)
}

func TestOracleTerminateStopsTheTurn(t *testing.T) {
	kindWrite := func(id storage.ID, kind string) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, Kind: kind, Status: "planned"}}
	}
	toolSettle := func(id storage.ID, terminate bool) storage.Write {
		raw, _ := json.Marshal(map[string]any{"output": map[string]any{"terminate": terminate}})
		return storage.Write{Type: storage.WriteSettle, ID: id, Status: "done", State: raw}
	}
	postSettle := func(stopped bool) storage.Write {
		st := map[string]any{"tools": []storage.ID{1, 2}}
		if stopped {
			st["stopped"] = true
		}
		raw, _ := json.Marshal(st)
		return storage.Write{Type: storage.WriteSettle, ID: 3, Status: "done", State: raw}
	}
	exchange := func(terminate bool, last storage.CommitBatch) []step {
		return []step{
			{first: 1, batch: main1(kindWrite(1, agent.ToolKindName), kindWrite(2, agent.ToolKindName), kindWrite(3, agent.PostToolsKindName))},
			{first: 4, batch: main1(toolSettle(1, terminate))},
			{first: 5, batch: main1(toolSettle(2, false))},
			{first: 6, batch: last},
		}
	}
	for name, steps := range map[string][]step{
		"no tool terminates, the turn goes on": exchange(false, main1(kindWrite(6, agent.GenerationKindName), postSettle(false))),
		"the first terminates, stopped":        exchange(true, main1(postSettle(true))),
	} {
		if err := play(steps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Settled as if the turn went on, and stopped but going on.
	wantRule(t, play(exchange(true, main1(postSettle(false)))), ruleTerminate)
	wantRule(t, play(exchange(true, main1(kindWrite(6, agent.GenerationKindName), postSettle(true)))), ruleTerminate)
	// Going on with no generation, or with a second for the steering that
	// joined.
	wantRule(t, play(exchange(false, main1(postSettle(false)))), ruleOneSuccessor)
	wantRule(t, play(exchange(false, main1(kindWrite(6, agent.GenerationKindName), kindWrite(7, agent.GenerationKindName), postSettle(false)))), ruleOneSuccessor)
}

// An exchange whose tools ask for one handoff goes on from it, the
// handoff its commit's first entry; two different ones fail the turn;
// the same one twice is one.
func TestOracleAnExchangeHandsOffAsItsToolsAsk(t *testing.T) {
	kindWrite := func(id storage.ID, kind string) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, Kind: kind, Status: "planned"}}
	}
	toolSettle := func(id storage.ID, handoff string) storage.Write {
		raw, _ := json.Marshal(map[string]any{"output": map[string]any{"terminate": false, "handoff": handoff}})
		return storage.Write{Type: storage.WriteSettle, ID: id, Status: "done", State: raw}
	}
	postSettle := func(status string, stopped bool) storage.Write {
		st := map[string]any{"tools": []storage.ID{1, 2}}
		if stopped {
			st["stopped"] = true
		}
		raw, _ := json.Marshal(st)
		return storage.Write{Type: storage.WriteSettle, ID: 3, Status: status, State: raw}
	}
	entry := func(kind, text string) storage.Write {
		raw, _ := json.Marshal(core.HandoffData{Text: text})
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{Kind: kind, Data: raw}}
	}
	exchange := func(h1, h2 string, last ...storage.Write) []step {
		return []step{
			{first: 1, batch: main1(kindWrite(1, agent.ToolKindName), kindWrite(2, agent.ToolKindName), kindWrite(3, agent.PostToolsKindName))},
			{first: 4, batch: main1(toolSettle(1, h1))},
			{first: 5, batch: main1(toolSettle(2, h2))},
			{first: 6, batch: main1(last...)},
		}
	}
	next := kindWrite(9, agent.GenerationKindName)
	placedInput := func(entry storage.ID) storage.Write {
		addr := agent.InputResultValue.Address
		addr.Key = "5"
		raw, _ := json.Marshal(agent.InputResult{Status: agent.InputPlaced, PlacementEntryID: entry})
		return storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: raw}
	}
	queued := entry("handoff", "queued")
	queued.Entry.ID = 7
	for name, steps := range map[string][]step{
		"no handoff":                          exchange("", "", next, postSettle("done", false)),
		"none, a queued handoff input placed": exchange("", "", placedInput(7), queued, next, postSettle("done", false)),
		"one, first":                          exchange("", "afresh", entry("handoff", "afresh"), entry("notice", ""), next, postSettle("done", false)),
		"the same one twice":                  exchange("afresh", "afresh", entry("handoff", "afresh"), next, postSettle("done", false)),
		"two different ones fail":             exchange("afresh", "anew", postSettle("failed", true)),
	} {
		if err := play(steps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, steps := range map[string][]step{
		"one, left out":                        exchange("afresh", "", next, postSettle("done", false)),
		"one, after a notice":                  exchange("afresh", "", entry("notice", ""), entry("handoff", "afresh"), next, postSettle("done", false)),
		"one, another text":                    exchange("afresh", "", entry("handoff", "anew"), next, postSettle("done", false)),
		"two, going on":                        exchange("afresh", "anew", entry("handoff", "anew"), next, postSettle("done", false)),
		"two, stopped but done":                exchange("afresh", "anew", postSettle("done", true)),
		"two, failed but generating":           exchange("afresh", "anew", next, postSettle("failed", true)),
		"none, stopped":                        exchange("", "", postSettle("failed", true)),
		"none, a handoff anyway":               exchange("", "", entry("handoff", ""), next, postSettle("done", false)),
		"none, an input's handoff and another": exchange("", "", placedInput(7), queued, entry("handoff", "x"), next, postSettle("done", false)),
	} {
		if err := play(steps); err == nil || !strings.Contains(err.Error(), string(ruleHandoff)) {
			t.Errorf("%s: %v; want %s broken", name, err, ruleHandoff)
		}
	}
}

// An exchange that goes on selects the tools its calls added, each once;
// one whose calls added none leaves the selection alone.
func TestOracleAnExchangeSelectsTheToolsItsCallsAdd(t *testing.T) {
	kindWrite := func(id storage.ID, kind string) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, Kind: kind, Status: "planned", ConversationID: 1}}
	}
	toolSettle := func(id storage.ID, added ...string) storage.Write {
		raw, _ := json.Marshal(map[string]any{"output": map[string]any{"terminate": false, "addedTools": added}})
		return storage.Write{Type: storage.WriteSettle, ID: id, Status: "done", State: raw}
	}
	post := func() storage.Write {
		raw, _ := json.Marshal(map[string]any{"tools": []storage.ID{1, 2}})
		return storage.Write{Type: storage.WriteSettle, ID: 3, Status: "done", State: raw}
	}
	selection := func(names string) storage.Write {
		a := agent.SelectedToolsValue.In(1).Address
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(names)}
	}
	exchange := func(added []string, last ...storage.Write) []step {
		return []step{
			{first: 1, batch: main1(kindWrite(1, agent.ToolKindName), kindWrite(2, agent.ToolKindName), kindWrite(3, agent.PostToolsKindName))},
			{first: 4, batch: main1(toolSettle(1, added...))},
			{first: 5, batch: main1(toolSettle(2))},
			{first: 6, batch: main1(last...)},
		}
	}
	next := kindWrite(9, agent.GenerationKindName)
	for name, steps := range map[string][]step{
		"none added":       exchange(nil, next, post()),
		"b added, once":    exchange([]string{"b"}, selection(`["a","work","b"]`), next, post()),
		"b added, as kept": exchange([]string{"b"}, selection(`["b","a"]`), next, post()),
	} {
		if err := play(steps); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, steps := range map[string][]step{
		"b added, not selected": exchange([]string{"b"}, next, post()),
		"b added, left out":     exchange([]string{"b"}, selection(`["a","work"]`), next, post()),
		"b added, twice":        exchange([]string{"b"}, selection(`["a","b","b"]`), next, post()),
		"none added, selected":  exchange(nil, selection(`["a","b"]`), next, post()),
	} {
		if err := play(steps); err == nil || !strings.Contains(err.Error(), string(ruleHandoff)) {
			t.Errorf("%s: %v; want %s broken", name, err, ruleHandoff)
		}
	}
}

// A work call that settles done did what its arguments asked, no more.
func TestOracleAWorkCallDoesWhatItIsAsked(t *testing.T) {
	settle := func(out map[string]any) storage.Write {
		raw, _ := json.Marshal(map[string]any{"output": out})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: raw}
	}
	text := func(s string) []ai.Block { return []ai.Block{ai.Text(s)} }
	for _, tc := range []struct {
		do     string
		out    map[string]any
		broken bool
	}{
		{"ok", map[string]any{"content": text("worked: ok")}, false},
		{"addTools", map[string]any{"content": text("worked: addTools"), "addedTools": []string{"b"}}, false},
		{"addTools", map[string]any{"content": text("worked: addTools")}, true},
		{"handoff", map[string]any{"content": text("worked: handoff"), "handoff": "start afresh"}, false},
		{"handoff", map[string]any{"content": text("worked: handoff")}, true},
		{"terminate", map[string]any{"content": text("worked: terminate"), "terminate": true}, false},
		{"ok", map[string]any{"content": text("worked: ok"), "terminate": true}, true},
		{"ok", map[string]any{"content": text("worked: slow")}, true},
		{"throw", map[string]any{"content": text("the work failed"), "isError": true}, false},
	} {
		o := newOracle()
		o.kinds[7], o.tools[7] = agent.ToolKindName, "work"
		o.hooks.callArgs[7] = json.RawMessage(`{"do":"` + tc.do + `"}`)
		holdsOrBreaks(t, o.worked(settle(tc.out), "a test", 9), ruleHandoff, tc.broken)
	}
}

func TestOracleInputLandsAtItsBoundary(t *testing.T) {
	// Input 2 is queued in conversation 1's inbox; task 3 is a post_tools,
	// task 4 a generation; the last commit lands or cancels the input.
	run := func(mode agent.InputMode, inv core.Invocation, byInv bool, status agent.InputStatus, reason string) error {
		inbox := agent.InboxList.In(1).Address
		item, _ := json.Marshal(agent.InboxItem{Mode: mode})
		result := agent.InputResultValue.In(1).WithKey("2").Address
		res, _ := json.Marshal(agent.InputResult{Status: status, Reason: reason})
		return play([]step{
			{first: 1, batch: main1(taskWrite(1), storage.Write{Type: storage.WriteListAppend, Addr: &inbox, Value: item})},
			{first: 3, batch: main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 3, Kind: agent.PostToolsKindName}},
				storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 4, Kind: agent.GenerationKindName}})},
			{first: 5, inv: inv, byInv: byInv, batch: main1(storage.Write{Type: storage.WriteValueSet, Addr: &result, Value: res})},
		})
	}
	post := core.Invocation{Task: 3, Method: core.MethodExecute}
	gen := core.Invocation{Task: 4, Method: core.MethodExecute}
	host := core.Invocation{}
	for name, err := range map[string]error{
		"steer at post_tools":            run(agent.ModeSteer, post, true, agent.InputRunning, ""),
		"a write at post_tools":          run(agent.ModeWrite, post, true, agent.InputPlaced, ""),
		"followUp at a generation's end": run(agent.ModeFollowUp, gen, true, agent.InputRunning, ""),
		"nextRun by an idle acceptance":  run(agent.ModeNextRun, host, false, agent.InputRunning, ""),
		"followUp cancelled by an abort": run(agent.ModeFollowUp, host, false, agent.InputCancelled, agent.ReasonConversationAborted),
		"nextRun cancelled by the host":  run(agent.ModeNextRun, host, false, agent.InputCancelled, "cancelled"),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantRule(t, run(agent.ModeFollowUp, post, true, agent.InputRunning, ""), ruleInputBoundary)
	wantRule(t, run(agent.ModeNextRun, gen, true, agent.InputRunning, ""), ruleInputBoundary)
	wantRule(t, run(agent.ModeNextRun, host, false, agent.InputCancelled, agent.ReasonConversationAborted), ruleInputBoundary)
}

func TestOracleRetryBudget(t *testing.T) {
	retried := func(kind string, attempt int, outcome string) error {
		var st []byte
		if kind == agent.CollapseKindName {
			st, _ = json.Marshal(agent.CollapseState{MaxAttempts: 3})
		} else {
			st, _ = json.Marshal(agent.GenerationState{MaxAttempts: 3})
		}
		usage := agent.UsageList.Address
		row, _ := json.Marshal(agent.UsageRow{TaskID: 1, Kind: kind, Attempt: attempt, Outcome: outcome})
		return play([]step{
			{first: 1, batch: main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 1, Kind: kind, State: st}})},
			{first: 2, inv: core.Invocation{Task: 1, Method: core.MethodExecute}, byInv: true,
				batch: main1(storage.Write{Type: storage.WriteListAppend, Addr: &usage, Value: row})},
		})
	}
	for _, kind := range []string{agent.GenerationKindName, agent.CollapseKindName} {
		// A rate-limited attempt, and one a restart interrupted (recover).
		for _, outcome := range []string{"retry", "interrupted"} {
			if err := retried(kind, 2, outcome); err != nil {
				t.Fatalf("%s: a %s of the second of three attempts: %v", kind, outcome, err)
			}
			wantRule(t, retried(kind, 3, outcome), ruleRetryBudget)
		}
		if err := retried(kind, 3, "failed"); err != nil {
			t.Fatalf("%s: the last attempt failing: %v", kind, err)
		}
	}
}

func TestOracleReplayNeverRunsOnce(t *testing.T) {
	type run struct {
		call string
		task storage.ID
	}
	check := func(replay agent.ReplayPolicy, runs ...run) error {
		e := &env{oracle: newOracle()}
		for _, r := range runs {
			e.ran("b", r.call, r.task, replay)
		}
		return e.oracle.first
	}
	if err := check(agent.ReplayNever, run{"call-1", 5}, run{"call-2", 6}); err != nil {
		t.Fatalf("two calls once each: %v", err)
	}
	if err := check(agent.ReplayNever, run{"call-1", 5}, run{"call-1", 9}); err != nil {
		t.Fatalf("one id in two answers, once each: %v", err)
	}
	if err := check(agent.ReplaySafe, run{"call-1", 5}, run{"call-1", 5}); err != nil {
		t.Fatalf("a safe tool run twice: %v", err)
	}
	wantRule(t, check(agent.ReplayNever, run{"call-1", 5}, run{"call-1", 5}), ruleReplayNever)
}

// The commit that starts a call records its tool's replay policy, never
// for a tool that declares none.
func TestOracleACallRecordsItsToolsReplayPolicy(t *testing.T) {
	check := func(tool, state string) error {
		o := newOracle()
		o.replays = map[string]agent.ReplayPolicy{"a": agent.ReplaySafe, "b": ""}
		o.tools[5] = tool
		return o.replayRecorded(storage.Write{Type: storage.WritePatch, ID: 5, Status: "running", State: json.RawMessage(state)}, "task 5", 9)
	}
	for name, err := range map[string]error{
		"a declared policy":     check("a", `{"args":{},"replay":"safe"}`),
		"the default, never":    check("b", `{"args":{},"replay":"never"}`),
		"a patch of no start":   check("b", `{"output":{}}`),
		"a tool of the harness": check("bash", `{"args":{}}`),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantRule(t, check("a", `{"args":{},"replay":"never"}`), ruleReplayNever)
	wantRule(t, check("b", `{"args":{}}`), ruleReplayNever)
}

// A call made for a tool its request did not offer settles without
// running.
func TestOracleACallNotOfferedNeverRuns(t *testing.T) {
	e := &env{oracle: newOracle()}
	e.oracle.hooks.offered[5], e.oracle.hooks.offered[6] = true, false
	e.ran("a", "call-1", 5, agent.ReplaySafe)
	e.ran("a", "call-1", 7, agent.ReplaySafe) // a call the oracle never saw made
	if err := e.oracle.first; err != nil {
		t.Fatalf("offered calls: %v", err)
	}
	e.ran("b", "call-2", 6, agent.ReplaySafe)
	wantRule(t, e.oracle.first, ruleOffered)
}

func TestOracleNoStaleSummary(t *testing.T) {
	published := func(headAt storage.ID) error {
		// Collapse 2 of conversation 1 captured its context at 2; a head
		// lands at headAt (0: none) before the summary is published.
		steps := []step{{first: 1, batch: main1(taskWrite(1), storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: agent.CollapseKindName}})}}
		next := storage.ID(3)
		if headAt != 0 {
			steps = append(steps, step{first: headAt, batch: main1(storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: headAt, ConversationID: 1, Kind: "reset", Head: headAt}})})
			next = headAt + 1
		}
		summary := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: next, ConversationID: 1, Kind: "summary", Head: next}}
		state, _ := json.Marshal(agent.CollapseState{At: 2, Summary: next, FirstRetained: next})
		return play(append(steps, step{first: next, batch: main1(summary, storage.Write{Type: storage.WriteSettle, ID: 2, Status: "done", State: state})}))
	}
	if err := published(0); err != nil {
		t.Fatalf("a summary with no newer head: %v", err)
	}
	wantRule(t, published(3), ruleStaleSummary)
}

func TestOracleWritesLandAtEveryBoundary(t *testing.T) {
	// A write is queued in conversation 1 (input 3) while generation 2
	// runs; the last commit settles the generation.
	run := func(status string, removed bool, creates ...string) error {
		inbox := agent.InboxList.In(1).Address
		item, _ := json.Marshal(agent.InboxItem{Mode: agent.ModeWrite})
		last := []storage.Write{{Type: storage.WriteSettle, ID: 2, Status: status}}
		if removed {
			last = append(last, storage.Write{Type: storage.WriteListRemove, Addr: &inbox, Element: 3})
		}
		for _, kind := range creates {
			kind, state, _ := strings.Cut(kind, " ")
			last = append(last, storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 4 + storage.ID(len(last)), ConversationID: 1, Kind: kind, State: json.RawMessage(state)}})
		}
		return play([]step{
			{first: 1, batch: main1(taskWrite(1), storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: agent.GenerationKindName}})},
			{first: 3, batch: main1(storage.Write{Type: storage.WriteListAppend, Addr: &inbox, Value: item})},
			{first: 4, inv: core.Invocation{Task: 2, Method: core.MethodExecute}, byInv: true, batch: main1(last...)},
		})
	}
	for name, err := range map[string]error{
		"placed at the answer":                           run("done", true),
		"left for the exchange's post_tools":             run("done", false, agent.PostToolsKindName),
		"left for the successor of a threshold collapse": run("done", false, agent.CollapseKindName, agent.GenerationKindName),
		"left by an abort":                               run("aborted", false),
		"left for the retry an overflow's collapse owes": run("failed", false, agent.CollapseKindName+` {"successor":{"attempt":1}}`),
		"left for a retry after another collapse":        run("failed", false, agent.GenerationKindName+` {"afterCollapse":9}`),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantRule(t, run("failed", false), ruleWritesLand)
	wantRule(t, run("done", false), ruleWritesLand)
	wantRule(t, run("done", false, agent.CollapseKindName), ruleWritesLand) // a collapse alone hands nothing over
	wantRule(t, run("failed", false, agent.CollapseKindName+` {"successor":null}`), ruleWritesLand)
}

func TestOracleWaitsItsTurn(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	exec := core.Invocation{Task: 1, Method: core.MethodExecute}
	// A generation waits (status, handle's interval, how long after the
	// patch it waits for), then its execute commits after some time.
	history := func(status string, pollMs int64, waits, after time.Duration, exact bool) error {
		now := start
		o := newOracle()
		o.now, o.exactClock = func() time.Time { return now }, exact
		gen, _ := json.Marshal(agent.GenerationState{MaxAttempts: 3})
		patch := map[string]any{"notBefore": start.Add(waits).UnixMilli()}
		if status == "deferred" {
			patch["deferred"] = ai.Deferred{ID: "d", PollAfterMs: pollMs}
		}
		state, _ := json.Marshal(patch)
		steps := []step{
			{first: 1, batch: main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 1, Kind: agent.GenerationKindName, State: gen}})},
			{first: 2, inv: exec, byInv: true, batch: main1(storage.Write{Type: storage.WritePatch, ID: 1, Status: status, State: state})},
			{first: 3, inv: exec, byInv: true, batch: main1(storage.Write{Type: storage.WritePatch, ID: 1, Status: "streaming"})},
		}
		for i, s := range steps {
			if i == 2 {
				now = now.Add(after)
			}
			r := storage.Range{First: s.first, Last: s.first + storage.ID(len(s.batch.Writes)) - 1}
			if err := o.commit(s.inv, s.byInv, r, s.batch); err != nil {
				return err
			}
		}
		return nil
	}
	for _, ok := range []struct {
		status       string
		pollMs       int64
		waits, after time.Duration
		exact        bool
	}{
		{"retry_wait", 0, 2 * time.Second, 2 * time.Second, true},
		{"deferred", 20, 20 * time.Millisecond, time.Second, true},
		{"deferred", 0, agent.DeferredPollDefault, agent.DeferredPollDefault, true},
		{"deferred", 20, time.Millisecond, time.Second, false}, // a held commit let time pass
	} {
		if err := history(ok.status, ok.pollMs, ok.waits, ok.after, ok.exact); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	wantRule(t, history("retry_wait", 0, 2*time.Second, time.Second, true), ruleWaitsItsTurn)
	wantRule(t, history("deferred", 250, 20*time.Millisecond, time.Second, true), ruleWaitsItsTurn)
	wantRule(t, history("deferred", 0, 0, time.Second, true), ruleWaitsItsTurn)
}

func TestOraclePlacedInputInContext(t *testing.T) {
	ctx := context.Background()
	result := func(input, entry storage.ID) storage.Write {
		a := agent.InputResultValue.In(1).WithKey(strconv.FormatInt(int64(input), 10)).Address
		raw, _ := json.Marshal(agent.InputResult{Status: agent.InputPlaced, PlacementEntryID: entry})
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: raw}
	}
	user := func(id storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: core.UserKind.Kind(),
			Model: []ai.Message{ai.UserText("hi", 0)}}}
	}
	head := func(id storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: core.ResetKind.Kind(), Head: id}}
	}
	// The batch commits from sequence 2, after the conversation.
	batch := func(ws ...storage.Write) error {
		store := memory.New()
		if _, err := store.Commit(ctx, main1(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}})); err != nil {
			t.Fatal(err)
		}
		b := main1(ws...)
		r, err := store.Commit(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return newOracle().placed(ctx, store, b, r, "a host")
	}
	if err := batch(head(2), user(3), result(7, 3)); err != nil {
		t.Errorf("input placed after the head: %v", err)
	}
	if err := batch(user(2), result(7, 2), head(4), result(9, 4)); err != nil {
		t.Errorf("a write, then a reset accepted after it: %v", err)
	}
	wantRule(t, batch(user(2), result(7, 2), head(4)), rulePlacedInContext)
	wantRule(t, batch(user(2), result(7, 2), head(4), result(5, 4)), rulePlacedInContext) // the head's input came first
}

// An on_yield continuation is a boundary inside the turn: the generation
// settles done but its successor keeps the input group, and followUp input
// waits for the turn's end while steer joins.
func TestOracleContinuationIsNoTurnEnd(t *testing.T) {
	run := func(mode agent.InputMode, keepsGroup bool) error {
		inbox := agent.InboxList.In(1).Address
		item, _ := json.Marshal(agent.InboxItem{Mode: mode})
		result := agent.InputResultValue.In(1).WithKey("2").Address
		res, _ := json.Marshal(agent.InputResult{Status: agent.InputRunning})
		gen := func(id storage.ID, inputs ...storage.ID) storage.Write {
			st, _ := json.Marshal(agent.GenerationState{Inputs: inputs, MaxAttempts: 3})
			return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, Kind: agent.GenerationKindName, State: st}}
		}
		next := gen(7, 2)
		if keepsGroup {
			next = gen(7, 9, 2)
		}
		return play([]step{
			{first: 1, batch: main1(taskWrite(1), storage.Write{Type: storage.WriteListAppend, Addr: &inbox, Value: item})},
			{first: 3, batch: main1(gen(3, 9))},
			{first: 4, inv: core.Invocation{Task: 3, Method: core.MethodExecute}, byInv: true, batch: main1(
				storage.Write{Type: storage.WriteValueSet, Addr: &result, Value: res}, next, storage.Write{Type: storage.WriteSettle, ID: 3, Status: "done"})},
		})
	}
	for name, err := range map[string]error{
		"steer joins a continuation":     run(agent.ModeSteer, true),
		"followUp starts the next turn":  run(agent.ModeFollowUp, false),
		"steer starts the next turn too": run(agent.ModeSteer, false),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantRule(t, run(agent.ModeFollowUp, true), ruleInputBoundary)
}

// An exchange that adds tools selects what its conversation selected
// before, or the catalog, then each added tool it lacked, in order.
func TestOracleAnExchangeAddsToTheSelection(t *testing.T) {
	ctx := context.Background()
	addr := agent.SelectedToolsValue.In(1).Address
	check := func(before any, added, selected []string) error {
		store := memory.New()
		ws := []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}
		if before != nil {
			raw, _ := json.Marshal(before)
			ws = append(ws, storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: raw})
		}
		for _, w := range ws {
			if _, err := store.Commit(ctx, main1(w)); err != nil {
				t.Fatal(err)
			}
		}
		raw, _ := json.Marshal(selected)
		r, err := store.Commit(ctx, main1(storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: raw}))
		if err != nil {
			t.Fatal(err)
		}
		o := newOracle()
		o.hooks.catalogTools = []ai.Tool{{Name: "a"}, {Name: "b"}, {Name: "work"}}
		o.adding = &addedTools{postTools: 9, conv: 1, added: added, selected: selected, by: "task 9's execute", seq: r.First}
		return o.selectionAdded(ctx, store, r)
	}
	for name, err := range map[string]error{
		"the catalog and one more":      check(nil, []string{"c"}, []string{"a", "b", "work", "c"}),
		"the catalog already has it":    check(nil, []string{"b"}, []string{"a", "b", "work"}),
		"a narrowed selection and more": check([]string{"work"}, []string{"b", "a"}, []string{"work", "b", "a"}),
		"an empty selection and one":    check([]string{}, []string{"b"}, []string{"b"}),
		"a null selection: the catalog": check(json.RawMessage("null"), []string{"c"}, []string{"a", "b", "work", "c"}),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, err := range map[string]error{
		"the catalog, not the narrowed selection": check([]string{"work"}, []string{"b"}, []string{"a", "b", "work"}),
		"the added tool first":                    check([]string{"work"}, []string{"b"}, []string{"b", "work"}),
		"a tool of the selection dropped":         check(nil, []string{"c"}, []string{"a", "work", "c"}),
		"an added tool left out":                  check([]string{"a"}, []string{"b"}, []string{"a"}),
	} {
		var oe *oracleError
		if !errors.As(err, &oe) || oe.Rule != ruleSelectionAdds {
			t.Errorf("%s: %v; want %s broken", name, err, ruleSelectionAdds)
		}
	}
}

func TestOracleTasksReachOnlyTheirOwn(t *testing.T) {
	conv := func(id, owner storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: id, Owner: owner}}
	}
	task := func(id, conv storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: conv, Kind: "tool", Status: "planned"}}
	}
	inbox := func(conv storage.ID) storage.Write {
		a := agent.InboxList.In(conv).Address
		return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: json.RawMessage(`{"mode":"followUp"}`)}
	}
	by := func(task storage.ID) core.Invocation { return core.Invocation{Task: task, Method: core.MethodExecute} }
	// Conversations 1 and 2; task 3 of 1 owns 4, whose task 5 owns 6;
	// task 7 of 2 owns 8.
	world := []step{
		{first: 1, batch: main1(conv(1, 0), conv(2, 0))},
		{first: 3, batch: main1(task(3, 1))},
		{first: 4, batch: main1(conv(4, 3), task(5, 4), conv(6, 5))},
		{first: 7, batch: main1(task(7, 2), conv(8, 7))},
	}
	with := func(s step) []step { s.first = 9; return append(append([]step(nil), world...), s) }
	for _, ok := range []step{
		{inv: by(3), byInv: true, batch: main1(inbox(1))},
		{inv: by(3), byInv: true, batch: main1(inbox(4))}, // its child
		{inv: by(3), byInv: true, batch: main1(storage.Write{Type: storage.WritePatch, ID: 5, Abort: true})},
		{inv: by(3), byInv: true, batch: main1(inbox(6))},              // its child's child
		{inv: by(3), byInv: true, batch: main1(conv(9, 3), inbox(9))},  // a child it makes
		{inv: core.Invocation{}, byInv: false, batch: main1(inbox(8))}, // a host reaches anything
	} {
		if err := play(with(ok)); err != nil {
			t.Errorf("%+v: %v", ok.batch.Writes, err)
		}
	}
	for _, bad := range []step{
		{inv: by(3), byInv: true, batch: main1(inbox(8))}, // another conversation's child
		{inv: by(3), byInv: true, batch: main1(inbox(2))},
		{inv: by(5), byInv: true, batch: main1(inbox(1))}, // its owner's conversation
		{inv: by(3), byInv: true, batch: main1(storage.Write{Type: storage.WritePatch, ID: 7, Abort: true})},
		{inv: by(3), byInv: true, batch: main1(conv(9, 7))}, // a child another task owns
	} {
		wantRule(t, play(with(bad)), ruleReach)
	}
}

func TestOracleAbortIsPrompt(t *testing.T) {
	now := time.Unix(0, 0)
	tool := func(id storage.ID, name string) storage.Write {
		raw, _ := json.Marshal(agent.ToolState{Call: ai.Block{Type: ai.BlockToolCall, ID: "c", Name: name}})
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: agent.ToolKindName, Status: "planned", State: raw}}
	}
	run := func(name string, method core.Method, took time.Duration) error {
		o := newOracle()
		o.now = func() time.Time { return now }
		if err := o.commit(core.Invocation{}, false, storage.Range{First: 1, Last: 1}, main1(tool(1, name))); err != nil {
			return err
		}
		inv := core.Invocation{Task: 1, Method: method}
		_ = o.invocation(inv, false)
		if err := o.commit(core.Invocation{}, false, storage.Range{First: 2, Last: 2}, main1(storage.Write{Type: storage.WritePatch, ID: 1, Abort: true})); err != nil {
			return err
		}
		now = now.Add(took)
		return o.invocation(inv, true)
	}
	for _, m := range []core.Method{core.MethodExecute, core.MethodRecover} {
		if err := run("a", m, 10*time.Millisecond); err != nil {
			t.Errorf("a %s that returns at once: %v", m, err)
		}
		wantRule(t, run("a", m, 3*time.Second), rulePromptAbort)
	}
	if err := run(agent.BashToolName, core.MethodExecute, time.Minute); err != nil {
		t.Errorf("a bash call waits for its job's kill: %v", err)
	}
}

func TestOracleAWaitOnAnEndedTaskReturns(t *testing.T) {
	now := time.Unix(0, 0)
	run := func(ended bool, took time.Duration) error {
		o := newOracle()
		o.now = func() time.Time { return now }
		raw, _ := json.Marshal(agent.ToolState{Call: ai.Block{Type: ai.BlockToolCall, ID: "c", Name: agent.JobToolName, Arguments: json.RawMessage(`{"command":"wait","id":1}`)}})
		ws := []storage.Write{{Type: storage.WriteTask, Task: &storage.Task{ID: 1, ConversationID: 1, Kind: agent.JobKindName, Status: "running"}},
			{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: agent.ToolKindName, Status: "planned", State: raw}}}
		if ended {
			ws = append(ws, storage.Write{Type: storage.WriteSettle, ID: 1, Status: "exited"})
		}
		if err := o.commit(core.Invocation{}, false, storage.Range{First: 1, Last: storage.ID(len(ws))}, main1(ws...)); err != nil {
			return err
		}
		inv := core.Invocation{Task: 2, Method: core.MethodExecute}
		_ = o.invocation(inv, false)
		now = now.Add(took)
		return o.invocation(inv, true)
	}
	if err := run(false, time.Minute); err != nil {
		t.Errorf("a wait on a running job: %v", err)
	}
	if err := run(true, time.Millisecond); err != nil {
		t.Errorf("a wait on an ended job that returns: %v", err)
	}
	wantRule(t, run(true, time.Minute), ruleWaitOnEnded)
}

// The kernel refuses the host's meddling with a live task (its status, its
// state, its settlement), and writes nothing; a meddling commit that lands
// breaks only-its-own-invocation-changes-a-task.
func TestMeddlingThatLandsFailsTheRun(t *testing.T) {
	var landed error
	afterBasicTurn(t, func(ctx context.Context, _ *sim.Sim, e *env) (problems []string) {
		if _, err := e.h.Root().Accept(ctx, ai.PlainText("again"), agent.AcceptOptions{}); err != nil {
			problems = append(problems, "accept: "+err.Error())
		}
		live := true
		page, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Live: &live})
		if err != nil || len(page.Items) != 1 {
			return append(problems, fmt.Sprintf("live tasks %v, %v; want the new generation", page.Items, err))
		}
		before, last := *page.Items[0], e.h.Store().LastSeq()
		e.meddleAsHost(ctx, root)
		if e.oracle.first != nil {
			problems = append(problems, "the refused meddling: "+e.oracle.first.Error())
		}
		after, _, _ := e.h.GetTask(ctx, before.ID)
		if e.h.Store().LastSeq() != last || after == nil || after.Status != before.Status || string(after.State) != string(before.State) {
			problems = append(problems, fmt.Sprintf("the refused meddling changed something: sequence %d → %d, task %+v → %+v", last, e.h.Store().LastSeq(), before, after))
		}
		e.meddle(ctx, e.h.Harness, root, 0, "a meddler", func(context.Context, func(*core.Tx)) error { return nil })
		landed = e.oracle.first
		return problems
	})
	wantRule(t, landed, ruleOnlyItsOwn)
}

// A meddler task the host starts and marks is aborted: before the mark its
// execute makes its child conversation, whose keeper and whatever new work
// the kernel let in it are aborted too; its abort's attempts to create a
// task and a conversation are refused (nothing of them is written) and it
// settles aborted, breaking nothing.
func TestAMeddlersAbortCreatesNothing(t *testing.T) {
	afterBasicTurn(t, func(ctx context.Context, s *sim.Sim, e *env) (problems []string) {
		last := e.h.Store().LastSeq()
		e.startMeddler(ctx, root)
		if err := s.Runtime().Sleep(ctx, meddlerMarked+time.Second); err != nil { // the meddler is background work: nothing drives it
			problems = append(problems, "sleep: "+err.Error())
		}
		if e.oracle.first != nil {
			problems = append(problems, "the oracle: "+e.oracle.first.Error())
		}
		page, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Kind: meddlerStatuses.Name})
		if err != nil || len(page.Items) < 2 {
			return append(problems, fmt.Sprintf("meddler tasks %v, %v; want the one started and its keeper", page.Items, err))
		}
		meddler := page.Items[0]
		for _, task := range page.Items {
			if task.Status != "aborted" || isKeeper(task) == (task.ID == meddler.ID) {
				problems = append(problems, fmt.Sprintf("task %d (keeper: %t) is %s; want the meddler %d and keepers, all aborted", task.ID, isKeeper(task), task.Status, meddler.ID))
			}
		}
		ids := []storage.ID{}
		for id := last + 1; id <= e.h.Store().LastSeq(); id++ {
			ids = append(ids, id)
		}
		convs, err := e.h.Store().GetConversations(ctx, ids)
		if err != nil || len(convs) != 1 {
			problems = append(problems, fmt.Sprintf("conversations %v, %v after the abort; want the meddler's child", convs, err))
		}
		for _, c := range convs {
			if c.Owner != meddler.ID {
				problems = append(problems, fmt.Sprintf("conversation %d is owned by %d; want the meddler %d", c.ID, c.Owner, meddler.ID))
			}
		}
		return problems
	})
}

// The host's bad writes are each refused by the rule they break (the
// thirty of a session with a reset head, a live task, an ended one,
// one of another ownership tree, an ended input and a queued one),
// and write nothing (the planted bugs show a kernel that lets one land
// failing the run); the good writes after them, a fork with a head and an
// edit at its fork point, and collapse settings at the ends of their
// ranges in a conversation of their own, land whole.
func TestBadWritesAreRefusedByTheirRule(t *testing.T) {
	afterBasicTurn(t, func(ctx context.Context, _ *sim.Sim, e *env) (problems []string) {
		if _, err := e.h.Root().Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, root); return nil }); err != nil {
			return []string{"reset: " + err.Error()}
		}
		page, err := e.h.Entries(ctx, root, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil || len(page.Items) == 0 {
			return []string{fmt.Sprintf("root's entries: %v, %v", page.Items, err)}
		}
		if _, err := e.h.Commit(ctx, func(tx *core.Tx) error { // a live task that waits, and one of another ownership tree
			tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: root, Background: true, State: keeperState})
			fork := tx.Fork(root, page.Items[len(page.Items)-1].ID)
			tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: fork, Background: true, State: keeperState})
			// and an input queued as Accept queues one, never placed: nothing drives
			in := tx.Append(agent.InboxList.In(root).Address, agent.InboxItem{Mode: agent.ModeFollowUp, Entry: agent.AcceptedEntryDraft{Kind: "user"}})
			tx.SetValue(agent.InputResultValue.In(root).WithKey(strconv.FormatInt(int64(in), 10)).Address, agent.InputResult{Status: agent.InputQueued})
			return nil
		}); err != nil {
			return []string{"the live tasks: " + err.Error()}
		}
		last := e.h.Store().LastSeq()
		got := e.tryBadWrites(ctx, root)
		want := []core.Rule{core.RuleStateAfterEntry, core.RuleUnknownEntryKind, core.RuleUnknownTaskKind, core.RuleDependency,
			core.RuleDependency, core.RuleDependency, core.RuleDependency, core.RuleBadPayload, core.RuleInvalidUTF8, core.RuleInvalidUTF8,
			agent.RuleCollapseSetting, agent.RuleCollapseSetting, agent.RuleCollapseSetting, core.RuleUnknownConv, core.RuleHeadNotVisible, core.RuleEditTarget, core.RuleScratchInMain,
			core.RuleBadAddress, core.RuleUnknownTask, core.RuleUnknownStatus, core.RuleSettleNotTerminal, core.RulePatchTerminal,
			core.RuleDependencyTree, core.RuleTaskTerminal,
			agent.RuleInputResult, agent.RuleInputResult, agent.RuleInputResult, agent.RuleInputResult, agent.RuleInputResult, agent.RuleInputResult,
			core.RuleHeadBackwards}
		if !slices.Equal(got, want) || e.oracle.first != nil || e.h.Store().LastSeq() != last+7 {
			problems = append(problems, fmt.Sprintf("refused by %v (oracle: %v), sequence %d → %d; want %v and only the good writes' seven writes", got, e.oracle.first, last, e.h.Store().LastSeq(), want))
		}
		settings := last + 4 // the conversation of the settings at their bounds
		threshold, _, err1 := e.h.Store().GetValue(ctx, agent.CollapseThresholdValue.In(settings).Address, 0)
		keep, _, err2 := e.h.Store().GetValue(ctx, agent.CollapseKeepRecentValue.In(settings).Address, 0)
		if string(threshold.Value) != "1" || string(keep.Value) != "0" || err1 != nil || err2 != nil {
			problems = append(problems, fmt.Sprintf("conversation %d's collapse settings: threshold %s (%v), keepRecent %s (%v); want 1 and 0", settings, threshold.Value, err1, keep.Value, err2))
		}
		fork, err := e.h.Store().GetConversations(ctx, []storage.ID{last + 1})
		if heads, _ := e.h.Entries(ctx, last+1, storage.Cursor{Limit: storage.PageLimitMax}); err != nil || len(fork) != 1 || len(heads.Items) == 0 || heads.Items[len(heads.Items)-1].ID != last+3 {
			problems = append(problems, fmt.Sprintf("the good write's fork %v (%v) does not end with its two notices", fork, err))
		}
		return problems
	})
}

// A rate-limited attempt's retry waits the policy's backoff for it: the
// first delay after attempt 1, doubled after each later one, at most a
// minute; another wait breaks the rule, and an interrupted attempt's
// retry (at once) is not the rule's.
func TestOracleRetryWaitsItsBackoff(t *testing.T) {
	for _, c := range []struct {
		first time.Duration
		n     int
		want  time.Duration
	}{{0, 1, time.Second}, {0, 2, 2 * time.Second}, {50 * time.Millisecond, 3, 200 * time.Millisecond}, {40 * time.Second, 2, time.Minute}} {
		if got := backoff(c.first, c.n); got != c.want {
			t.Errorf("backoff(%s, %d) = %s; want %s", c.first, c.n, got, c.want)
		}
	}
	now := time.UnixMilli(1_000_000)
	patch := func(attempt int, waits time.Duration, outcome string) error {
		o := newOracle()
		o.now, o.exactClock, o.retryDelay = func() time.Time { return now }, true, 50*time.Millisecond
		o.kinds[1] = agent.GenerationKindName
		state, _ := json.Marshal(map[string]any{"attempt": attempt, "notBefore": now.Add(waits).UnixMilli()})
		row, _ := json.Marshal(agent.UsageRow{TaskID: 1, Attempt: attempt, Outcome: outcome})
		usage := agent.UsageList.Address
		return o.commit(core.Invocation{Task: 1, Method: core.MethodExecute}, true, storage.Range{First: 1, Last: 2}, main1(
			storage.Write{Type: storage.WriteListAppend, Addr: &usage, Value: row},
			storage.Write{Type: storage.WritePatch, ID: 1, Status: "retry_wait", State: state}))
	}
	for name, err := range map[string]error{
		"the first retry":          patch(1, 50*time.Millisecond, "retry"),
		"the third":                patch(3, 200*time.Millisecond, "retry"),
		"an interrupted attempt's": patch(2, 0, "interrupted"),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantRule(t, patch(2, 50*time.Millisecond, "retry"), ruleBackoff)
	wantRule(t, patch(1, 0, "retry"), ruleBackoff)
}

// On a meddling seed an echo tool drives its own conversation and is
// refused at once: the run passes with the attempts made (the planted
// drive-own-scope-allowed shows the rule failing a kernel that lets it).
func TestAToolDrivingItsOwnScopeIsRefused(t *testing.T) {
	sc, _ := findScenario("generated")
	var trace bytes.Buffer
	res, err := runScenario(context.Background(), runSpec{sc: sc, seed: 2, backend: "memory", strategy: "random"}, &trace)
	if err != nil || !res.OK {
		t.Fatalf("generated seed 2: %+v, %v", res, err)
	}
	if n := strings.Count(trace.String(), `"k":"spawn","actor":"self-drive"`); n == 0 {
		t.Fatal("no tool drove its own conversation on a meddling seed")
	}
}

// Recover is for a task a stopped process left in flight: one whose
// execute returned in this process must not be recovered by it, and may
// be after a restart.
func TestRecoverRunsOnlyAfterARestart(t *testing.T) {
	o := newOracle()
	o.statuses[5] = "streaming"
	exec := core.Invocation{Task: 5, ConversationID: 1, Method: core.MethodExecute}
	recover := core.Invocation{Task: 5, ConversationID: 1, Method: core.MethodRecover}
	if err := errors.Join(o.invocation(recover, false), o.invocation(recover, true)); err != nil {
		t.Fatalf("a recover before any execute in the process: %v", err)
	}
	if err := errors.Join(o.invocation(exec, false), o.invocation(exec, true)); err != nil {
		t.Fatal(err)
	}
	var oe *oracleError
	if err := o.invocation(recover, false); !errors.As(err, &oe) || oe.Rule != ruleRecoverAfterRestart {
		t.Fatalf("a recover after the process's own execute returned: %v; want a %s violation", err, ruleRecoverAfterRestart)
	}
	o = newOracle()
	_ = errors.Join(o.invocation(exec, false), o.invocation(exec, true))
	clear(o.executedHere) // what a restart does (resync)
	if err := o.invocation(recover, false); err != nil {
		t.Fatalf("a recover after a restart: %v", err)
	}
}
