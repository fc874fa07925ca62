package races

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The rows of this file run the agent loop (§5.5, §8.1): the faux provider
// answers, tools and post_tools settle, and input moves through the inbox.
// The built-in kinds run as their task's actor ("task6.execute"), and so do
// the hook handlers and tool bodies they call: a handler or a tool body
// names the points a forced order uses. Ids are a pure function of the
// program in one order (the faux provider streams these short answers in one
// chunk per block, whatever the seed), so a cell names the task actors it
// orders before the run and checks that the program minted what it named.

// --- the agent session ---

// agent is a session with the faux provider, for the agent-loop rows.
type loop struct {
	h       *agent.Harness
	faux    *faux.Provider
	watch   *commitWatch
	reports []error
}

type agentOptions struct {
	store   storage.Storage // nil: a fresh memory store
	tools   []agent.Tool
	kinds   []core.TaskKind
	replace []core.TaskKind
	env     agent.ExecutionEnv
	// wholeBlocks makes the faux provider stream every block in one chunk,
	// whatever the seed, so that a program with longer answers (a tool
	// call's arguments) still mints the same ids at every seed.
	wholeBlocks bool
}

// openAgent opens a session on the simulated runtime over o.store, watched
// by a commitWatch. Call it from an actor (the faux provider draws its chunk
// sizes from the run's generator).
func openAgent(ctx context.Context, s *sim.Sim, o agentOptions) *loop {
	fo := faux.Options{}
	if o.wholeBlocks {
		fo.TokenSize = faux.TokenSize{Min: 1 << 16, Max: 1 << 16}
	}
	a := &loop{faux: must(faux.New(s.Runtime(), s.Rand(), fo))}
	if o.store == nil {
		o.store = memory.New()
	}
	a.watch = newCommitWatch(s.Runtime(), o.store)
	a.h = must(agent.Open(ctx, a.watch, agent.Options{
		Runtime: s.Runtime(), TaskKinds: o.kinds, Replace: o.replace, Tools: o.tools, Env: o.env, CheckInvariants: true,
		Models: agent.NewModels(agent.ModelSource{Provider: a.faux, Models: a.faux.Models()}),
		Report: func(err error) { a.reports = append(a.reports, err) },
	}))
	return a
}

// commitWatch is a storage handle that watches what persists: the order in
// which tasks settle (with an event per settlement, so that an actor can
// wait for one), every input result written, per input and in order, and
// the first commit that carries an abort mark.
type commitWatch struct {
	storage.Storage
	rt      core.Runtime
	settled []storage.ID
	events  map[storage.ID]core.Event
	results map[storage.ID][]agent.InputStatus
	commits int        // main commits persisted
	markSeq storage.ID // first sequence of the first commit with an abort mark
}

func newCommitWatch(rt core.Runtime, inner storage.Storage) *commitWatch {
	return &commitWatch{Storage: inner, rt: rt, events: map[storage.ID]core.Event{}, results: map[storage.ID][]agent.InputStatus{}}
}

// settledEvent is set once task id's settlement is durable.
func (w *commitWatch) settledEvent(id storage.ID) core.Event {
	e, ok := w.events[id]
	if !ok {
		e = w.rt.NewEvent(fmt.Sprintf("settled:%d", id))
		w.events[id] = e
	}
	return e
}

func (w *commitWatch) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := w.Storage.Commit(ctx, b)
	if err != nil || b.Kind != storage.BatchMain {
		return r, err
	}
	w.commits++
	for _, wr := range b.Writes {
		switch {
		case wr.Type == storage.WriteSettle:
			w.settled = append(w.settled, wr.ID)
			w.settledEvent(wr.ID).Set()
		case wr.Type == storage.WritePatch && wr.Abort && w.markSeq == 0:
			w.markSeq = r.First
		case wr.Type == storage.WriteValueSet && wr.Addr != nil && wr.Addr.Namespace == agent.InputResultValue.Namespace:
			id, perr := strconv.ParseInt(wr.Addr.Key, 10, 64)
			var res agent.InputResult
			if perr == nil && json.Unmarshal(wr.Value, &res) == nil {
				w.results[storage.ID(id)] = append(w.results[storage.ID(id)], res.Status)
			}
		}
	}
	return r, nil
}

// history checks that input id's result went through exactly these
// statuses, one commit each.
func (w *commitWatch) history(id storage.ID, want ...agent.InputStatus) error {
	if got := w.results[id]; !slices.Equal(got, want) {
		return fmt.Errorf("input %d's result went through %v; want %v", id, got, want)
	}
	return nil
}

// index is where task id settled in the order of settlements, -1 if never.
func (w *commitWatch) index(id storage.ID) int { return slices.Index(w.settled, id) }

// watchedKind is a task kind (a built-in, registered through Replace) whose
// invocations are watched; around, if set, wraps its execute method.
type watchedKind struct {
	core.TaskKind
	inv    *invocations
	around func(ctx context.Context, t *storage.Task, execute func() error) error
}

func (k watchedKind) Execute(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
	defer k.inv.enter(t.ID, rt)()
	if k.around != nil {
		return k.around(ctx, t, func() error { return k.TaskKind.Execute(ctx, t, rt) })
	}
	return k.TaskKind.Execute(ctx, t, rt)
}

func (k watchedKind) Recover(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
	defer k.inv.enter(t.ID, rt)()
	return k.TaskKind.Recover(ctx, t, rt)
}

func (k watchedKind) Abort(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
	defer k.inv.enter(t.ID, rt)()
	return k.TaskKind.Abort(ctx, t, rt)
}

// pointTool is a tool whose body passes the named points in order, as its
// task's actor. untilSignalled makes it an effect that then runs until its
// invocation is signalled; otherwise it writes "<name> done" and returns.
func pointTool(rt core.Runtime, name string, untilSignalled bool, points ...string) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Execute: func(ctx context.Context, _ string, _ json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
			for _, p := range points {
				sim.Yield(ctx, p)
			}
			if untilSignalled {
				_ = rt.NewEvent("never").Wait(ctx)
				return ctx.Err()
			}
			out.Write(name + " done")
			return nil
		},
	}
}

// callTools is a response that calls the named tools, with no arguments.
func callTools(names ...string) faux.Step {
	blocks := make([]ai.Block, len(names))
	for i, n := range names {
		blocks[i] = faux.ToolCall(fmt.Sprintf("call-%d", i), n, "{}")
	}
	return faux.Reply(blocks...).WithStop(ai.StopToolUse)
}

// say is a final answer; keep it short (one chunk).
func say(text string) faux.Step { return faux.Reply(faux.Text(text)) }

// onGeneration registers fn at a generation hook point. It runs as the
// generating task's actor and has nothing to say back.
func onGeneration[I any](h *agent.Harness, point string, fn func(ctx context.Context, in I)) {
	h.Hooks().On(agent.GenerationKind, point, core.Hook(func(ctx context.Context, in I) (any, error) {
		fn(ctx, in)
		return nil, nil
	}), core.HookOptions{})
}

// tasksOfKind reads every task of a kind, in id order.
// driveWhileHost drives c on actor "driver" while actor "host" waits for
// ready and then runs act between its points before and after, the points
// a cell's forced order names.
func driveWhileHost(ctx context.Context, rt core.Runtime, c *agent.Conversation, ready core.Event, before, after string, act func(ctx context.Context)) (core.DriveResult, error) {
	var drive core.DriveResult
	var driveErr error
	g := newGroup(rt)
	g.Go(ctx, "driver", func(ctx context.Context) { drive, driveErr = c.Drive(ctx) })
	g.Go(ctx, "host", func(ctx context.Context) {
		check(ready.Wait(ctx))
		sim.Yield(ctx, before)
		act(ctx)
		sim.Yield(ctx, after)
	})
	g.Wait(ctx)
	return drive, driveErr
}

