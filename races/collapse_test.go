package races

import (
	"context"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The collapse rows (§8.4, §10.2). The collapse runs as its task's actor,
// and so does its before_collapse handler, which names the point where the
// summarizer is about to be asked; after it the collapse takes the line
// twice, for its candidate in scratch and for its publish commit.

// atSummarizer registers a before_collapse handler that sets the returned
// event and then yields at point "summarizer", as the collapse's actor: the
// host waits for the event, so that the collapse is running when the
// forced order starts.
func atSummarizer(s *sim.Sim, h *agent.Harness) core.Event {
	ready := s.Runtime().NewEvent("summarizing")
	h.Hooks().On(agent.CollapseKind, agent.HookBeforeCollapse, core.Hook(func(ctx context.Context, _ agent.BeforeCollapseInput) (any, error) {
		ready.Set()
		sim.Yield(ctx, "summarizer")
		return nil, nil
	}), core.HookOptions{})
	return ready
}

// summaryLandsAfterACompetingHead: while a manual collapse summarizes, the
// host commits an edit and then a reset. Forward: the reset lands before
// the publish commit, which finds a newer head and settles failed(stale)
// without a summary. Reverse: the publish lands first and the summary is
// done, the edit before it notwithstanding; the reset then heads the
// context. Either way the context starts at the reset.
func summaryLandsAfterACompetingHead(o order) cell {
	const collapse storage.ID = 33
	exec := actor(collapse, core.MethodExecute)
	// The collapse takes the line twice before the summarizer (its status,
	// the hook chain's read), and twice after (the candidate, the publish).
	start := []string{label(exec, "lock:line"), label(exec, "lock:line"), label(exec, "summarizer")}
	points := append(start, map[order][]string{
		forward: {"host:edit", "host:lock:line", "host:reset", "host:lock:line", label(exec, "lock:line"), label(exec, "lock:line")},
		reverse: {"host:edit", "host:lock:line", label(exec, "lock:line"), label(exec, "lock:line"), "host:reset", "host:lock:line"},
	}[o]...)
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			status, failure string
			summaries       int
			edit, summary   storage.ID
			head            string
		)
		main := func(ctx context.Context) {
			a := openAgent(ctx, s, agentOptions{})
			c := a.h.Root()
			summarizing := atSummarizer(s, a.h)
			a.faux.SetResponses(say("re: one"), say("re: two"), say("S"))
			for _, text := range []string{"one", "two"} {
				must(c.Prompt(ctx, ai.PlainText(text), agent.AcceptOptions{}))
			}
			// The edit omits the newest answer, which the collapse keeps.
			page := must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 100}, ConversationID: rootID, Kind: core.AssistantKind.Kind()}))
			target := page.Items[len(page.Items)-1].ID
			zero := int64(0)
			expectID("collapse", must(c.Collapse(ctx, agent.CollapseOptions{KeepRecent: &zero})), collapse)
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) { must(a.h.Drive(ctx)) })
			g.Go(ctx, "host", func(ctx context.Context) {
				check(summarizing.Wait(ctx))
				sim.Yield(ctx, "edit")
				r := must(c.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "pruned"},
						Edits: []storage.ContextEdit{{Target: target, Action: storage.EditOmit}}})
					return nil
				}))
				edit = r.First
				sim.Yield(ctx, "reset")
				must2(c.Reset(ctx, ""))
			})
			g.Wait(ctx)
			check(a.watch.settledEvent(collapse).Wait(ctx))
			task := must(a.h.GetTasks(ctx, []storage.ID{collapse}))[collapse]
			st := decoded[agent.CollapseState](task)
			status, failure, summary = task.Status, st.Failure, st.Summary
			summaries = len(must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: rootID, Kind: core.SummaryKind.Kind()})).Items)
			cx := must(core.DeriveContext(ctx, a.h.Store(), rootID, 0))
			head = cx.Head.Kind
			check(a.h.Close(ctx))
		}
		verify := func() error {
			switch {
			case o == forward && (status != "failed" || failure != agent.CollapseStale || summaries != 0):
				return fmt.Errorf("reset first: collapse %s (%s), %d summaries; want failed(stale) and none", status, failure, summaries)
			case o == reverse && (status != "done" || summaries != 1 || summary < edit):
				return fmt.Errorf("publish first: collapse %s (%s), %d summaries (summary %d, edit %d); want done after the edit", status, failure, summaries, summary, edit)
			case head != core.ResetKind.Kind():
				return fmt.Errorf("the context is headed by a %s; want the reset, the newest head", head)
			}
			return nil
		}
		return main, verify
	}}
}

