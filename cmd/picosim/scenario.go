package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// scenario is one built-in agent-loop scenario: a program over a session
// that returns an error when an invariant it checks breaks.
type scenario struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env) error
	// shell gives the session the shell tools (bash, job) over the fake
	// processes of shellScripts.
	shell bool
	// generated runs a program (program.go): the session's tools and
	// shell are the program's.
	generated bool
}

// scenarios are the built-in suite, in the order `picosim list` shows.
var scenarios = []scenario{
	{name: "basic-turn", summary: "one input, one answer", run: basicTurn},
	{name: "parallel-tools", summary: "an answer that calls two tools at once, then answers", run: parallelTools},
	{name: "input-while-busy", summary: "steer, followUp, nextRun and write while a turn runs", run: inputWhileBusy},
	{name: "abort-mid-stream", summary: "a conversation abort while the answer streams", run: abortMidStream},
	{name: "retry-and-deferred", summary: "a rate-limited attempt, then a deferred answer polled to the end", run: retryAndDeferred},
	{name: "crash-reopen", summary: "the process stops mid-turn; a new one reopens and drives to the end", run: crashReopen},
	{name: "fork-and-continue", summary: "fork at an answer and continue both conversations", run: forkAndContinue},
	{name: "fork-at-start", summary: "fork at the start carrying a sticky value while the source goes on", run: forkAtStart},
	{name: "shutdown-queued", summary: "shutdown with queued input, which survives a reopen", run: shutdownQueued},
	{name: "collapse-under-turn", summary: "a manual collapse summarizes while a turn streams", run: collapseUnderTurn},
	{name: "overflow-chain", summary: "an overflowing turn is collapsed and retried once", run: overflowChain},
	{name: "stale-summary", summary: "a reset or a handoff lands while a collapse summarizes, which makes it stale", run: staleSummary},
	{name: "subagent-run-restart", summary: "a subagent run across a stop and reopen: the child is driven again, made once", run: subagentRunRestart},
	{name: "abort-while-recovering", summary: "an abort lands while the reopened session recovers a subagent run", run: abortWhileRecovering},
	{name: "spawn-abort-stop", summary: "a parent abort ends its run child and spares its spawned one, which stop ends", run: spawnAbortStop},
	{name: "subagent-nest", summary: "subagent runs nested to the depth bound: the deepest child's run is refused, every level answers", run: subagentNest},
	{name: "bash-outlives-budget", summary: "a bash call outlives its budget, settles delegated, and its job's end arrives as one notice", run: bashOutlivesBudget, shell: true},
	{name: "schedule-restart", summary: "a recurring job keeps one id across a stop and reopen and runs no backlog", run: scheduleRestart, shell: true},
	{name: "abort-kills-job", summary: "a conversation abort of a waiting bash call kills its job", run: abortKillsJob, shell: true},
	{name: "provider-clear", summary: "a provider's typed clear mid-turn starts a new conversation once; its repeat changes nothing", run: providerClear},
	{name: "generated", summary: "a host-action program drawn from the seed (or --program FILE)", run: generated, generated: true},
}

func findScenario(name string) (scenario, bool) {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc, true
		}
	}
	return scenario{}, false
}

func reply(text string) faux.Step { return faux.Reply(faux.Text(text)) }

func toolCalls(names ...string) faux.Step {
	blocks := make([]ai.Block, len(names))
	for i, n := range names {
		blocks[i] = faux.ToolCall(fmt.Sprintf("call-%s", n), n, `{}`)
	}
	return faux.Reply(blocks...).WithStop(ai.StopToolUse)
}

const root storage.ID = 1

// rootWatched is how every run watches the root: with its newest entry,
// and following the host's conversation values besides its kinds'
// configuration (hostWatched).
var rootWatched = core.WatchOptions{Tail: 1, Values: hostWatched(root)}

// turn accepts text in the root, drives it to idle and expects the input
// done.
func (e *env) turn(ctx context.Context, text string) error {
	id, err := e.accept(ctx, root, agent.ModeFollowUp, text)
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	return e.expect(ctx, root, id, agent.InputDone)
}

func basicTurn(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("hello"))
	if err := e.turn(ctx, "hi"); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