func tasksOfKind(ctx context.Context, store storage.Storage, kind string) []*storage.Task {
	return must(store.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, Kind: kind})).Items
}

// liveTasks reads every live task.
func liveTasks(ctx context.Context, store storage.Storage) []*storage.Task {
	return must(store.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, Live: storage.Bool(true)})).Items
}

func ids(tasks []*storage.Task) []storage.ID {
	out := make([]storage.ID, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func decoded[S any](t *storage.Task) S {
	var s S
	check(json.Unmarshal(t.State, &s))
	return s
}

// answerOf is the text of a generation's assistant entry, "" without one.
func answerOf(ctx context.Context, store storage.Storage, gen *storage.Task) (storage.ID, string) {
	id := decoded[agent.GenerationState](gen).Assistant
	if id == 0 {
		return 0, ""
	}
	e := must(store.GetEntries(ctx, []storage.ID{id}))[id]
	if e == nil || len(e.Model) == 0 {
		return id, ""
	}
	return id, e.Model[0].Content.TextOf()
}

// resultOf reads input id's result in conversation conv; ok is false when
// there is none.
func resultOf(ctx context.Context, store storage.Storage, conv, id storage.ID) (agent.InputResult, bool) {
	v, ok := must2(store.GetValue(ctx, agent.InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(id), 10)).Address, 0))
	var r agent.InputResult
	if ok {
		check(json.Unmarshal(v.Value, &r))
	}
	return r, ok
}

func must2[T any, U any](t T, u U, err error) (T, U) {
	check(err)
	return t, u
}

// userEntries are the texts of a conversation's user entries, in order.
func userEntries(ctx context.Context, store storage.Storage, conv storage.ID) []string {
	p := must(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv, Kind: core.UserKind.Kind()}))
	out := make([]string, len(p.Items))
	for i, e := range p.Items {
		out[i] = e.Model[0].Content.TextOf()
	}
	return out
}

// inboxView renders a conversation's queue: every queued item (id and mode)
// and the result of each input named, as stored.
func inboxView(ctx context.Context, store storage.Storage, conv storage.ID, inputs ...storage.ID) string {
	p := must(store.ReadList(ctx, agent.InboxList.In(conv).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}}))
	var parts []string
	for _, e := range p.Items {
		var item agent.InboxItem
		check(json.Unmarshal(e.Value, &item))
		parts = append(parts, fmt.Sprintf("item %d %s %q", e.ID, item.Mode, item.Entry.Model[0].Content.TextOf()))
	}
	for _, id := range inputs {
		r, ok := resultOf(ctx, store, conv, id)
		if !ok {
			parts = append(parts, fmt.Sprintf("result %d none", id))
			continue
		}
		parts = append(parts, fmt.Sprintf("result %d %s %q", id, r.Status, r.Reason))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// --- the rows ---

// acceptReplyLost is the row "Accept commit durable, reply lost". The
// server accepts input with a request id for the client; the accept commit
// is held in persistence (a storage barrier) until the releaser lets it go.
// While it is held the client hangs up — the server's call ctx is cancelled
// and its reply is lost — and recovers its input id with Acceptance, then
// retries the accept under the same request id.
//
// forward: the commit is released and durable, and the server's Accept has
// returned, before the client looks: Acceptance finds the receipt at once.
// reverse: the client looks while the commit is still held and finds
// nothing, and retries; its retry waits for the line behind the held commit
// and then rejects with RequestAlreadyAcceptedError naming the first
// receipt, and a second Acceptance finds it. Either way the cancelled call
// did not abandon the admitted commit, the receipt names the original
// conversation and input, the retry wrote nothing and consumed no id, and
// the input was accepted exactly once.
func acceptReplyLost(o order) cell {
	const requestID, acceptHold = "request-1", "accept"
	points := map[order][]string{
		forward: {"client:hang-up", "releaser:release", "server:accepted", "client:lookup"},
		reverse: {"client:hang-up", "client:lookup", "client:retry", "releaser:release", "server:accepted"},
	}[o]
	// The accept is the second commit through the handle, after the root's
	// creation.
	plan := fault.Plan{Faults: []fault.Fault{{Name: acceptHold, Kind: fault.Hold, Commit: 2, Batch: storage.BatchMain}}}
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		var (
			a                       *loop
			input                   storage.ID
			acceptErr, retryErr     error
			hungUp                  bool
			first, second           agent.Receipt
			foundFirst, foundSecond bool
			users                   []string
			result                  agent.InputResult
			gens                    []*storage.Task
			inbox                   string
			lastSeq                 storage.ID
		)
		main := func(ctx context.Context) {
			barrier := fault.Wrap(rt, memory.New(), plan, s)
			a = openAgent(ctx, s, agentOptions{store: barrier})
			c := a.h.Root()
			var hangUp context.CancelFunc
			g := newGroup(rt)
			g.Go(ctx, "server", func(ctx context.Context) {
				call, cancel := context.WithCancel(ctx)
				defer cancel()
				hangUp = cancel
				input, acceptErr = c.Accept(call, ai.PlainText("hello"), agent.AcceptOptions{RequestID: requestID})
				hungUp = call.Err() != nil
				sim.Yield(ctx, "accepted") // the reply goes nowhere
			})
			g.Go(ctx, "client", func(ctx context.Context) {
				check(barrier.WaitHeld(ctx, acceptHold)) // the request is in flight
				sim.Yield(ctx, "hang-up")
				hangUp()
				sim.Yield(ctx, "lookup")
				first, foundFirst = must2(a.h.Acceptance(ctx, requestID))
				sim.Yield(ctx, "retry")
				_, retryErr = c.Accept(ctx, ai.PlainText("hello"), agent.AcceptOptions{RequestID: requestID})
				second, foundSecond = must2(a.h.Acceptance(ctx, requestID))
			})
			g.Go(ctx, "releaser", func(ctx context.Context) {
				check(barrier.WaitHeld(ctx, acceptHold))
				sim.Yield(ctx, "release")
				barrier.Release(acceptHold)
			})
			g.Wait(ctx)
			store := a.h.Store()
			users = userEntries(ctx, store, rootID)
			result, _ = resultOf(ctx, store, rootID, input)
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			inbox = inboxView(ctx, store, rootID)
			lastSeq = store.LastSeq()
			check(a.h.Close(ctx))
		}
		verify := func() error {
			want := agent.Receipt{RequestID: requestID, ConversationID: rootID, InputID: input}
			var dup *agent.RequestAlreadyAcceptedError
			switch {
			case acceptErr != nil || input == 0:
				return fmt.Errorf("the server's accept = %d, %v; want the input id", input, acceptErr)
			case !hungUp:
				return errors.New("the client did not hang up while the accept was in flight")
			case o == forward && (!foundFirst || first != want):
				return fmt.Errorf("acceptance after the durable commit = %+v (found %v); want %+v", first, foundFirst, want)
			case o == reverse && foundFirst:
				return fmt.Errorf("acceptance while the commit was held found %+v; readers must see the state before it", first)
			case !errors.As(retryErr, &dup) || dup.First != want:
				return fmt.Errorf("the retried accept = %v; want RequestAlreadyAcceptedError naming %+v", retryErr, want)
			case !foundSecond || second != want:
				return fmt.Errorf("acceptance after the retry = %+v (found %v); want %+v", second, foundSecond, want)
			case !slices.Equal(users, []string{"hello"}):
				return fmt.Errorf("the root's user entries are %q; want the input once", users)
			case result.Status != agent.InputRunning || result.RequestID != requestID || result.PlacementEntryID == 0:
				return fmt.Errorf("the input's result is %+v; want running, placed, with the request id", result)
			case inbox != "[]":
				return fmt.Errorf("the root's inbox is %s; want it empty", inbox)
			case len(gens) != 1 || !slices.Equal(decoded[agent.GenerationState](gens[0]).Inputs, []storage.ID{input}):
				return fmt.Errorf("generations %v; want one answering input %d", ids(gens), input)
			case a.watch.commits != 2 || lastSeq != gens[0].ID:
				return fmt.Errorf("%d commits up to sequence %d; want the root and the accept only, ending with generation %d (the rejected retry writes nothing and consumes no id)", a.watch.commits, lastSeq, gens[0].ID)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			}
			return nil
		}
		return main, verify
	}}
}

