package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// summarizing reports whether a request is a summarizer's.
func summarizing(req ai.Request) bool {
	n := len(req.Messages)
	return n > 0 && strings.HasPrefix(req.Messages[n-1].Content.TextOf(), "Summarize the conversation above")
}

// summary answers the summarizer with text, and refuses to answer anything
// else: a test scripts exactly whom the model answers.
func summary(text string) faux.Step {
	return expect("the summarizer", true, faux.Reply(faux.Text(text)))
}

// turnAnswer is an answer to a generation, never to the summarizer.
func turnAnswer(text string) faux.Step { return expect("a generation", false, answer(text)) }

func expect(who string, summarizer bool, step faux.Step) faux.Step {
	return faux.Respond(func(req ai.Request) (faux.Step, error) {
		if summarizing(req) != summarizer {
			return faux.Step{}, fmt.Errorf("this answer was scripted for %s", who)
		}
		return step, nil
	})
}

// settled waits, in virtual time, until a task is terminal.
func (a *loop) settled(ctx context.Context, s *sim.Sim, id storage.ID) *storage.Task {
	a.t.Helper()
	for range 10_000 {
		task, ok, err := a.h.GetTask(ctx, id)
		if err != nil || !ok {
			a.t.Fatalf("task %d: %v (found %v)", id, err, ok)
		}
		if !task.Live() {
			return task
		}
		must(0, s.Runtime().Sleep(ctx, 10*time.Millisecond))
	}
	a.t.Fatalf("task %d is still live after 100 virtual seconds", id)
	return nil
}

// contextOf lists a conversation's derived context as "kind:summary".
func (a *loop) contextOf(ctx context.Context, conv storage.ID) []string {
	a.t.Helper()
	cx := must(core.DeriveContext(ctx, a.h.Store(), conv, 0))
	out := make([]string, len(cx.Entries))
	for i, ce := range cx.Entries {
		out[i] = ce.Entry.Kind + ":" + summarize(ce.Entry)
	}
	return out
}

// turns prompts each text in turn, answered by the faux model with
// "re: text".
func (a *loop) turns(ctx context.Context, c *agent.Conversation, texts ...string) {
	a.t.Helper()
	for _, text := range texts {
		a.faux.AppendResponses(turnAnswer("re: " + text))
		must(c.Prompt(ctx, userText(text), agent.AcceptOptions{}))
	}
}

func keep(n int64) *int64 { return &n }

func collapseState(t testing.TB, task *storage.Task) agent.CollapseState {
	t.Helper()
	var st agent.CollapseState
	must(0, json.Unmarshal(task.State, &st))
	return st
}

func generationState(t testing.TB, task *storage.Task) agent.GenerationState {
	t.Helper()
	var st agent.GenerationState
	must(0, json.Unmarshal(task.State, &st))
	return st
}

const lead = "Summary of the earlier conversation:\n\n"

