package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// The conversation-abort rule (§6.3): a conversation abort marks, in one
// commit, its foreground set and nothing else: every live foreground task
// of the conversation and, through live foreground owners at any depth,
// of the conversations they own; background tasks and other
// conversations' tasks keep running. The agent's abort also cancels, in
// that commit, the queued steer and followUp input of every conversation
// the set touches (the conversation and those of the tasks marked), and
// no other input. A fork that aborts its source marks the same set and
// cancels nothing.
//
// The program tags its abort's context (withHostAbort); the commit that
// carries the tag is judged against what the oracle knew before it.

// ruleConversationAbort: a conversation abort marks its foreground set,
// and cancels its conversations' queued steer and followUp input.
const ruleConversationAbort oracleRule = "abort-marks-its-foreground-set"

// hostAbort is a host's abort of conv's foreground set; cancels says it
// also cancels queued turns (a conversation abort, not a fork's).
type hostAbort struct {
	conv    storage.ID
	cancels bool
}

type hostAbortKey struct{}

// withHostAbort tags ctx's commits as an abort of conv's foreground set.
func withHostAbort(ctx context.Context, conv storage.ID, cancels bool) context.Context {
	return context.WithValue(ctx, hostAbortKey{}, hostAbort{conv: conv, cancels: cancels})
}

func hostAbortOf(ctx context.Context) (hostAbort, bool) {
	a, ok := ctx.Value(hostAbortKey{}).(hostAbort)
	return a, ok
}

// abortSet is what an abort must do, as the oracle knew the session just
// before its commit: the tasks to mark and the queued input to cancel.
type abortSet struct {
	hostAbort
	tasks  []storage.ID // live foreground tasks of the set, oldest first
	convs  []storage.ID // the conversations the set touches
	inputs []storage.ID // their queued steer and followUp input (cancels only)
}

// foregroundSet computes a's set from the tasks and conversations the
// oracle follows: a live, foreground task is in it when its conversation
// is a's, or one owned by a task in the set.
func (o *oracle) foregroundSet(a hostAbort) abortSet {
	set := abortSet{hostAbort: a, convs: []storage.ID{a.conv}}
	for _, t := range o.liveTasks() {
		if o.background[t] || !o.inForeground(o.convs[t], a.conv) {
			continue
		}
		set.tasks = append(set.tasks, t)
		if !slices.Contains(set.convs, o.convs[t]) {
			set.convs = append(set.convs, o.convs[t])
		}
	}
	if a.cancels {
		for input, conv := range o.queued {
			if m := o.modes[input]; (m == agent.ModeSteer || m == agent.ModeFollowUp) && slices.Contains(set.convs, conv) {
				set.inputs = append(set.inputs, input)
			}
		}
		slices.Sort(set.inputs)
	}
	return set
}

// liveTasks are the tasks created and not settled, oldest first.
func (o *oracle) liveTasks() []storage.ID {
	var live []storage.ID
	for t := range o.kinds {
		if !o.settled[t] {
			live = append(live, t)
		}
	}
	slices.Sort(live)
	return live
}

// inForeground reports whether conversation c is scope or owned, through
// a chain of live foreground owners, by a task of scope.
func (o *oracle) inForeground(c, scope storage.ID) bool {
	return o.ownedBy(scope, c, func(owner storage.ID) bool {
		_, known := o.kinds[owner]
		return known && !o.settled[owner] && !o.background[owner]
	})
}

// ruleTaskAbort: AbortTask returns no error only once the task's abort
// mark is durable (§6.3): written by its commit, or by an earlier one.
const ruleTaskAbort oracleRule = "abort-task-marks-it"

// taskAborted holds an AbortTask of task that returned no error to
// ruleTaskAbort.
func (o *oracle) taskAborted(task storage.ID) error {
	if !o.marked[task] {
		return o.fail(broke(ruleTaskAbort, "AbortTask of task %d (%s, conversation %d) returned no error, but no commit marked it", task, o.kinds[task], o.convs[task]))
	}
	return nil
}