// parallelTools is the row "Parallel tools settle in either order". The
// accepted input's generation (task 6) calls tools a and b (tasks 19 and
// 20) in one exchange; post_tools (task 21) joins it. Each tool body stops
// at "finish"; the gate waits until the first tool's settlement is durable.
//
// forward: tool a settles, then b. reverse: b settles, then a. Either way
// post_tools starts once, after both, and creates exactly one successor
// generation (task 31), whose answer resolves the input.
func parallelTools(o order) cell {
	const gen, toolA, toolB, post, next storage.ID = 6, 19, 20, 21, 31
	first, second := toolA, toolB
	if o == reverse {
		first, second = toolB, toolA
	}
	finish := func(t storage.ID) string { return label(actor(t, core.MethodExecute), "finish") }
	points := []string{finish(first), "gate:observed", finish(second)}
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		j := &journal{}
		inv := newInvocations(j)
		var (
			a        *loop
			input    storage.ID
			drive    core.DriveResult
			driveErr error
			gens     []*storage.Task
			posts    []*storage.Task
			tools    []*storage.Task
			result   agent.InputResult
			calls    int
			answer   storage.ID
			text     string
		)
		main := func(ctx context.Context) {
			a = openAgent(ctx, s, agentOptions{
				tools:   []agent.Tool{pointTool(rt, "a", false, "finish"), pointTool(rt, "b", false, "finish")},
				replace: []core.TaskKind{watchedKind{TaskKind: agent.PostToolsKind, inv: inv}},
			})
			a.faux.SetResponses(callTools("a", "b"), say("answer"))
			c := a.h.Root()
			input = must(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{}))
			expectID("generation", ids(tasksOfKind(ctx, a.h.Store(), agent.GenerationKindName))[0], gen)
			g := newGroup(rt)
			g.Go(ctx, "driver", func(ctx context.Context) { drive, driveErr = c.Drive(ctx) })
			g.Go(ctx, "gate", func(ctx context.Context) {
				check(a.watch.settledEvent(first).Wait(ctx))
				sim.Yield(ctx, "observed")
			})
			g.Wait(ctx)
			store := a.h.Store()
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			posts = tasksOfKind(ctx, store, agent.PostToolsKindName)
			tools = tasksOfKind(ctx, store, agent.ToolKindName)
			result, _ = resultOf(ctx, store, rootID, input)
			calls = a.faux.Calls()
			if len(gens) > 1 {
				answer, text = answerOf(ctx, store, gens[1])
			}
			check(a.h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case driveErr != nil || drive != core.Idle:
				return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			case !slices.Equal(ids(tools), []storage.ID{toolA, toolB}):
				return fmt.Errorf("tool tasks %v; want %d and %d", ids(tools), toolA, toolB)
			case !slices.Equal(ids(posts), []storage.ID{post}) || posts[0].Status != "done":
				return fmt.Errorf("post_tools tasks %v; want exactly task %d, done", ids(posts), post)
			case j.count(fmt.Sprintf("task %d execute start", post)) != 1 || j.has(fmt.Sprintf("task %d abort start", post)):
				return fmt.Errorf("post_tools started %d times; want once: %s", j.count(fmt.Sprintf("task %d execute start", post)), j)
			case !slices.Equal(ids(gens), []storage.ID{gen, next}) || gens[0].Status != "done" || gens[1].Status != "done":
				return fmt.Errorf("generations %v; want %d and its one successor %d, both done", ids(gens), gen, next)
			case !slices.Equal(decoded[agent.GenerationState](gens[1]).Inputs, []storage.ID{input}):
				return fmt.Errorf("the successor carries %v; want the group [%d]", decoded[agent.GenerationState](gens[1]).Inputs, input)
			case calls != 2:
				return fmt.Errorf("the provider was called %d times; want 2", calls)
			}
			if !(a.watch.index(first) < a.watch.index(second) && a.watch.index(second) < a.watch.index(post)) {
				return fmt.Errorf("settlements in the order %v; want %d, %d, then post_tools %d", a.watch.settled, first, second, post)
			}
			if result.Status != agent.InputDone || result.ResultEntryID != answer || text != "answer" {
				return fmt.Errorf("the input's result is %+v; want done with the successor's answer %d (%q)", result, answer, text)
			}
			return nil
		}
		return main, verify
	}}
}