// A manual collapse summarizes the prefix while a turn streams: the summary
// lands under the running generation, whose answer, and the input it
// answers, stay in context after it.
func TestASummaryLandsUnderARunningGenerationAndLaterEntriesStayInContext(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two", "three")
		a.faux.AppendResponses(expect("the turn", false, answer("re: four").WithDelay(time.Hour)), summary("S"))
		four := must(c.Accept(ctx, userText("four"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		for a.faux.Calls() < 4 {
			must(0, s.Runtime().Sleep(ctx, time.Millisecond))
		}
		id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
		task := a.settled(ctx, s, id)
		if task.Status != "done" {
			t.Fatalf("collapse %s %s; want done while the turn streams", task.Status, task.State)
		}
		placed := a.result(ctx, c, four)
		if placed.Status != agent.InputRunning {
			t.Fatalf("input four is %s when the summary landed; want still running", placed.Status)
		}
		must(0, driving.Wait(ctx))
		want := []string{"summary:" + lead + "S", "user:four", "assistant:re: four"}
		if diff := cmp.Diff(want, a.contextOf(ctx, c.ID)); diff != "" {
			t.Fatalf("context after the turn (-want +got):\n%s", diff)
		}
		st := collapseState(t, task)
		if st.Reason != agent.CollapseManual || !task.Background || st.Summary == 0 {
			t.Fatalf("collapse state %+v, background %v; want manual, background, naming its summary", st, task.Background)
		}
		sum := must(a.h.Store().GetEntries(ctx, []storage.ID{st.Summary}))[st.Summary]
		data := must(core.SummaryKind.Data(sum))
		if data.SummarizedThrough != st.Through || sum.Head != st.FirstRetained || st.FirstRetained != placed.PlacementEntryID {
			t.Fatalf("summary %+v head %d; want summarizedThrough %d and head the kept input %d", data, sum.Head, st.Through, placed.PlacementEntryID)
		}
		must(0, a.h.Close(ctx))
	})
}

// Only a competing head makes a summary stale (§8.4, §10.2): a reset that
// lands while the summarizer runs does, an edit entry does not.
func TestACompetingHeadMakesASummaryStaleWhileAnEditDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(ctx context.Context, c *agent.Conversation, kept storage.ID)
		want      string
	}{
		{"reset", func(ctx context.Context, c *agent.Conversation, _ storage.ID) {
			mustWrite(c.Reset(ctx, ""))
		}, "stale"},
		{"handoff", func(ctx context.Context, c *agent.Conversation, _ storage.ID) {
			mustWrite(c.Reset(ctx, "start over from the plan"))
		}, "stale"},
		{"edit", func(ctx context.Context, c *agent.Conversation, kept storage.ID) {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "pruned"},
					Edits: []storage.ContextEdit{{Target: kept, Action: storage.EditOmit}}})
				return nil
			}))
		}, "done"},
		{"append", func(ctx context.Context, c *agent.Conversation, _ storage.ID) {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				core.AppendUser(tx.Tx, tx.ID, ai.UserText("meanwhile", 0))
				return nil
			}))
		}, "done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				a := openAgent(t, ctx, s, agentOptions{})
				c := a.h.Root()
				a.turns(ctx, c, "one", "two", "three")
				a.faux.AppendResponses(expect("the summarizer", true, faux.Reply(faux.Text("S")).WithDelay(time.Second)))
				id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
				must(a.h.Drive(ctx))
				for a.faux.Calls() < 4 {
					must(0, s.Runtime().Sleep(ctx, time.Millisecond))
				}
				st := collapseState(t, must(a.h.Store().GetTasks(ctx, []storage.ID{id}))[id])
				tc.meanwhile(ctx, c, st.FirstRetained)
				task := a.settled(ctx, s, id)
				st = collapseState(t, task)
				summaries := a.entriesOf(ctx, c.ID, core.SummaryKind.Kind())
				switch tc.want {
				case "stale":
					if task.Status != "failed" || st.Failure != agent.CollapseStale || len(summaries) != 0 {
						t.Fatalf("collapse %s (%s), summaries %v; want failed(stale) and none", task.Status, st.Failure, summaries)
					}
					if cx := a.contextOf(ctx, c.ID); len(cx) == 0 || strings.HasPrefix(cx[0], "summary:") {
						t.Fatalf("context %v; want the competing head's", cx)
					}
				default:
					if task.Status != "done" || len(summaries) != 1 || summaries[0] != st.Summary {
						t.Fatalf("collapse %s (%s), summaries %v; want done with its summary", task.Status, st.Failure, summaries)
					}
				}
				rows := genUsage(ctx, a.h)
				last := rows[len(rows)-1]
				if last.Kind != agent.CollapseKindName || last.TaskID != id || last.Outcome != map[string]string{"stale": "stale", "done": "done"}[tc.want] || last.Usage == nil {
					t.Fatalf("the summarizer's usage row %+v; want the collapse's, outcome %s, usage known", last, tc.want)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// waitWatch checks after every main commit that no live task waits on a
// live collapse: the overflow chain hands the turn on at settlement (§8.2).
type waitWatch struct {
	storage.Storage
	problems []string
}

func (w *waitWatch) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := w.Storage.Commit(ctx, b)
	if err != nil || b.Kind != storage.BatchMain {
		return r, err
	}
	live := true
	tasks := must(storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return w.Storage.ScanTasks(ctx, storage.TaskQuery{Cursor: c, Live: &live})
	}))
	for _, wait := range agent.CollapseWaits(tasks) {
		w.problems = append(w.problems, fmt.Sprintf("after commit %d–%d, %s", r.First, r.Last, wait))
	}
	return r, nil
}