// aborted judges the commit of set's abort, batch b at r, after the
// oracle took its writes in: every task of the set is marked and no
// other is, every input of the set cancelled and no other.
func (o *oracle) aborted(set abortSet, b storage.CommitBatch, r storage.Range, by string) error {
	what := fmt.Sprintf("%s aborted conversation %d at %d–%d", by, set.conv, r.First, r.Last)
	for _, t := range set.tasks {
		if !o.marked[t] {
			return o.fail(broke(ruleConversationAbort, "%s, leaving its foreground task %d (%s, conversation %d) unmarked", what, t, o.kinds[t], o.convs[t]))
		}
	}
	for _, input := range set.inputs {
		if _, still := o.queued[input]; still {
			return o.fail(broke(ruleConversationAbort, "%s, leaving %s input %d of conversation %d queued", what, o.modes[input], input, o.queued[input]))
		}
	}
	for _, w := range b.Writes {
		switch {
		case (w.Type == storage.WritePatch || w.Type == storage.WriteSettle) && w.Abort && !slices.Contains(set.tasks, w.ID):
			why := "not in its foreground set"
			if o.background[w.ID] {
				why = "a background task"
			}
			return o.fail(broke(ruleConversationAbort, "%s, marking task %d of conversation %d, %s", what, w.ID, o.convs[w.ID], why))
		case w.Type == storage.WriteListRemove && w.Addr != nil && w.Addr.Namespace == agent.InboxList.Namespace && !slices.Contains(set.inputs, w.Element):
			return o.fail(broke(ruleConversationAbort, "%s, taking %s input %d of conversation %d out of its inbox", what, o.modes[w.Element], w.Element, w.Addr.Scope.ID))
		}
	}
	return nil
}

// ruleToolAbortChildren: a tool call's abort marks, in the commit that
// settles it aborted, the foreground set of every conversation it owns
// (a subagent it runs, §8.3).
const ruleToolAbortChildren oracleRule = "tool-abort-marks-its-children"

// toolAborted judges a tool call's abort invocation's batch, after the
// oracle took its writes in: each conversation the call owns has its
// live foreground tasks marked.
func (o *oracle) toolAborted(inv core.Invocation, b storage.CommitBatch, r storage.Range, by string) error {
	if inv.Method != core.MethodAbort || o.kinds[inv.Task] != agent.ToolKindName ||
		!slices.ContainsFunc(b.Writes, func(w storage.Write) bool { return w.Type == storage.WriteSettle && w.ID == inv.Task }) {
		return nil
	}
	for _, child := range o.created {
		if o.owners[child] != inv.Task {
			continue
		}
		for _, t := range o.liveTasks() {
			if !o.background[t] && !o.marked[t] && o.inForeground(o.convs[t], child) {
				return o.fail(broke(ruleToolAbortChildren, "%s settled aborted at %d–%d, leaving task %d (%s) of its conversation %d unmarked", by, r.First, r.Last, t, o.kinds[t], child))
			}
		}
	}
	return nil
}

// recoverAbortSeeds is how often a drawn program aborts the root while a
// reopened session recovers a slow call: every tenth seed from 9 but the
// child-abort seeds among them, not the golden traces' seed 1.
const recoverAbortSeeds = 10

// drawRecoverAborts has such a program begin, from a generator of its
// own, with a turn of the root whose answer calls the slow work tool (3 s),
// a reopen while the call works, and, while the new process recovers it,
// an abort of the root or of the call: the abort mark reaches a running
// recover as it reaches an execute. A seed that aborts under children
// (drawChildAborts) keeps its block first instead.
func drawRecoverAborts(p *program, seed uint64) {
	if seed%recoverAbortSeeds != 9 || seed%childAbortSeeds == 3 {
		return // a child-abort seed's own abort comes first
	}
	rng := seededRNG(seed, "recover aborts")
	abort := []progLine{{op: "abort", args: []string{"c0"}}, {op: "abort-task", args: []string{"0"}}}[rng.IntN(2)]
	calls := "work:slow"
	if never := seededRNG(seed, "never replayed"); never.IntN(2) == 0 {
		// Beside it, a call of the echo tool that is never replayed, as
		// slow: the reopen interrupts it, and the new process must settle
		// it without running it again (§8.3).
		calls = []string{"work:slow,b:3000", "b:3000,work:slow"}[never.IntN(2)]
	}
	p.lines = append([]progLine{{op: "respond", args: []string{"calls", calls}}, {op: "respond", args: []string{"text", "done"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}},
		{op: "sleep", args: []string{strconv.Itoa(100 + rng.IntN(400))}}, {op: "reopen"},
		{op: "drive-async", args: []string{"c0"}}, {op: "sleep", args: []string{strconv.Itoa(1 + rng.IntN(300))}}, abort}, p.lines...)
}