// abortVsPostTools is the row "Abort vs post_tools settlement". The
// accepted input's generation (task 6) calls tool a (task 16); post_tools
// (task 17) stops at "settle" as it starts and at "settled" once its
// execute returns. The host aborts the conversation meanwhile. The
// successor's answer is slow (a minute of virtual time), so the abort finds
// it still working.
//
// forward: post_tools settles first, creating the successor generation
// (task 23) and handing it the group; the abort then marks the successor,
// whose abort cancels the input. reverse: the mark wins the line while
// post_tools executes; its settlement rejects, and its abort cancels the
// input and creates nothing. Either way no generation escapes unmarked and
// the input resolves once, cancelled.
func abortVsPostTools(o order) cell {
	const gen, tool, post, next storage.ID = 6, 16, 17, 23
	pexec := actor(post, core.MethodExecute)
	points := map[order][]string{
		forward: {label(pexec, "settle"), label(pexec, "settled"), "host:abort", "host:aborted"},
		reverse: {"host:abort", "host:aborted", label(pexec, "settle")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		j := &journal{}
		inv := newInvocations(j)
		started := rt.NewEvent("post_tools-started")
		var (
			a           *loop
			input       storage.ID
			drive       core.DriveResult
			driveErr    error
			abortErr    error
			gens, posts []*storage.Task
			tools, live []*storage.Task
			result      agent.InputResult
		)
		postTools := watchedKind{TaskKind: agent.PostToolsKind, inv: inv, around: func(ctx context.Context, t *storage.Task, execute func() error) error {
			started.Set()
			sim.Yield(ctx, "settle")
			err := execute()
			sim.Yield(ctx, "settled")
			return err
		}}
		main := func(ctx context.Context) {
			a = openAgent(ctx, s, agentOptions{tools: []agent.Tool{pointTool(rt, "a", false)}, replace: []core.TaskKind{postTools}})
			a.faux.SetResponses(callTools("a"), say("late").WithDelay(time.Minute))
			c := a.h.Root()
			input = must(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{}))
			expectID("generation", ids(tasksOfKind(ctx, a.h.Store(), agent.GenerationKindName))[0], gen)
			drive, driveErr = driveWhileHost(ctx, rt, c, started, "abort", "aborted", func(ctx context.Context) {
				abortErr = c.Abort(ctx)
			})
			store := a.h.Store()
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			posts = tasksOfKind(ctx, store, agent.PostToolsKindName)
			tools = tasksOfKind(ctx, store, agent.ToolKindName)
			live = liveTasks(ctx, store)
			result, _ = resultOf(ctx, store, rootID, input)
			check(a.h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case abortErr != nil:
				return fmt.Errorf("abort = %v", abortErr)
			case driveErr != nil || drive != core.Idle:
				return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			case len(live) > 0:
				return fmt.Errorf("tasks %v are still live", ids(live))
			case !slices.Equal(ids(tools), []storage.ID{tool}) || tools[0].Status != "done":
				return fmt.Errorf("tool tasks %v; want task %d, done before the race", ids(tools), tool)
			case !slices.Equal(ids(posts), []storage.ID{post}):
				return fmt.Errorf("post_tools tasks %v; want task %d", ids(posts), post)
			case j.count(fmt.Sprintf("task %d execute start", post)) != 1:
				return fmt.Errorf("post_tools executed %d times; want once: %s", j.count(fmt.Sprintf("task %d execute start", post)), j)
			case len(gens) == 0 || gens[0].ID != gen || gens[0].Status != "done":
				return fmt.Errorf("generations %v; want %d first, done", ids(gens), gen)
			}
			// No unmarked successor: whatever generation post_tools created
			// carries the mark and was aborted.
			for _, t := range gens[1:] {
				if !t.Abort || t.Status != "aborted" {
					return fmt.Errorf("successor generation %d is %q (marked %v); want it marked and aborted", t.ID, t.Status, t.Abort)
				}
			}
			if err := a.watch.history(input, agent.InputRunning, agent.InputCancelled); err != nil {
				return err
			}
			if result.Status != agent.InputCancelled || result.Reason != "aborted" {
				return fmt.Errorf("the input's result is %+v; want cancelled by the abort", result)
			}
			if o == forward {
				switch {
				case posts[0].Status != "done" || posts[0].Abort:
					return fmt.Errorf("post_tools is %q (marked %v); want done before the mark", posts[0].Status, posts[0].Abort)
				case !slices.Equal(ids(gens), []storage.ID{gen, next}):
					return fmt.Errorf("generations %v; want %d and the successor %d", ids(gens), gen, next)
				case !slices.Equal(decoded[agent.GenerationState](gens[1]).Inputs, []storage.ID{input}):
					return fmt.Errorf("the successor carries %v; want [%d]", decoded[agent.GenerationState](gens[1]).Inputs, input)
				}
				return nil
			}
			switch {
			case posts[0].Status != "aborted" || !posts[0].Abort:
				return fmt.Errorf("post_tools is %q (marked %v); want marked and aborted", posts[0].Status, posts[0].Abort)
			case j.count(fmt.Sprintf("task %d abort start", post)) != 1:
				return fmt.Errorf("post_tools' abort ran %d times; want once: %s", j.count(fmt.Sprintf("task %d abort start", post)), j)
			case len(gens) != 1:
				return fmt.Errorf("generations %v; an aborted post_tools creates no successor", ids(gens))
			}
			return nil
		}
		return main, verify
	}}
}

// cancelVsLand is the row "Cancel vs land of the same inbox item". The
// accepted input's generation (task 6) runs while a followUp (input 7)
// queues behind it; the generation stops at "land" in its on_yield handler,
// just before the final-answer settlement that lands queued followUps. The
// host cancels the followUp meanwhile.
//
// forward: the cancel wins the line: the item is removed and its result is
// cancelled; the settlement then finds nothing queued and starts nothing.
// reverse: the settlement wins: it places the item and creates its
// generation (task 22), which reaches its request ("request") before the
// host's cancel, which finds nothing queued (not_found); the followUp is
// answered. Either way the followUp has exactly one terminal result.
func cancelVsLand(o order) cell {
	const gen, followUp, next storage.ID = 6, 7, 22
	land, request := label(actor(gen, core.MethodExecute), "land"), label(actor(next, core.MethodExecute), "request")
	points := map[order][]string{
		forward: {"host:cancel", "host:cancelled", land},
		reverse: {land, request, "host:cancel", "host:cancelled"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		atYield := rt.NewEvent("on-yield")
		var (
			a             *loop
			input         storage.ID
			cancelled     agent.CancelResult
			cancelErr     error
			drive         core.DriveResult
			driveErr      error
			gens          []*storage.Task
			first, second agent.InputResult
			answers       []storage.ID
			texts         []string
			users         []string
			inbox         string
		)
		main := func(ctx context.Context) {
			a = openAgent(ctx, s, agentOptions{})
			a.faux.SetResponses(say("one"), say("two"))
			onGeneration(a.h, agent.HookBeforeRequest, func(ctx context.Context, _ agent.BeforeRequestInput) {
				sim.Yield(ctx, "request")
			})
			onGeneration(a.h, agent.HookOnYield, func(ctx context.Context, _ agent.OnYieldInput) {
				atYield.Set()
				sim.Yield(ctx, "land")
			})
			c := a.h.Root()
			input = must(c.Accept(ctx, ai.PlainText("first"), agent.AcceptOptions{}))
			expectID("generation", ids(tasksOfKind(ctx, a.h.Store(), agent.GenerationKindName))[0], gen)
			expectID("followUp", must(c.FollowUp(ctx, ai.PlainText("second"))), followUp)
			drive, driveErr = driveWhileHost(ctx, rt, c, atYield, "cancel", "cancelled", func(ctx context.Context) {
				cancelled, cancelErr = c.CancelQueued(ctx, followUp)
			})
			store := a.h.Store()
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			for _, t := range gens {
				id, text := answerOf(ctx, store, t)
				answers, texts = append(answers, id), append(texts, text)
			}
			first, _ = resultOf(ctx, store, rootID, input)
			second, _ = resultOf(ctx, store, rootID, followUp)
			users = userEntries(ctx, store, rootID)
			inbox = inboxView(ctx, store, rootID)
			check(a.h.Close(ctx))
		}
		verify := func() error {
			switch {
			case cancelErr != nil:
				return fmt.Errorf("cancelQueued = %v", cancelErr)
			case driveErr != nil || drive != core.Idle:
				return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			case inbox != "[]":
				return fmt.Errorf("the inbox is %s; want it empty", inbox)
			case len(gens) == 0 || gens[0].ID != gen || texts[0] != "one":
				return fmt.Errorf("generations %v answering %q; want %d to answer \"one\"", ids(gens), texts, gen)
			case first.Status != agent.InputDone || first.ResultEntryID != answers[0]:
				return fmt.Errorf("the first input's result is %+v; want done with answer %d", first, answers[0])
			}
			if o == forward {
				if err := a.watch.history(followUp, agent.InputQueued, agent.InputCancelled); err != nil {
					return err
				}
				switch {
				case cancelled != agent.Cancelled:
					return fmt.Errorf("cancelQueued = %q; want cancelled", cancelled)
				case second.Status != agent.InputCancelled || second.Reason != "cancelled by request" || second.PlacementEntryID != 0:
					return fmt.Errorf("the followUp's result is %+v; want cancelled by request, never placed", second)
				case len(gens) != 1:
					return fmt.Errorf("generations %v; the settlement after the cancel starts nothing", ids(gens))
				case !slices.Equal(users, []string{"first"}):
					return fmt.Errorf("user entries %q; the cancelled followUp never lands", users)
				}
				return nil
			}
			if err := a.watch.history(followUp, agent.InputQueued, agent.InputRunning, agent.InputDone); err != nil {
				return err
			}
			switch {
			case cancelled != agent.NotFound:
				return fmt.Errorf("cancelQueued after the landing = %q; want not_found", cancelled)
			case !slices.Equal(ids(gens), []storage.ID{gen, next}) || !slices.Equal(decoded[agent.GenerationState](gens[1]).Inputs, []storage.ID{followUp}):
				return fmt.Errorf("generations %v; want %d and %d answering the followUp", ids(gens), gen, next)
			case second.Status != agent.InputDone || second.ResultEntryID != answers[1] || texts[1] != "two":
				return fmt.Errorf("the followUp's result is %+v; want done with answer %d (%q)", second, answers[1], texts[1])
			case !slices.Equal(users, []string{"first", "second"}):
				return fmt.Errorf("user entries %q; want both inputs, once each", users)
			}
			return nil
		}
		return main, verify
	}}
}