func parallelTools(ctx context.Context, e *env) error {
	e.faux.SetResponses(toolCalls("a", "b"), reply("both ran"))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "tool:a,b")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	p, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: agent.PostToolsKindName})
	if err != nil {
		return err
	}
	if len(p.Items) != 1 {
		return fmt.Errorf("%d post_tools tasks; want exactly one", len(p.Items))
	}
	if planted("tool-order") && strings.Join(e.toolOrder, ",") == "b,a" {
		return fmt.Errorf("planted bug: tool b ran before tool a")
	}
	if err := e.expect(ctx, root, id, agent.InputDone); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

func inputWhileBusy(ctx context.Context, e *env) error {
	e.faux.SetResponses(toolCalls("a").WithDelay(time.Second), reply("joined"), reply("followed up"), reply("next run"))
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "go"); err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	steps := []agent.InputMode{agent.ModeSteer, agent.ModeFollowUp, agent.ModeWrite}
	e.s.Rand().Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for _, m := range steps {
		id, err := e.accept(ctx, root, m, string(m))
		if err != nil {
			return err
		}
		if m == agent.ModeSteer && id != 0 && planted("steer") {
			return fmt.Errorf("planted bug: steer %d was accepted", id)
		}
	}
	next, err := e.accept(ctx, root, agent.ModeNextRun, "next")
	if err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.settled(ctx, func(id storage.ID) bool { return id == next }); err != nil {
		return err
	}
	if err := e.expect(ctx, root, next, agent.InputQueued); err != nil {
		return fmt.Errorf("nextRun must wait for an idle accept: %w", err)
	}
	// The next explicit idle accept takes the nextRun input into its group.
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "now"); err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	return e.settled(ctx, nil)
}

func abortMidStream(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply(strings.Repeat("streaming words ", 50)).WithDelay(100 * time.Millisecond))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "go")
	if err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(300))*time.Millisecond); err != nil {
		return err
	}
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	if e.host("abort") {
		if err := c.Abort(ctx); err != nil {
			return err
		}
	}
	done.Wait(ctx)
	// The abort wins or the answer does: either way the input ends once.
	r, _, err := c.Result(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != agent.InputCancelled && r.Status != agent.InputDone {
		return fmt.Errorf("input %d is %s; want cancelled or done", id, r.Status)
	}
	return e.settled(ctx, nil)
}

func retryAndDeferred(ctx context.Context, e *env) error {
	e.faux.SetResponses(faux.RateLimited(), faux.Reply().WithStop(ai.StopDeferred), reply("finally"))
	if err := e.turn(ctx, "go"); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

func crashReopen(ctx context.Context, e *env) error {
	e.faux.SetResponses(toolCalls("a", "b").WithDelay(50*time.Millisecond), reply(strings.Repeat("words ", 40)))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "go")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(120))*time.Millisecond); err != nil {
		return err
	}
	if _, err := e.stopAndReopen(ctx); err != nil {
		return err
	}
	e.faux.AppendResponses(reply("recovered"), reply("recovered"))
	e.driveAsync(ctx, root).Wait(ctx)
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	r, _, err := c.Result(ctx, id)
	if err != nil {
		return err
	}
	if !r.Status.Terminal() {
		return fmt.Errorf("input %d is %s after the reopen; want terminal", id, r.Status)
	}
	return e.settled(ctx, nil)
}

// abortWhileRecovering: a tool call that takes five seconds is interrupted
// by a stop and reopen; the reopened session's recover runs it again (the
// tool is replay-safe), and the host aborts the conversation while it
// does. The mark cancels the recover as it would an execute, so it returns
// at once (abort-is-prompt), and the input ends cancelled.
func abortWhileRecovering(ctx context.Context, e *env) error {
	e.faux.SetResponses(faux.Reply(faux.ToolCall("call-a", "a", `{"waitMs":5000}`)).WithStop(ai.StopToolUse), reply("done"))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "go")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(100+e.s.Rand().IntN(400))*time.Millisecond); err != nil {
		return err
	}
	if _, err := e.stopAndReopen(ctx); err != nil {
		return err
	}
	e.faux.AppendResponses(reply("recovered"), reply("recovered"))
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(1+e.s.Rand().IntN(300))*time.Millisecond); err != nil {
		return err
	}
	aborted, err := e.abort(ctx, root)
	if err != nil {
		return err
	}
	done.Wait(ctx)
	want := agent.InputDone
	if aborted {
		want = agent.InputCancelled
	}
	if err := e.expect(ctx, root, id, want); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