// An overflow settles the generation failed(overflow) and hands the turn to
// a foreground collapse whose settlement creates the one retry, carrying
// the input group and the attempts: nothing live waits on the collapse, and
// the input is answered once.
func TestOverflowCollapsesThenRetriesOnceAndNothingWaitsOnTheCollapse(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		watch := &waitWatch{Storage: memory.New()}
		a := openAgent(t, ctx, s, agentOptions{store: watch})
		c := a.h.Root()
		must(0, must(c.Config(agent.CollapseKind)).Set(ctx, map[string]any{"keepRecent": 0}))
		a.turns(ctx, c, "one", "two", "three")
		a.faux.AppendResponses(expect("the turn", false, faux.ContextOverflow()), summary("S"), turnAnswer("re: four"))
		four := must(c.Accept(ctx, userText("four"), agent.AcceptOptions{}))
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		if len(watch.problems) > 0 {
			t.Fatalf("a live task waited on the collapse:\n%s", strings.Join(watch.problems, "\n"))
		}
		r := a.result(ctx, c, four)
		answer, _ := genMust2(a.h.GetEntry(ctx, r.ResultEntryID))
		if r.Status != agent.InputDone || answer == nil || summarize(answer) != "re: four" {
			t.Fatalf("input four = %+v; want done with the retry's answer", r)
		}
		gens := a.tasksOf(ctx, agent.GenerationKindName)
		over, retry := gens[len(gens)-2], gens[len(gens)-1]
		overSt, retrySt := generationState(t, over), generationState(t, retry)
		collapse := a.tasksOf(ctx, agent.CollapseKindName)
		if len(collapse) != 1 {
			t.Fatalf("%d collapses; want one", len(collapse))
		}
		cst := collapseState(t, collapse[0])
		switch {
		case over.Status != "failed" || !strings.HasPrefix(overSt.Reason, "overflow") || overSt.Collapse != collapse[0].ID:
			t.Fatalf("the overflowed generation is %s (%q, collapse %d); want failed(overflow) naming collapse %d", over.Status, overSt.Reason, overSt.Collapse, collapse[0].ID)
		case collapse[0].Status != "done" || collapse[0].Background || cst.Reason != agent.CollapseOverflow || cst.Generation != retry.ID:
			t.Fatalf("collapse %s background %v state %+v; want a done foreground overflow collapse that created %d", collapse[0].Status, collapse[0].Background, cst, retry.ID)
		case len(retry.After) != 0 || !retrySt.OverflowRetried || retrySt.AfterCollapse != collapse[0].ID:
			t.Fatalf("the retry waits on %v with state %+v; want nothing to wait on, one overflow retry after collapse %d", retry.After, retrySt, collapse[0].ID)
		case !slices.Equal(retrySt.Inputs, []storage.ID{four}) || retrySt.Attempt != 2:
			t.Fatalf("the retry carries inputs %v at attempt %d; want [%d] and both attempts counted", retrySt.Inputs, retrySt.Attempt, four)
		}
		want := []string{"summary:" + lead + "S", "user:four", "system:system", "assistant:re: four"}
		if diff := cmp.Diff(want, a.contextOf(ctx, c.ID)); diff != "" {
			t.Fatalf("context (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"done", "done", "done", "overflow", "done", "done"}, genOutcomes(genUsage(ctx, a.h))); diff != "" {
			t.Fatalf("usage outcomes (-want +got):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
}

// The retry after an overflow happens once: a second overflow fails the
// input like any provider error. With nothing to collapse the first one
// does, without a collapse.
func TestOverflowRetriesOnceAndNeedsSomethingToCollapse(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.faux.AppendResponses(expect("the turn", false, faux.ContextOverflow()))
		first := must(c.Accept(ctx, userText("huge"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		if r := a.result(ctx, c, first); r.Status != agent.InputFailed || !strings.Contains(r.Reason, "nothing to collapse") {
			t.Fatalf("an overflow with nothing before it = %+v; want failed, nothing to collapse", r)
		}
		if n := len(a.tasksOf(ctx, agent.CollapseKindName)); n != 0 {
			t.Fatalf("%d collapses; want none", n)
		}
		must(0, must(c.Config(agent.CollapseKind)).Set(ctx, map[string]any{"keepRecent": 0}))
		a.turns(ctx, c, "one", "two")
		a.faux.AppendResponses(expect("the turn", false, faux.ContextOverflow()), summary("S"), expect("the retry", false, faux.ContextOverflow()))
		again := must(c.Accept(ctx, userText("still huge"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		if r := a.result(ctx, c, again); r.Status != agent.InputFailed || !strings.HasPrefix(r.Reason, "context overflow") || strings.Contains(r.Reason, "nothing to collapse") {
			t.Fatalf("a second overflow = %+v; want failed as a provider error, without trying to collapse again", r)
		}
		if n, calls := len(a.tasksOf(ctx, agent.CollapseKindName)), a.faux.Calls(); n != 1 || calls != 6 {
			t.Fatalf("%d collapses and %d provider calls; want one collapse and no third try", n, calls)
		}
		must(0, a.h.Close(ctx))
	})
}

// thresholdModel is a faux model with a window of 100,000 tokens: a
// threshold of 0.9 leaves a short conversation alone and one of 0.0001
// (10 tokens) does not.
var thresholdModel = faux.Options{Models: []ai.Model{{ID: "m", ContextWindow: 100_000}}}

// Past the threshold, a turn's generation collapses first (§8.2): one
// commit creates the collapse and a generation after it that carries the
// turn, and settles; the request that answers goes out after the summary.
func TestThresholdCollapsesBeforeTheTurnsRequest(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{faux: thresholdModel})
		c := a.h.Root()
		cfg := must(c.Config(agent.CollapseKind))
		must(0, cfg.Set(ctx, map[string]any{"threshold": 0.9, "keepRecent": 0}))
		a.turns(ctx, c, "one", "two")
		if n := len(a.tasksOf(ctx, agent.CollapseKindName)); n != 0 {
			t.Fatalf("%d collapses under the threshold; want none", n)
		}
		must(0, cfg.Set(ctx, map[string]any{"threshold": 0.0001}))
		a.faux.AppendResponses(summary("S"), turnAnswer("re: three"))
		three := must(c.Prompt(ctx, userText("three"), agent.AcceptOptions{}))
		if summarize(three) != "re: three" {
			t.Fatalf("answer %q; want re: three", summarize(three))
		}
		reqs := a.faux.Requests()
		if !summarizing(reqs[len(reqs)-2]) {
			t.Fatalf("the summarizer did not run before the turn's request")
		}
		final := reqs[len(reqs)-1]
		if text := final.Messages[1].Content.TextOf(); text != lead+"S" {
			t.Fatalf("the turn's request begins %q after its baseline; want the summary", text)
		}
		for _, m := range final.Messages {
			if m.Content.TextOf() == "one" {
				t.Fatal("the turn's request still holds the first turn")
			}
		}
		gens := a.tasksOf(ctx, agent.GenerationKindName)
		first, second := gens[len(gens)-2], gens[len(gens)-1]
		collapse := a.tasksOf(ctx, agent.CollapseKindName)
		switch {
		case len(collapse) != 1 || collapse[0].Background || collapseState(t, collapse[0]).Reason != agent.CollapseThreshold:
			t.Fatalf("collapses %v; want one foreground threshold collapse", collapse)
		case first.Status != "done" || generationState(t, first).Collapse != collapse[0].ID:
			t.Fatalf("the first generation is %s %s; want done, handing the turn to collapse %d", first.Status, first.State, collapse[0].ID)
		case !slices.Equal(second.After, []storage.ID{collapse[0].ID}) || generationState(t, second).AfterCollapse != collapse[0].ID:
			t.Fatalf("the second generation waits on %v; want collapse %d", second.After, collapse[0].ID)
		}
		// A fresh baseline opens the epoch the summary started.
		var baselines int
		for _, id := range a.entriesOf(ctx, c.ID, core.SystemKind.Kind()) {
			if id > collapseState(t, collapse[0]).Summary && a.systemData(ctx, id).Baseline {
				baselines++
			}
		}
		if baselines != 1 {
			t.Fatalf("%d baselines after the summary; want one", baselines)
		}
		must(0, a.h.Close(ctx))
	})
}

// Aborting a running collapse settles it without a summary, while appends
// and turns go on through it: the collapse never holds the line.
func TestAbortingARunningCollapseLeavesAppendsFlowing(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		a.faux.AppendResponses(expect("the summarizer", true, faux.Reply(faux.Text("S")).WithDelay(time.Hour)))
		id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
		must(a.h.Drive(ctx))
		for a.faux.Calls() < 3 {
			must(0, s.Runtime().Sleep(ctx, time.Millisecond))
		}
		start := s.Runtime().Now()
		for i := range 5 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				core.AppendUser(tx.Tx, tx.ID, ai.UserText(fmt.Sprintf("append %d", i), 0))
				return nil
			}))
		}
		a.turns(ctx, c, "three")
		if waited := s.Runtime().Now().Sub(start); waited >= time.Hour {
			t.Fatalf("appends and a turn took %s of virtual time; they waited on the summarizer", waited)
		}
		must(0, a.h.AbortTask(ctx, id))
		task := a.settled(ctx, s, id)
		if task.Status != "aborted" || len(a.entriesOf(ctx, c.ID, core.SummaryKind.Kind())) != 0 {
			t.Fatalf("collapse %s; want aborted, no summary", task.Status)
		}
		rows := genUsage(ctx, a.h)
		last := rows[len(rows)-1]
		if last.TaskID != id || last.Outcome != "aborted" || last.Usage != nil {
			t.Fatalf("usage row %+v; want the collapse's aborted call, its cost unknown", last)
		}
		if n := len(a.entriesOf(ctx, c.ID, core.UserKind.Kind())); n != 8 {
			t.Fatalf("%d user entries; want the three turns and five appends", n)
		}
		must(0, a.h.Close(ctx))
	})
}