// abortVsGroupTransfer is the row "Abort vs generation/post_tools group
// transfer". The accepted input (2) is answered by generation 6, and a steer
// (input 7) queues behind it; the generation's after_response handler stops
// at "settle", just before the settlement that hands the group to the
// exchange's post_tools. The host aborts the conversation meanwhile.
//
// forward: the transfer commits first (tool a is task 18, post_tools task
// 19) and the tool's effect is in flight ("run") when the mark lands: the
// mark covers the tool and post_tools, whose abort cancels the group
// although its tool is still live. reverse: the mark lands while the
// generation still owns the group: its settlement rejects and its abort
// cancels the group, and no tool or post_tools exists. Either way the same
// commit as the mark cancels the queued steer, every input resolves once,
// and the group's last owner is marked.
func abortVsGroupTransfer(o order) cell {
	const input, gen, steer, tool, post storage.ID = 2, 6, 7, 18, 19
	settleAt, run := label(actor(gen, core.MethodExecute), "settle"), label(actor(tool, core.MethodExecute), "run")
	points := map[order][]string{
		forward: {settleAt, run, "host:abort", "host:aborted"},
		reverse: {"host:abort", "host:aborted", settleAt},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		j := &journal{}
		inv := newInvocations(j)
		atResponse := rt.NewEvent("after-response")
		var (
			a                  *loop
			drive              core.DriveResult
			driveErr, abortErr error
			gens, posts, tools []*storage.Task
			live               []*storage.Task
			accepted, steered  agent.InputResult
			owners             []*storage.Task
		)
		main := func(ctx context.Context) {
			a = openAgent(ctx, s, agentOptions{
				tools:   []agent.Tool{pointTool(rt, "a", true, "run")},
				replace: []core.TaskKind{watchedKind{TaskKind: agent.PostToolsKind, inv: inv}},
			})
			a.faux.SetResponses(callTools("a"), say("never"))
			onGeneration(a.h, agent.HookAfterResponse, func(ctx context.Context, _ agent.AfterResponseInput) {
				atResponse.Set()
				sim.Yield(ctx, "settle")
			})
			c := a.h.Root()
			expectID("input", must(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{})), input)
			expectID("generation", ids(tasksOfKind(ctx, a.h.Store(), agent.GenerationKindName))[0], gen)
			expectID("steer", must(c.Steer(ctx, ai.PlainText("also"))), steer)
			drive, driveErr = driveWhileHost(ctx, rt, c, atResponse, "abort", "aborted", func(ctx context.Context) {
				abortErr = c.Abort(ctx)
			})
			store := a.h.Store()
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			posts = tasksOfKind(ctx, store, agent.PostToolsKindName)
			tools = tasksOfKind(ctx, store, agent.ToolKindName)
			live = liveTasks(ctx, store)
			accepted, _ = resultOf(ctx, store, rootID, input)
			steered, _ = resultOf(ctx, store, rootID, steer)
			for _, t := range gens {
				if slices.Contains(decoded[agent.GenerationState](t).Inputs, input) {
					owners = append(owners, t)
				}
			}
			for _, t := range posts {
				if slices.Contains(decoded[agent.PostToolsState](t).Inputs, input) {
					owners = append(owners, t)
				}
			}
			slices.SortFunc(owners, func(x, y *storage.Task) int { return int(x.ID - y.ID) })
			check(a.h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case abortErr != nil:
				return fmt.Errorf("abort = %v", abortErr)
			case driveErr != nil || drive != core.Idle:
				return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			case len(live) > 0:
				return fmt.Errorf("tasks %v are still live", ids(live))
			case !slices.Equal(ids(gens), []storage.ID{gen}):
				return fmt.Errorf("generations %v; an aborted group has no successor", ids(gens))
			}
			// Every active input resolves once.
			if err := a.watch.history(input, agent.InputRunning, agent.InputCancelled); err != nil {
				return err
			}
			if err := a.watch.history(steer, agent.InputQueued, agent.InputCancelled); err != nil {
				return err
			}
			switch {
			case accepted.Reason != "aborted":
				return fmt.Errorf("the input's result is %+v; want cancelled by its owner's abort", accepted)
			case steered.Reason != "conversation aborted":
				return fmt.Errorf("the steer's result is %+v; want cancelled as queued input of the aborted conversation", steered)
			}
			// No unmarked owner escapes: every owner but the last handed the
			// group on and settled done; the last is marked and aborted.
			for i, t := range owners {
				last := i == len(owners)-1
				if last && (!t.Abort || t.Status != "aborted") || !last && (t.Abort || t.Status != "done") {
					return fmt.Errorf("group owner %d (%s) is %q (marked %v); want the last owner marked and aborted, earlier ones done", t.ID, t.Kind, t.Status, t.Abort)
				}
			}
			if o == forward {
				switch {
				case !slices.Equal(ids(owners), []storage.ID{gen, post}):
					return fmt.Errorf("the group's owners are %v; want generation %d, then post_tools %d", ids(owners), gen, post)
				case !slices.Equal(ids(tools), []storage.ID{tool}) || !tools[0].Abort || tools[0].Status != "aborted":
					return fmt.Errorf("tool tasks %v; want task %d marked and aborted", ids(tools), tool)
				case j.has(fmt.Sprintf("task %d execute start", post)) || j.count(fmt.Sprintf("task %d abort start", post)) != 1:
					return fmt.Errorf("post_tools must abort once without executing: %s", j)
				}
				return nil
			}
			switch {
			case !slices.Equal(ids(owners), []storage.ID{gen}):
				return fmt.Errorf("the group's owners are %v; want generation %d only", ids(owners), gen)
			case len(tools) > 0 || len(posts) > 0:
				return fmt.Errorf("tools %v and post_tools %v exist; the rejected settlement creates neither", ids(tools), ids(posts))
			}
			return nil
		}
		return main, verify
	}}
}