func forkAndContinue(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("first"), reply("on the fork"), reply("on the source"))
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "one"); err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	p, err := e.h.Entries(ctx, root, storage.Cursor{Limit: 100})
	if err != nil {
		return err
	}
	fork, err := c.Fork(ctx, p.Items[len(p.Items)-1].ID, core.ForkOptions{})
	if err != nil {
		return err
	}
	if _, err := e.accept(ctx, fork.ID, agent.ModeFollowUp, "fork"); err != nil {
		return err
	}
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "source"); err != nil {
		return err
	}
	a, b := e.driveAsync(ctx, fork.ID), e.driveAsync(ctx, root)
	a.Wait(ctx)
	b.Wait(ctx)
	fp, err := e.h.Entries(ctx, fork.ID, storage.Cursor{Limit: 100})
	if err != nil {
		return err
	}
	for _, en := range fp.Items {
		if en.ConversationID == root && en.ID > p.Items[len(p.Items)-1].ID {
			return fmt.Errorf("the fork sees source entry %d from after the fork point", en.ID)
		}
	}
	return e.settled(ctx, nil)
}

// modeAddr is a sticky conversation value, which a fork carries only when
// asked to.
var modeAddr = storage.Address{Scope: storage.ConversationScope(0), Namespace: "picosim", Key: "mode"}

// forkAtStart forks the root at its start, carrying modeAddr, while the
// source goes on: the fork holds none of the source's entries, and carries
// the value as it was when the fork took the line, which a later change in
// the source does not reach.
func forkAtStart(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("first"), reply("a fresh start"), reply("the source goes on"))
	if err := e.turn(ctx, "one"); err != nil {
		return err
	}
	c, err := e.h.Conversation(ctx, root)
	if err != nil {
		return err
	}
	var want json.RawMessage
	if e.host("set the root's mode") {
		want = json.RawMessage(`"careful"`)
		if err := c.Value(modeAddr).Set(ctx, want); err != nil {
			return err
		}
	}
	if !e.host("fork at the start") {
		return e.settled(ctx, nil)
	}
	fork, err := c.Fork(ctx, core.ForkStart, core.ForkOptions{Values: []storage.Address{modeAddr}})
	if err != nil {
		return err
	}
	if _, err := e.accept(ctx, fork.ID, agent.ModeFollowUp, "fresh"); err != nil {
		return err
	}
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "again"); err != nil {
		return err
	}
	a, b := e.driveAsync(ctx, fork.ID), e.driveAsync(ctx, root)
	if e.host("change the root's mode") {
		if err := c.Value(modeAddr).Set(ctx, json.RawMessage(`"bold"`)); err != nil {
			return err
		}
	}
	a.Wait(ctx)
	b.Wait(ctx)
	fp, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[*storage.Entry], error) {
		return e.h.Entries(ctx, fork.ID, cur)
	})
	if err != nil {
		return err
	}
	for _, en := range fp {
		if en.ConversationID == root {
			return fmt.Errorf("the fork at the start sees source entry %d", en.ID)
		}
	}
	got, ok, err := fork.Value(modeAddr).Get(ctx)
	switch {
	case err != nil:
		return err
	case ok != (want != nil) || (ok && string(got) != string(want)):
		return fmt.Errorf("the fork carries mode %s (present %v); want %s, the source's when the fork was made", got, ok, want)
	}
	return e.settled(ctx, nil)
}

func shutdownQueued(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("slow").WithDelay(time.Hour))
	if _, err := e.accept(ctx, root, agent.ModeFollowUp, "go"); err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	next, err := e.accept(ctx, root, agent.ModeNextRun, "later")
	if err != nil {
		return err
	}
	if !e.host("shutdown and reopen") {
		done.Wait(ctx)
		return e.settled(ctx, func(id storage.ID) bool { return id == next })
	}
	if err := e.h.Shutdown(ctx); err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if err := e.expect(ctx, root, next, agent.InputQueued); err != nil {
		return fmt.Errorf("queued input after shutdown and reopen: %w", err)
	}
	return e.settled(ctx, func(id storage.ID) bool { return id == next })
}