// collapseWaitWatch checks after every main commit that no live task waits
// on a live collapse.
type collapseWaitWatch struct {
	storage.Storage
	problems []string
}

func (w *collapseWaitWatch) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := w.Storage.Commit(ctx, b)
	if err != nil || b.Kind != storage.BatchMain {
		return r, err
	}
	for _, wait := range agent.CollapseWaits(liveTasks(ctx, w.Storage)) {
		w.problems = append(w.problems, fmt.Sprintf("after commit %d, %s", r.First, wait))
	}
	return r, nil
}

// overflowRetryWhileCollapseRuns: a turn overflows, its generation settles
// and an overflow collapse takes the turn; while it summarizes the host
// accepts a followUp. Forward: the followUp lands before the collapse
// settles; reverse: after, while the retry runs. Either way no commit
// leaves a live task waiting on the collapse, the collapse's settlement
// creates the one retry, and both inputs are answered once.
func overflowRetryWhileCollapseRuns(o order) cell {
	const collapse storage.ID = 41
	exec := actor(collapse, core.MethodExecute)
	start := []string{label(exec, "lock:line"), label(exec, "lock:line"), label(exec, "summarizer")}
	points := append(start, map[order][]string{
		forward: {"host:accept", "host:lock:line", label(exec, "lock:line"), label(exec, "lock:line")},
		reverse: {label(exec, "lock:line"), label(exec, "lock:line"), "host:accept", "host:lock:line"},
	}[o]...)
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			watch              = &collapseWaitWatch{Storage: memory.New()}
			three, later       agent.InputResult
			successor, laterID storage.ID
			created, calls     int
			collapseSettled    bool
		)
		main := func(ctx context.Context) {
			a := openAgent(ctx, s, agentOptions{store: watch})
			c := a.h.Root()
			summarizing := atSummarizer(s, a.h)
			must(0, must(c.Config(agent.CollapseKind)).Set(ctx, map[string]any{"keepRecent": 0}))
			a.faux.SetResponses(say("re: one"), say("re: two"), faux.ContextOverflow(), say("S"), say("re: three"), say("re: later"))
			for _, text := range []string{"one", "two"} {
				must(c.Prompt(ctx, ai.PlainText(text), agent.AcceptOptions{}))
			}
			threeID := must(c.Accept(ctx, ai.PlainText("three"), agent.AcceptOptions{}))
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)) })
			g.Go(ctx, "host", func(ctx context.Context) {
				check(summarizing.Wait(ctx))
				sim.Yield(ctx, "accept")
				laterID = must(c.FollowUp(ctx, ai.PlainText("later")))
			})
			g.Wait(ctx)
			must(c.Drive(ctx))
			three, _ = resultOf(ctx, a.h.Store(), rootID, threeID)
			later, _ = resultOf(ctx, a.h.Store(), rootID, laterID)
			cs := tasksOfKind(ctx, a.h.Store(), agent.CollapseKindName)
			created = len(cs)
			if created == 1 {
				expectID("collapse", cs[0].ID, collapse)
				collapseSettled = cs[0].Status == "done"
				successor = decoded[agent.CollapseState](cs[0]).Generation
			}
			calls = a.faux.Calls()
			check(a.h.Close(ctx))
		}
		verify := func() error {
			switch {
			case len(watch.problems) > 0:
				return fmt.Errorf("a live task waited on the collapse: %s", strings.Join(watch.problems, "; "))
			case created != 1 || !collapseSettled || successor == 0:
				return fmt.Errorf("%d collapses (done %v) creating generation %d; want one, done, creating the retry", created, collapseSettled, successor)
			case three.Status != agent.InputDone || later.Status != agent.InputDone:
				return fmt.Errorf("the overflowed input is %s and the followUp %s; want both done", three.Status, later.Status)
			case o == forward && laterID > successor, o == reverse && laterID < successor:
				return fmt.Errorf("the followUp is %d and the retry %d; want the followUp %s the collapse's settlement", laterID, successor, map[order]string{forward: "before", reverse: "after"}[o])
			case calls != 6:
				return fmt.Errorf("%d provider calls; want six: two turns, the overflow, the summarizer, the retry, the followUp", calls)
			}
			return nil
		}
		return main, verify
	}}
}