// sharedGeneration is the row "Several inputs share one generation". A
// nextRun input (2) waits in the idle root until an accept (input 4)
// places both in one group, answered by generation 11; it calls tool a,
// whose body passes "run" and "finish". A steer queues while the turn runs;
// it joins the group at post_tools, and the successor's final answer
// resolves all three.
//
// forward: the steer queues while generation 11 still owns the group (its
// after_response handler holds at "settle"). reverse: it queues after the
// group moved to post_tools, while the tool (task 21) runs. Either way every
// result points to the same final answer entry.
func sharedGeneration(o order) cell {
	const nextRun, input, gen, tool storage.ID = 2, 4, 11, 21
	settleAt := label(actor(gen, core.MethodExecute), "settle")
	texec := actor(tool, core.MethodExecute)
	points := map[order][]string{
		forward: {"host:steer", "host:steered", settleAt},
		reverse: {settleAt, label(texec, "run"), "host:steer", "host:steered", label(texec, "finish")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		atResponse := rt.NewEvent("after-response")
		var (
			a                  *loop
			steer              storage.ID
			drive              core.DriveResult
			driveErr, steerErr error
			gens, tools        []*storage.Task
			results            = map[storage.ID]agent.InputResult{}
			answer             storage.ID
			text               string
			inbox              string
		)
		main := func(ctx context.Context) {
			a = openAgent(ctx, s, agentOptions{tools: []agent.Tool{pointTool(rt, "a", false, "run", "finish")}})
			a.faux.SetResponses(callTools("a"), say("all"))
			onGeneration(a.h, agent.HookAfterResponse, func(ctx context.Context, _ agent.AfterResponseInput) {
				atResponse.Set()
				sim.Yield(ctx, "settle")
			})
			c := a.h.Root()
			expectID("nextRun", must(c.NextRun(ctx, ai.PlainText("before"))), nextRun)
			expectID("input", must(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{})), input)
			expectID("generation", ids(tasksOfKind(ctx, a.h.Store(), agent.GenerationKindName))[0], gen)
			drive, driveErr = driveWhileHost(ctx, rt, c, atResponse, "steer", "steered", func(ctx context.Context) {
				steer, steerErr = c.Steer(ctx, ai.PlainText("also"))
			})
			store := a.h.Store()
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			tools = tasksOfKind(ctx, store, agent.ToolKindName)
			for _, id := range []storage.ID{nextRun, input, steer} {
				results[id], _ = resultOf(ctx, store, rootID, id)
			}
			if len(gens) == 2 {
				answer, text = answerOf(ctx, store, gens[1])
			}
			inbox = inboxView(ctx, store, rootID)
			check(a.h.Close(ctx))
		}
		verify := func() error {
			switch {
			case steerErr != nil || steer == 0:
				return fmt.Errorf("steer = %d, %v", steer, steerErr)
			case driveErr != nil || drive != core.Idle:
				return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
			case len(a.reports) > 0:
				return fmt.Errorf("reported %v", a.reports)
			case inbox != "[]":
				return fmt.Errorf("the inbox is %s; want it empty", inbox)
			case len(gens) != 2 || gens[0].ID != gen:
				return fmt.Errorf("generations %v; want %d and its successor", ids(gens), gen)
			case !slices.Equal(decoded[agent.GenerationState](gens[1]).Inputs, []storage.ID{nextRun, input, steer}):
				return fmt.Errorf("the successor's group is %v; want [%d %d %d]", decoded[agent.GenerationState](gens[1]).Inputs, nextRun, input, steer)
			case text != "all":
				return fmt.Errorf("the final answer is %d (%q); want \"all\"", answer, text)
			case len(tools) != 1:
				return fmt.Errorf("tool tasks %v; want one", ids(tools))
			case o == forward && steer > tools[0].ID:
				return fmt.Errorf("the steer (%d) queued after the exchange's tool (%d) was created; want it queued while the generation owned the group", steer, tools[0].ID)
			case o == reverse && (tools[0].ID != tool || steer < tool):
				return fmt.Errorf("the steer (%d) queued before the exchange's tool (%d); want it queued while tool %d ran", steer, tools[0].ID, tool)
			}
			for _, id := range []storage.ID{nextRun, input, steer} {
				if r := results[id]; r.Status != agent.InputDone || r.ResultEntryID != answer || r.PlacementEntryID == 0 {
					return fmt.Errorf("input %d's result is %+v; want done with the shared final answer %d", id, r, answer)
				}
			}
			for id, want := range map[storage.ID][]agent.InputStatus{
				nextRun: {agent.InputQueued, agent.InputRunning, agent.InputDone},
				input:   {agent.InputRunning, agent.InputDone},
				steer:   {agent.InputQueued, agent.InputRunning, agent.InputDone},
			} {
				if err := a.watch.history(id, want...); err != nil {
					return err
				}
			}
			return nil
		}
		return main, verify
	}}
}

// workerKind is a task that runs until signalled; its abort passes the
// points "begin" and "cleanup" and settles aborted.
func workerKind(name string, begun core.Event) core.KindFuncs {
	kind := raceKind(name, func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
		return errors.New("the worker was executed; nothing in the row drives it")
	})
	kind.AbortFunc = func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
		begun.Set()
		sim.Yield(ctx, "begin")
		sim.Yield(ctx, "cleanup")
		return settle(ctx, rt, t.ID, "aborted")
	}
	return kind
}