// Input accepted while a threshold collapse runs waits like any input on a
// busy conversation and lands after it.
func TestInputQueuedDuringACollapseLands(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{faux: thresholdModel})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		must(0, must(c.Config(agent.CollapseKind)).Set(ctx, map[string]any{"threshold": 0.0001, "keepRecent": 0}))
		// The later turn is past the threshold too: its generation collapses
		// again first.
		a.faux.AppendResponses(expect("the summarizer", true, faux.Reply(faux.Text("S")).WithDelay(time.Second)),
			turnAnswer("re: three"), summary("S2"), turnAnswer("re: later"))
		three := must(c.Accept(ctx, userText("three"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		for len(a.tasksOf(ctx, agent.CollapseKindName)) == 0 || a.faux.Calls() < 3 {
			must(0, s.Runtime().Sleep(ctx, time.Millisecond))
		}
		later := must(c.FollowUp(ctx, userText("later")))
		if r := a.result(ctx, c, later); r.Status != agent.InputQueued {
			t.Fatalf("input during the collapse is %s; want queued", r.Status)
		}
		must(0, driving.Wait(ctx))
		must(c.Drive(ctx))
		for _, in := range []storage.ID{three, later} {
			if r := a.result(ctx, c, in); r.Status != agent.InputDone {
				t.Fatalf("input %d = %+v; want done", in, r)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

// A second collapse summarizes the first summary with what followed it,
// so the newest head carries what the old one said; after each head the
// next turn writes one fresh baseline.
func TestRepeatedCompactionSubsumesTheOldSummary(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		var ids []storage.ID
		for i, next := range []string{"three", "four"} {
			a.faux.AppendResponses(summary(fmt.Sprintf("S%d", i+1)))
			id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
			must(a.h.Drive(ctx))
			if task := a.settled(ctx, s, id); task.Status != "done" {
				t.Fatalf("collapse %d: %s %s", i+1, task.Status, task.State)
			}
			ids = append(ids, id)
			a.turns(ctx, c, next)
		}
		var second ai.Request
		for _, r := range a.faux.Requests() {
			if summarizing(r) {
				second = r
			}
		}
		if !strings.Contains(second.Messages[1].Content.TextOf(), "S1") || !strings.Contains(second.Messages[len(second.Messages)-1].Content.TextOf(), "summary of earlier work") {
			t.Fatalf("the second summarizer request does not carry the first summary: %v", second.Messages)
		}
		want := []string{"summary:" + lead + "S2", "user:three", "system:system", "assistant:re: three", "user:four", "system:system", "assistant:re: four"}
		if diff := cmp.Diff(want, a.contextOf(ctx, c.ID)); diff != "" {
			t.Fatalf("context (-want +got):\n%s", diff)
		}
		systems := a.entriesOf(ctx, c.ID, core.SystemKind.Kind())
		var sums []storage.ID
		for _, id := range ids {
			sums = append(sums, collapseState(t, must(a.h.GetTasks(ctx, []storage.ID{id}))[id]).Summary)
		}
		for i, sum := range sums {
			var after []bool
			for _, e := range systems {
				if e > sum && (i+1 == len(sums) || e < sums[i+1]) {
					after = append(after, a.systemData(ctx, e).Baseline)
				}
			}
			if len(after) == 0 || !after[0] || slices.Contains(after[1:], true) {
				t.Fatalf("system entries after summary %d are baselines %v; want one baseline first", sum, after)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

// before_collapse may decline, supply the summary (no summarizer call) or
// give the summarizer instructions; it sees the reason and the prefix.
func TestBeforeCollapseDeclinesSuppliesOrInstructs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		out    agent.BeforeCollapseOutput
		steps  []faux.Step
		status string
		text   string
	}{
		{"decline", agent.BeforeCollapseOutput{Decline: true}, nil, "failed", ""},
		{"supply", agent.BeforeCollapseOutput{Summary: "from the hook"}, nil, "done", lead + "from the hook"},
		{"instruct", agent.BeforeCollapseOutput{Instructions: "keep the API decisions verbatim"}, []faux.Step{summary("S")}, "done", lead + "S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				a := openAgent(t, ctx, s, agentOptions{})
				c := a.h.Root()
				a.turns(ctx, c, "one", "two")
				var seen agent.BeforeCollapseInput
				a.h.Hooks().On(agent.CollapseKind, agent.HookBeforeCollapse, core.Hook(func(_ context.Context, in agent.BeforeCollapseInput) (agent.BeforeCollapseOutput, error) {
					seen = in
					return tc.out, nil
				}), core.HookOptions{})
				a.faux.AppendResponses(tc.steps...)
				calls := a.faux.Calls()
				id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
				must(a.h.Drive(ctx))
				task := a.settled(ctx, s, id)
				st := collapseState(t, task)
				if task.Status != tc.status || a.faux.Calls()-calls != len(tc.steps) {
					t.Fatalf("collapse %s (%s) after %d summarizer calls; want %s after %d", task.Status, st.Failure, a.faux.Calls()-calls, tc.status, len(tc.steps))
				}
				if seen.Reason != agent.CollapseManual || len(seen.Entries) == 0 || seen.Entries[len(seen.Entries)-1].ID != st.Through {
					t.Fatalf("the hook saw %+v; want the manual reason and the prefix through %d", seen, st.Through)
				}
				if tc.text != "" {
					if got := a.contextOf(ctx, c.ID)[0]; got != "summary:"+tc.text {
						t.Fatalf("context starts %q; want the summary %q", got, tc.text)
					}
				} else if st.Failure != agent.CollapseDeclined {
					t.Fatalf("failure %q; want declined", st.Failure)
				}
				if tc.out.Instructions != "" {
					reqs := a.faux.Requests()
					last := reqs[len(reqs)-1].Messages
					if !strings.Contains(last[len(last)-1].Content.TextOf(), tc.out.Instructions) {
						t.Fatalf("the summarizer's request lacks the hook's instructions")
					}
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// What a collapse cannot do is a typed error that names the conversation,
// and a setting out of range is refused on the line with nothing written.
func TestCollapseMistakesAreTypedAndLoseNothing(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		var ce *agent.CollapseError
		if _, err := c.Collapse(ctx, agent.CollapseOptions{}); !errors.As(err, &ce) || !errors.Is(err, agent.ErrNothingToCollapse) || ce.ConversationID != c.ID {
			t.Fatalf("a collapse of an empty conversation = %v; want ErrNothingToCollapse naming it", err)
		}
		a.turns(ctx, c, "one", "two")
		if _, err := c.Collapse(ctx, agent.CollapseOptions{}); !errors.Is(err, agent.ErrNothingToCollapse) {
			t.Fatalf("a collapse of what keepRecent keeps = %v; want ErrNothingToCollapse", err)
		}
		if _, err := c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(-1)}); err == nil || !strings.Contains(err.Error(), "keepRecent -1") {
			t.Fatalf("a negative keepRecent = %v; want it named", err)
		}
		a.faux.AppendResponses(expect("the summarizer", true, faux.Reply(faux.Text("S")).WithDelay(time.Hour)))
		id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
		if _, err := c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}); !errors.As(err, &ce) || !errors.Is(err, agent.ErrCollapseInProgress) || ce.Task != id {
			t.Fatalf("a second collapse = %v; want ErrCollapseInProgress naming task %d", err, id)
		}
		cfg := must(c.Config(agent.CollapseKind))
		last := a.h.Store().LastSeq()
		for _, bad := range []map[string]any{{"threshold": 1.5}, {"threshold": -0.1}, {"threshold": "half"}, {"keepRecent": -5}, {"keepRecent": 2.5}} {
			if err := cfg.Set(ctx, bad); core.RuleOf(err) != agent.RuleCollapseSetting || !strings.Contains(err.Error(), "pi.collapse") {
				t.Fatalf("setting %v = %v; want %s naming the value", bad, err, agent.RuleCollapseSetting)
			}
		}
		if a.h.Store().LastSeq() != last {
			t.Fatal("a refused setting wrote something")
		}
		must(0, cfg.Set(ctx, map[string]any{"threshold": 0.8, "keepRecent": 1000}))
		got := must(cfg.Get(ctx))
		if string(got["threshold"]) != "0.8" || string(got["keepRecent"]) != "1000" {
			t.Fatalf("settings read back %s", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// A crash while summarizing: with the answer in scratch the restart
// publishes it without asking again; without it the call is retried, the
// interrupted one on record with its cost unknown.
func TestACollapseRecoversFromACrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold fault.Fault
		// calls the restarted process makes, and the usage outcomes of
		// the collapse.
		calls    int
		outcomes []string
	}{
		{"after the candidate", fault.Fault{Name: "publish", Kind: fault.Hold, Commit: 3, Batch: storage.BatchMain}, 0, []string{"done"}},
		{"before the candidate", fault.Fault{Name: "candidate", Kind: fault.Hold, Commit: 1, Batch: storage.BatchScratch}, 1, []string{"interrupted", "done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				base := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{}, nil)
				a0 := openAgent(t, ctx, s, agentOptions{store: base})
				c0 := a0.h.Root()
				a0.turns(ctx, c0, "one", "two")
				must(0, a0.h.Close(ctx))
				// Commits count from here: the collapse's creation is main
				// commit 1, its summarizing status 2 and the publish 3; the
				// candidate is its first scratch commit.
				store := base.Reopen(fault.Plan{Faults: []fault.Fault{tc.hold}})
				a1 := openAgent(t, ctx, s, agentOptions{store: store})
				a1.faux.AppendResponses(summary("S"))
				id := must(a1.h.Root().Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
				driving := simtest.DriveInActor(ctx, s, a1.h.Root(), nil)
				must(0, store.WaitHeld(ctx, tc.hold.Name))

				a2 := openAgent(t, ctx, s, agentOptions{store: store.Reopen(fault.Plan{})})
				a2.faux.AppendResponses(summary("S again"))
				must(a2.h.Drive(ctx))
				task := a2.settled(ctx, s, id)
				want := map[int]string{0: "S", 1: "S again"}[tc.calls]
				if task.Status != "done" || a2.faux.Calls() != tc.calls || a2.contextOf(ctx, 1)[0] != "summary:"+lead+want {
					t.Fatalf("after the restart the collapse is %s with %d calls, context %v; want done after %d with %q", task.Status, a2.faux.Calls(), a2.contextOf(ctx, 1), tc.calls, want)
				}
				var outcomes []string
				for _, r := range genUsage(ctx, a2.h) {
					if r.TaskID == id {
						outcomes = append(outcomes, r.Outcome)
					}
				}
				if diff := cmp.Diff(tc.outcomes, outcomes); diff != "" {
					t.Fatalf("the collapse's usage outcomes (-want +got):\n%s", diff)
				}
				must(0, a2.h.Close(ctx))
				simtest.CloseCrashed(ctx, a1.h)
				must(0, driving.Wait(ctx))
			})
		})
	}
}

// A collapse's task events say why it runs and, once done, which entry is
// its summary; the context event fires when the summary lands.
func TestAWatchSeesTheCollapseAndTheNewContext(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		w := must(a.h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1}))
		var events []core.ConversationEvent
		must(0, w.Start(ctx, func(e core.ConversationEvent) { events = append(events, e) }))
		a.faux.AppendResponses(summary("S"))
		id := must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
		must(a.h.Drive(ctx))
		sum := collapseState(t, a.settled(ctx, s, id)).Summary
		for i := 0; i < 100 && w.View().ReadAt < a.h.Store().LastSeq(); i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		var reasons []agent.CollapseReason
		var summaryIDs []storage.ID
		contexts := 0
		for _, e := range events {
			switch {
			case (e.Type == core.EventTaskStart || e.Type == core.EventTaskUpdate || e.Type == core.EventTaskEnd) && e.Task.ID == id:
				st := collapseState(t, e.Task)
				reasons, summaryIDs = append(reasons, st.Reason), append(summaryIDs, st.Summary)
			case e.Type == core.EventContext && len(e.IDs) > 0 && e.IDs[0] == sum:
				contexts++
			}
		}
		if len(reasons) == 0 || slices.ContainsFunc(reasons, func(r agent.CollapseReason) bool { return r != agent.CollapseManual }) || summaryIDs[len(summaryIDs)-1] != sum {
			t.Fatalf("task events: reasons %v, summaries %v; want manual throughout and summary %d at the end", reasons, summaryIDs, sum)
		}
		if contexts != 1 {
			t.Fatalf("%d context events start with the summary; want one", contexts)
		}
		must(0, a.h.Close(ctx))
	})
}

// Reset starts a new context at once on an idle conversation; on a busy
// one it waits for the boundary, so that no exchange is cut in half.
func TestResetLandsAtOnceWhenIdleAndAtTheBoundaryWhenBusy(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		slow := toolFunc("a", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			if err := rt.Sleep(ctx, rt.Now().Add(time.Second)); err != nil {
				return err
			}
			out.Write("slow done")
			return nil
		})
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{slow}})
		c := a.h.Root()
		a.turns(ctx, c, "one")
		_, entry := mustWrite(c.Reset(ctx, ""))
		if entry == 0 || len(a.contextOf(ctx, c.ID)) != 1 {
			t.Fatalf("reset on an idle conversation placed %d, context %v; want the reset alone", entry, a.contextOf(ctx, c.ID))
		}
		a.faux.AppendResponses(calls("a"), turnAnswer("re: two"))
		two := must(c.Accept(ctx, userText("two"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		for len(a.tasksOf(ctx, agent.ToolKindName)) == 0 {
			must(0, s.Runtime().Sleep(ctx, time.Millisecond))
		}
		in, placed := mustWrite(c.Reset(ctx, "carry on with the plan"))
		if placed != 0 {
			t.Fatalf("a handoff during a tool exchange was placed at once (%d); want it queued", placed)
		}
		must(0, driving.Wait(ctx))
		r := a.result(ctx, c, in)
		handoff := must(a.h.Store().GetEntries(ctx, []storage.ID{r.PlacementEntryID}))[r.PlacementEntryID]
		tools := a.entriesOf(ctx, c.ID, core.ToolResultKind.Kind())
		if r.Status != agent.InputPlaced || handoff == nil || handoff.Kind != core.HandoffKind.Kind() || handoff.ID < tools[len(tools)-1] {
			t.Fatalf("the handoff = %+v; want placed after the tool exchange", r)
		}
		if got := a.result(ctx, c, two); got.Status != agent.InputDone {
			t.Fatalf("the turn = %+v; want done", got)
		}
		if cx := a.contextOf(ctx, c.ID); cx[0] != "handoff:carry on with the plan" {
			t.Fatalf("context %v; want it to start at the handoff", cx)
		}
		must(0, a.h.Close(ctx))
	})
}

// A fork collapses like any conversation: its prefix holds entries it
// shares with its source, which keeps its own context.
func TestAForkCollapsesWithoutTouchingItsSource(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		before := a.contextOf(ctx, c.ID)
		answers := a.entriesOf(ctx, c.ID, core.AssistantKind.Kind())
		fork := must(c.Fork(ctx, answers[len(answers)-1], core.ForkOptions{}))
		a.turns(ctx, fork, "three")
		a.faux.AppendResponses(summary("S"))
		id := must(fork.Collapse(ctx, agent.CollapseOptions{KeepRecent: keep(0)}))
		must(a.h.Drive(ctx))
		if task := a.settled(ctx, s, id); task.Status != "done" {
			t.Fatalf("the fork's collapse is %s %s; want done", task.Status, task.State)
		}
		// The fork's turn wrote no system entry (the source's baseline told
		// the model already), so the summary keeps just the turn.
		want := []string{"summary:" + lead + "S", "user:three", "assistant:re: three"}
		if diff := cmp.Diff(want, a.contextOf(ctx, fork.ID)); diff != "" {
			t.Fatalf("the fork's context (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, a.contextOf(ctx, c.ID)); diff != "" {
			t.Fatalf("the source's context changed (-before +after):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
}