// shutdownVsAccept is the row "Shutdown vs accept / idle nextRun inbox".
// Conversation 2 is idle with two nextRun inputs queued (5 and 7);
// conversation 3 holds a live worker (task 4), so that the shutdown has a
// mark batch to commit. A client accepts input in the idle root and queues
// one more nextRun in conversation 2 while the host shuts down.
//
// forward: both of the client's commits land before the mark batch: the
// accept places its input and creates generation 13, which the mark batch
// marks and whose abort cancels the input; the new nextRun stays queued.
// reverse: the mark batch lands first (the worker's abort has begun when
// the client calls), and both of the client's calls reject with
// ErrShuttingDown and write nothing. Either way the queued nextRun items of
// the idle conversation and their queued results are untouched by the
// shutdown, by reopening and by driving the reopened session.
func shutdownVsAccept(o order) cell {
	const idle, busy, worker, first, second, gen storage.ID = 2, 3, 4, 5, 7, 13
	wabort := actor(worker, core.MethodAbort)
	points := map[order][]string{
		forward: {"client:accept", "client:accepted", "host:shutdown"},
		reverse: {"host:shutdown", label(wabort, "begin"), "client:accept", "client:accepted", label(wabort, "cleanup")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		j := &journal{}
		inv := newInvocations(j)
		begun := rt.NewEvent("worker-abort")
		kind := inv.wrapped(workerKind("worker", begun))
		var (
			a, reopened                     *loop
			input, third                    storage.ID
			acceptErr, nextErr, shutdownErr error
			before, shut, opened, driven    string
			redrive                         core.DriveResult
			gens                            []*storage.Task
			workerTask                      *storage.Task
			accepted                        agent.InputResult
			hasResult                       bool
			users                           []string
			rootInbox                       string
			startedOnReopen                 bool
		)
		main := func(ctx context.Context) {
			mem := memory.New()
			handle := fault.Wrap(rt, mem, fault.Plan{}, s)
			a = openAgent(ctx, s, agentOptions{store: handle, kinds: []core.TaskKind{kind}})
			var conv2 *agent.Conversation
			must(a.h.Commit(ctx, func(tx *core.Tx) error {
				expectID("idle conversation", tx.CreateConversation(core.ConversationSpec{}), idle)
				expectID("busy conversation", tx.CreateConversation(core.ConversationSpec{}), busy)
				expectID("worker", tx.Task(kind, core.TaskSpec{ConversationID: busy}), worker)
				return nil
			}))
			conv2 = must(a.h.Conversation(ctx, idle))
			expectID("first nextRun", must(conv2.NextRun(ctx, ai.PlainText("later 1"))), first)
			expectID("second nextRun", must(conv2.NextRun(ctx, ai.PlainText("later 2"))), second)
			before = inboxView(ctx, a.h.Store(), idle, first, second)
			g := newGroup(rt)
			g.Go(ctx, "client", func(ctx context.Context) {
				sim.Yield(ctx, "accept")
				input, acceptErr = a.h.Root().Accept(ctx, ai.PlainText("now"), agent.AcceptOptions{})
				third, nextErr = conv2.NextRun(ctx, ai.PlainText("later 3"))
				sim.Yield(ctx, "accepted")
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				sim.Yield(ctx, "shutdown")
				shutdownErr = a.h.Shutdown(ctx)
			})
			g.Wait(ctx)
			queued := []storage.ID{first, second}
			if third != 0 {
				queued = append(queued, third)
			}
			shut = inboxView(ctx, mem, idle, queued...)

			// Reopen the durable state as a restarted process would.
			reopened = openAgent(ctx, s, agentOptions{store: handle.Reopen(fault.Plan{}), kinds: []core.TaskKind{newInvocations(&journal{}).wrapped(workerKind("worker", rt.NewEvent("unused")))}})
			store := reopened.h.Store()
			check(rt.Sleep(ctx, time.Second)) // everything runnable runs: nothing may start undriven
			startedOnReopen = len(liveTasks(ctx, store)) > 0 || reopened.faux.Calls() > 0
			opened = inboxView(ctx, store, idle, queued...)
			redrive = must(reopened.h.Drive(ctx))
			driven = inboxView(ctx, store, idle, queued...)
			gens = tasksOfKind(ctx, store, agent.GenerationKindName)
			workerTask = must(store.GetTasks(ctx, []storage.ID{worker}))[worker]
			if input != 0 {
				accepted, hasResult = resultOf(ctx, store, rootID, input)
			}
			users = userEntries(ctx, store, rootID)
			rootInbox = inboxView(ctx, store, rootID)
			check(reopened.h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			want := fmt.Sprintf(`[item %d nextRun "later 1"; item %d nextRun "later 2"; result %d queued ""; result %d queued ""]`, first, second, first, second)
			switch {
			case before != want:
				return fmt.Errorf("before the shutdown the idle inbox is %s; want %s", before, want)
			case shutdownErr != nil:
				return fmt.Errorf("shutdown = %v", shutdownErr)
			case workerTask.Status != "aborted" || !workerTask.Abort:
				return fmt.Errorf("the worker is %q (marked %v); want marked by the shutdown and aborted", workerTask.Status, workerTask.Abort)
			case j.count(fmt.Sprintf("task %d abort start", worker)) != 1:
				return fmt.Errorf("the worker's abort ran %d times; want once: %s", j.count(fmt.Sprintf("task %d abort start", worker)), j)
			case startedOnReopen:
				return errors.New("the reopened session has live work or called the model before any drive; preserved queues create no work")
			case redrive != core.Idle:
				return fmt.Errorf("driving the reopened session = %q; want idle at once", redrive)
			case len(a.reports) > 0 || len(reopened.reports) > 0:
				return fmt.Errorf("reported %v and, after reopening, %v", a.reports, reopened.reports)
			}
			if o == forward {
				want = fmt.Sprintf(`[item %d nextRun "later 1"; item %d nextRun "later 2"; item %d nextRun "later 3"; result %d queued ""; result %d queued ""; result %d queued ""]`,
					first, second, third, first, second, third)
				switch {
				case acceptErr != nil || nextErr != nil:
					return fmt.Errorf("the client's accept = %v and nextRun = %v before the mark batch; want both to land", acceptErr, nextErr)
				case !slices.Equal(ids(gens), []storage.ID{gen}) || !gens[0].Abort || gens[0].Status != "aborted":
					return fmt.Errorf("generations %v; want the accepted input's generation %d, marked by the shutdown and aborted", ids(gens), gen)
				case a.watch.markSeq <= gen:
					return fmt.Errorf("the mark batch is at %d; want it after the accept's commit (generation %d)", a.watch.markSeq, gen)
				case !hasResult || accepted.Status != agent.InputCancelled || accepted.Reason != "aborted" || accepted.PlacementEntryID == 0:
					return fmt.Errorf("the accepted input's result is %+v; want placed, then cancelled by its generation's abort", accepted)
				case !slices.Equal(users, []string{"now"}):
					return fmt.Errorf("the root's user entries are %q; want the accepted input", users)
				}
			} else {
				switch {
				case !errors.Is(acceptErr, core.ErrShuttingDown) || input != 0:
					return fmt.Errorf("the accept after the mark batch = %d, %v; want ErrShuttingDown", input, acceptErr)
				case !errors.Is(nextErr, core.ErrShuttingDown) || third != 0:
					return fmt.Errorf("the nextRun after the mark batch = %d, %v; want ErrShuttingDown", third, nextErr)
				case len(gens) > 0 || len(users) > 0:
					return fmt.Errorf("generations %v and user entries %q in the root; a rejected accept writes nothing", ids(gens), users)
				}
			}
			switch {
			case rootInbox != "[]":
				return fmt.Errorf("the root's inbox is %s; want it empty", rootInbox)
			case shut != want || opened != want || driven != want:
				return fmt.Errorf("the idle inbox after the shutdown is %s, after reopening %s, after a drive %s; want %s throughout", shut, opened, driven, want)
			}
			return nil
		}
		return main, verify
	}}
}

// ownerState is what the owner task records, in the commit that creates
// them, about the child conversation it owns and the child's task: the
// durable references its abort cleanup uses.
type ownerState struct {
	Child storage.ID `json:"child"`
	Task  storage.ID `json:"task"`
}

// ownerKinds are the two kinds of the crash row, for one process: owner
// creates an owned child conversation with a child task in it and works
// until signalled; its abort is the child cleanup of §6.3 (mark the child's
// foreground task, never the child's queues) and settles aborted. child
// works until signalled; its abort settles aborted. Each abort sets its
// begun event and stops at "cleanup" first; the child's stops at "settled"
// once it settled.
func ownerKinds(rt core.Runtime, j *journal, ready, running core.Event, begun map[string]core.Event) (owner, child core.KindFuncs) {
	untilSignalled := func(ctx context.Context) error {
		_ = rt.NewEvent("never").Wait(ctx)
		return ctx.Err()
	}
	child = raceKind("child", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
		if err := transition(ctx, trt, t.ID, "running"); err != nil {
			return err
		}
		running.Set()
		return untilSignalled(ctx)
	})
	child.AbortFunc = func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
		begun["child"].Set()
		sim.Yield(ctx, "cleanup")
		if err := settle(ctx, trt, t.ID, "aborted"); err != nil {
			return err
		}
		sim.Yield(ctx, "settled")
		return nil
	}
	owner = raceKind("owner", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
		if _, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
			conv := tx.CreateConversation(core.ConversationSpec{Owner: t.ID})
			task := tx.Tx.Task(child, core.TaskSpec{ConversationID: conv})
			tx.Patch(t.ID, core.TaskPatch{Status: "running", State: ownerState{Child: conv, Task: task}})
			return nil
		}); err != nil {
			return err
		}
		ready.Set()
		return untilSignalled(ctx)
	})
	owner.AbortFunc = func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
		begun["owner"].Set()
		sim.Yield(ctx, "cleanup")
		st := decoded[ownerState](t)
		switch err := trt.AbortTask(ctx, st.Task); {
		case err == nil:
			j.add("cleanup: task %d marked", st.Task)
		case core.RuleOf(err) == core.RuleTaskTerminal:
			j.add("cleanup: task %d already finished", st.Task) // successful cleanup
		default:
			return err
		}
		return settle(ctx, trt, t.ID, "aborted")
	}
	return owner, child
}

// shutdownCrash is the row "Shutdown crash before child cleanup". Task 2
// (owner) in the root creates child conversation 3, owned by it, with task 5
// (child) in it; while both work, the host queues a nextRun, a followUp and
// a steer in the child conversation (inputs 8, 10 and 12: the child is busy,
// so all three wait) and shuts down. The mark batch marks both tasks; their
// abort handlers begin, and the process crashes (the storage handle is
// replaced by a reopened one) before the owner's child cleanup commits
// anything. The restarted process opens the same store and drives it.
//
// forward: the crash comes before either abort handler wrote anything: the
// reopened session finds both tasks marked, the owner's cleanup marks the
// child's task (already marked: nothing to write; or, if the child's own
// abort got there first, finds it finished) and both settle aborted.
// reverse: the child's abort settled it before the crash, the owner's did
// not: after reopening the owner's cleanup finds the child's task finished
// and settles. Either way the reopened abort marks tasks only: the child
// conversation's queued items and their queued results are exactly as the
// host left them — after the crash, after reopening and after the drive —
// and nothing answers them.
func shutdownCrash(o order) cell {
	const owner, childConv, childTask, nextRun, followUp, steer storage.ID = 2, 3, 5, 8, 10, 12
	oabort, cabort := actor(owner, core.MethodAbort), actor(childTask, core.MethodAbort)
	points := map[order][]string{
		forward: {"crasher:crash", label(oabort, "cleanup"), label(cabort, "cleanup")},
		reverse: {label(cabort, "cleanup"), label(cabort, "settled"), "crasher:crash", label(oabort, "cleanup")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		rt := s.Runtime()
		j, j2 := &journal{}, &journal{}
		inv, inv2 := newInvocations(j), newInvocations(j2)
		var (
			shutdownErr, driveErr        error
			before, crashed, opened, end string
			durable, final               map[storage.ID]*storage.Task
			redrive                      core.DriveResult
			startedOnReopen              bool
			gens                         []*storage.Task
			users                        []string
			reported, reported2          []error
		)
		main := func(ctx context.Context) {
			ready, running := rt.NewEvent("owner-ready"), rt.NewEvent("child-running")
			begun := map[string]core.Event{"owner": rt.NewEvent("owner-abort"), "child": rt.NewEvent("child-abort")}
			ownerKind, childKind := ownerKinds(rt, j, ready, running, begun)
			mem := memory.New()
			handle := fault.Wrap(rt, mem, fault.Plan{}, s)
			h := must(agent.Open(ctx, handle, agent.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{inv.wrapped(ownerKind), inv.wrapped(childKind)},
				Report: func(err error) { reported = append(reported, err) }}))
			expectID("owner", createTasks(ctx, h.Harness, rootID, ownerKind)[0], owner)
			var next *fault.Storage
			queued := []storage.ID{nextRun, followUp, steer}
			g := newGroup(rt)
			g.Go(ctx, "driver", func(ctx context.Context) { _, driveErr = h.Root().Drive(ctx) })
			g.Go(ctx, "host", func(ctx context.Context) {
				check(ready.Wait(ctx))
				check(running.Wait(ctx))
				k := must(h.Conversation(ctx, childConv))
				expectID("nextRun", must(k.NextRun(ctx, ai.PlainText("n"))), nextRun)
				expectID("followUp", must(k.FollowUp(ctx, ai.PlainText("f"))), followUp)
				expectID("steer", must(k.Steer(ctx, ai.PlainText("s"))), steer)
				before = inboxView(ctx, h.Store(), childConv, queued...)
				shutdownErr = h.Shutdown(ctx)
			})
			g.Go(ctx, "crasher", func(ctx context.Context) {
				check(begun["owner"].Wait(ctx))
				check(begun["child"].Wait(ctx))
				sim.Yield(ctx, "crash")
				next = handle.Reopen(fault.Plan{})
			})
			g.Wait(ctx)
			durable = must(mem.GetTasks(ctx, []storage.ID{owner, childTask}))
			crashed = inboxView(ctx, mem, childConv, queued...)

			// The restarted process: the same kinds, fresh events.
			ownerKind, childKind = ownerKinds(rt, j2, rt.NewEvent("owner-ready"), rt.NewEvent("child-running"),
				map[string]core.Event{"owner": rt.NewEvent("owner-abort"), "child": rt.NewEvent("child-abort")})
			h2 := must(agent.Open(ctx, next, agent.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{inv2.wrapped(ownerKind), inv2.wrapped(childKind)},
				Report: func(err error) { reported2 = append(reported2, err) }}))
			check(rt.Sleep(ctx, time.Second)) // everything runnable runs: nothing may start undriven
			startedOnReopen = len(inv2.runtimes) > 0
			opened = inboxView(ctx, h2.Store(), childConv, queued...)
			redrive = must(h2.Drive(ctx))
			end = inboxView(ctx, h2.Store(), childConv, queued...)
			final = must(h2.GetTasks(ctx, []storage.ID{owner, childTask}))
			gens = tasksOfKind(ctx, h2.Store(), agent.GenerationKindName)
			users = userEntries(ctx, h2.Store(), childConv)
			check(h2.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			if err := inv2.check(); err != nil {
				return err
			}
			want := fmt.Sprintf(`[item %d nextRun "n"; item %d followUp "f"; item %d steer "s"; result %d queued ""; result %d queued ""; result %d queued ""]`,
				nextRun, followUp, steer, nextRun, followUp, steer)
			switch {
			case before != want:
				return fmt.Errorf("the child's queue before the shutdown is %s; want %s", before, want)
			case !errors.Is(shutdownErr, fault.ErrCrashed) || !errors.Is(driveErr, fault.ErrCrashed):
				return fmt.Errorf("in the crashed process shutdown = %v and the drive = %v; want both to end with the crash", shutdownErr, driveErr)
			case len(reported) == 0 || !errors.Is(reported[0], fault.ErrCrashed):
				return fmt.Errorf("the crashed process reported %v; want the crash", reported)
			case j.has(fmt.Sprintf("cleanup: task %d marked", childTask)) || j.has(fmt.Sprintf("cleanup: task %d already finished", childTask)):
				return fmt.Errorf("the owner's cleanup completed before the crash: %s", j)
			case durable[owner].Status != "running" || !durable[owner].Abort:
				return fmt.Errorf("after the crash the owner is %q (marked %v); want running and marked by the mark batch", durable[owner].Status, durable[owner].Abort)
			case crashed != want || opened != want || end != want:
				return fmt.Errorf("the child's queue is %s after the crash, %s after reopening and %s after the drive; want %s throughout", crashed, opened, end, want)
			case startedOnReopen:
				return errors.New("the reopened session started an invocation before any drive")
			case redrive != core.Idle:
				return fmt.Errorf("driving the reopened session = %q; want idle", redrive)
			case len(reported2) > 0:
				return fmt.Errorf("the reopened session reported %v", reported2)
			case final[owner].Status != "aborted" || final[childTask].Status != "aborted" || !final[childTask].Abort:
				return fmt.Errorf("after the drive the owner is %q and the child's task %q (marked %v); want both aborted", final[owner].Status, final[childTask].Status, final[childTask].Abort)
			case j2.count(fmt.Sprintf("task %d abort start", owner)) != 1:
				return fmt.Errorf("the reopened owner's abort ran %d times; want once: %s", j2.count(fmt.Sprintf("task %d abort start", owner)), j2)
			case len(gens) > 0 || len(users) > 0:
				return fmt.Errorf("generations %v and child user entries %q; preserved queues create no work", ids(gens), users)
			}
			if o == forward {
				switch {
				case durable[childTask].Status != "running" || !durable[childTask].Abort:
					return fmt.Errorf("after the crash the child's task is %q (marked %v); want running and marked", durable[childTask].Status, durable[childTask].Abort)
				case j2.count(fmt.Sprintf("task %d abort start", childTask)) != 1:
					return fmt.Errorf("after reopening, want the child's task's abort to run once: %s", j2)
				case !j2.has(fmt.Sprintf("cleanup: task %d marked", childTask)) && !j2.has(fmt.Sprintf("cleanup: task %d already finished", childTask)):
					// The reopened aborts race each other: the owner's
					// cleanup finds the child's task marked or settled.
					return fmt.Errorf("after reopening, want the owner's cleanup to mark the child's task or find it finished: %s", j2)
				}
				return nil
			}
			switch {
			case durable[childTask].Status != "aborted":
				return fmt.Errorf("after the crash the child's task is %q; want aborted before the crash", durable[childTask].Status)
			case !j2.has(fmt.Sprintf("cleanup: task %d already finished", childTask)) || j2.has(fmt.Sprintf("task %d abort start", childTask)):
				return fmt.Errorf("after reopening, want the owner's cleanup to find the child's task finished, and no second abort of it: %s", j2)
			}
			return nil
		}
		return main, verify
	}}
}
