package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/conformance/kit"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
	"go.opentelemetry.io/otel/trace"
)

// env is a scenario's session: a backend in a directory behind the fault
// plan's storage handle, the faux provider and the tools, reopenable as a
// restarted process would.
type env struct {
	s    *sim.Sim
	spec runSpec
	dir  string
	// hostCtx is the context the host's actions run under: one that no
	// invocation of the session's carries.
	hostCtx context.Context
	// first is the first process's storage handle, the one the plan's
	// faults are in; handle is the current process's. firstH is the first
	// process's harness.
	first, handle *fault.Storage
	firstH        *agent.Harness
	// stopHolds ends the actors that release the plan's holds.
	stopHolds context.CancelFunc
	store     storage.Storage
	faux      *faux.Provider
	// proc is the fake execution environment of a shell scenario, the
	// same machine across restarts.
	proc *proc.Env
	// last is the newest commit record, for replay --until.
	last json.RawMessage
	// adapter is the provider adapter's state of the launch (boundary.go),
	// adapters those of other providers' launches a program delivers.
	adapter  boundary.State
	adapters map[boundary.Provider]*boundary.State
	// prog is the generated scenario's program (see program).
	prog   *program
	h      *agent.Harness
	watch  *core.WatchHandle
	inputs map[storage.ID][]storage.ID // conversation → inputs accepted
	given  map[storage.ID]hostInput    // input → what the host gave it as (its first acceptance)
	// toolOrder is the order tools ran in (the simulator runs one at a time).
	toolOrder []string
	// fileWrites counts the writes the file tools made to each file
	// (filerule.go).
	fileWrites map[string]int
	// onceRan counts the runs of each call of a tool that must never be
	// replayed, over every process of the run.
	onceRan map[storage.ID]int
	// batches counts the commits that reached the first handle.
	batches int
	// actions counts the host actions reached (see host).
	actions int
	// recovered says a fault stopped the first process and the run was
	// judged after a restart.
	recovered bool
	// acked is the last sequence number of a commit some process was told
	// succeeded, and entries are the entries those commits appended: what
	// no restart may lose.
	acked   storage.ID
	entries []storage.ID
	// overflowing are the live overflow collapses as committed, and
	// waited the first commit that made a live task wait on one (§8.2:
	// nothing live ever does), checked commit by commit.
	overflowing map[storage.ID]bool
	waited      error
	// oracle checks every commit and invocation as it happens.
	oracle *oracle
	// hooks are the hooks the program's host registered and has not
	// removed, in the order it registered them (hooks.go).
	hooks []*hostHook
	// yields counts the continuations onYield asked for in a row, by
	// conversation.
	yields map[storage.ID]int
	// mirrorLog is the batches the backend acknowledged: a memory store
	// given them must answer every read of a disk backend as the disk does
	// (mirror.go), and every backend's state reads are held to the rule
	// derived from them (staterule.go).
	mirrorLog *mirrorLog
	// spans records the harness's spans for the span-tree check, every
	// spanSeeds-th seed (nil otherwise, and when run --otel takes them).
	spans *runSpans
	// verdict is the run's outcome: nil when it passed.
	verdict error
	// envErr is the first storage error that was the machine's, not the
	// run's (see isEnvironment): a full disk fails a run whatever the
	// harness does, and what the scenario sees next blames the harness.
	envErr error
}

// previewSeeds is how often a run holds every flushed task preview to the
// one its durable scratch builds (agent.Options.CheckPreviews): every
// eighth seed, from 1, since a rebuild per scratch commit makes a run about
// half as slow again (fuzz basic-turn, one worker: 1,345-1,404 schedules/s
// without the check, 1,108-1,212 with it every fourth seed).
const previewSeeds = 8

// contextSeeds is how often a run holds every context, system fold and
// request the harness's cache answers to a fresh derivation
// (agent.Options.CheckContexts): every fourth seed, from 2, since a
// derivation per read makes a run about a fifth slower (fuzz on memory,
// two workers: 1,252-1,728 schedules/s without the check, 1,069-1,212
// with it on every seed).
const contextSeeds = 4

// lateSeeds is how often the faux provider's block starts reach the
// reader late (faux.Options.LateStarts), showing chunks their deltas
// repeat: every third seed, from 2 (the golden traces' seed 1 keeps its
// frames).
const lateSeeds = 3

// spacedSeeds is how often the faux provider streams tool-call arguments
// spaced (faux.Options.SpacedArguments), every fourth seed from 3: what
// the deltas spell is then not what the end carries.
const spacedSeeds = 4

func newEnv(s *sim.Sim, spec runSpec, dir string) *env {
	// Every payload a run commits and reads is held to encoding/json: a
	// codec written by hand that drifts fails the run where it drifts.
	core.SetCheckJSON(true)
	opts := faux.Options{Recorder: s, LateStarts: spec.seed%lateSeeds == 2, SpacedArguments: spec.seed%spacedSeeds == 3}
	if spec.sc.generated {
		prog := spec.program
		if prog == nil {
			prog = drawProgram(spec.seed)
		}
		if prog.chunk > 0 {
			opts.TokenSize = faux.TokenSize{Min: prog.chunk, Max: prog.chunk}
		}
		opts.Price = fauxPrice(prog.price)
		opts.Models = fauxModels
		opts.Deferred = drawDeferred(spec.seed)
		opts.TokensPerSecond = drawPace(spec.seed)
	}
	p, err := faux.New(s.Runtime(), s.Rand(), opts)
	if err != nil {
		panic("picosim: " + err.Error()) // a runtime and a source are always given
	}
	e := &env{s: s, spec: spec, dir: dir, faux: p, oracle: newOracle()}
	e.oracle.now = s.Runtime().Now
	if ar, ok := s.Runtime().(core.ActorRuntime); ok {
		e.oracle.actor = ar.Actor
	}
	e.oracle.exactClock = !slices.ContainsFunc(spec.plan.Faults, func(f fault.Fault) bool { return f.Kind == fault.Hold })
	if spec.tracer == nil && spec.seed%spanSeeds == 0 {
		e.spans = newRunSpans(spec.seed)
	}
	return e
}

// paceSeeds is how often a generated run's model streams in virtual time
// (faux.Options.TokensPerSecond): every fifth seed from 3, not the golden
// traces' seed 1. Elsewhere every chunk of an answer arrives at the
// instant its stream starts, so an abort, an input, a watch, a read or a
// crash lands before a stream or after it, never inside one.
const paceSeeds = 5

// drawPace is a generated run's streaming pace in tokens a second, 0 for
// none, from a generator of its own: 20 (an answer of a few words takes a
// few hundred milliseconds), 100 or 500.
func drawPace(seed uint64) float64 {
	if seed%paceSeeds != 3 {
		return 0
	}
	return []float64{20, 100, 500}[seededRNG(seed, "pace").IntN(3)]
}

// drawDeferred is how a generated run's deferred answers behave, drawn
// from its seed (not from the run's source, which draws its schedule): a
// poll interval the handle names or the harness's default, and none to
// two fetches that answer "still deferred" before the answer is ready.
func drawDeferred(seed uint64) faux.DeferredOptions {
	rng := rand.New(rand.NewPCG(seed, deferredStream))
	return faux.DeferredOptions{PollAfterMs: []int64{0, 20, 250}[rng.IntN(3)], PendingFetches: rng.IntN(3)}
}

// deferredStream keys drawDeferred's source apart from the seed's others.
const deferredStream = 0x64656665727265 // "deferre"

// tracer is the harness's tracer provider: run --otel's, or the run's own
// recorder.
func (e *env) tracer() trace.TracerProvider {
	if e.spans != nil {
		return e.spans.tp
	}
	return e.spec.tracer
}

// parseAheadSeeds is how often a JSONL run's replays parse ahead
// (jsonl.Options.ParseAhead): every other seed.
const parseAheadSeeds = 2

// runSession is the run's session inside a SQLite database.
const runSession = "picosim"

// disk describes the backend's files; the memory backend has none. A
// restarted process's replay of a JSONL history holds every batch to the
// harness's rules as well; on every other seed it parses the file ahead,
// in chunks of one to four lines, as a long session's replay does.
func (e *env) disk() fault.Disk {
	switch e.spec.backend {
	case "jsonl":
		opts := jsonl.Options{Verify: agent.ValidateBatch}
		if e.spec.seed%parseAheadSeeds == 0 {
			opts.ParseAhead = 1 + int(e.spec.seed/parseAheadSeeds%4)
		}
		return fault.JSONL(sessionFile("jsonl", e.dir), opts)
	case "sqlite":
		path := sessionFile("sqlite", e.dir)
		return fault.CommitGated(func(ctx context.Context, fail func() error) (storage.Storage, error) {
			s, err := sqlite.Open(ctx, path, sqlite.Options{Session: runSession, CommitFault: fail})
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return s, nil
		})
	}
	return fault.Disk{}
}

// openHandle opens the process's storage handle: the first one carries the
// plan, and every later one is a restarted process over the same durable
// state (for the disk backends, the backend's own replay of the files),
// without faults.
func (e *env) openHandle(ctx context.Context) (*fault.Storage, error) {
	switch {
	case e.handle != nil:
		return e.handle.Restart(ctx, fault.Plan{})
	case e.spec.backend == "memory":
		return fault.Wrap(e.s.Runtime(), memory.New(), e.spec.plan, e.s), nil
	case e.spec.backend == "sqlite":
		if err := withNeighbours(ctx, sessionFile("sqlite", e.dir)); err != nil {
			return nil, err
		}
	}
	return fault.WrapDisk(ctx, e.s.Runtime(), e.disk(), e.spec.plan, e.s)
}

// open opens (or reopens) the session: a new harness over the durable state.
func (e *env) open(ctx context.Context) error {
	e.closeHooks()
	handle, err := e.openHandle(ctx)
	if err != nil {
		e.noteEnv(err)
		return err
	}
	e.handle = handle
	e.oracle.restart(handle.LastSeq())
	if e.first == nil {
		e.first = handle
		e.startHolds(ctx)
	} else if err := e.oracle.resync(ctx, handle); err != nil {
		e.noteEnv(err)
		return err
	}
	if e.mirrorLog == nil {
		e.mirrorLog = &mirrorLog{}
	}
	var inner storage.Storage
	if e.spec.backend == "memory" {
		inner = logging(ctx, handle, e.mirrorLog)
	} else {
		inner = mirror(ctx, handle, e.mirrorLog, e.oracle)
	}
	store := &recorded{Storage: inner, e: e, counts: handle == e.first}
	e.store = store
	// b declares no replay policy: the harness's default, never, holds it.
	tools := []agent.Tool{e.echo("a", agent.ReplaySafe), e.echo("b", "")}
	var execEnv agent.ExecutionEnv
	shell := e.spec.sc.shell
	if e.spec.sc.generated {
		shell = e.program().shell
		tools = append(tools, kit.WorkTool())
		if e.program().spillCalls() {
			tools = append(tools, e.spillTool("spill-head"), e.spillTool("spill-tail"))
		}
		if e.program().typedCalls() {
			tools = append(tools, e.typedToolFor())
		}
	}
	if shell {
		if e.proc == nil {
			e.proc = proc.New(e.s.Runtime(), shellScripts, proc.WithRecorder(e.s))
		}
		tools, execEnv = append(tools, agent.BashTool(), agent.JobTool()), e.proc
		if e.spec.sc.generated && e.program().fileCalls() {
			if e.fileWrites == nil {
				e.fileWrites = map[string]int{}
			}
			for _, t := range []agent.Tool{agent.ReadTool(), agent.WriteTool(), agent.EditTool(), agent.NewContextTool()} {
				tools = append(tools, e.fileTool(t))
			}
			execEnv = fileEnv{e.proc, e}
		}
	}
	var swarm swarmOptions
	if e.spec.sc.generated {
		swarm = e.program().swarmOptions()
	}
	e.oracle.limits, e.oracle.retryDelay = swarm.limits, swarm.retry.Delay
	e.oracle.catalog, e.oracle.window, e.oracle.models = nil, sharedWindow(e.faux.Models()), e.faux.Models()
	e.oracle.replays = map[string]agent.ReplayPolicy{}
	for _, t := range tools {
		e.oracle.catalog = append(e.oracle.catalog, t.Definition.Name)
		e.oracle.replays[t.Definition.Name] = t.Replay
	}
	e.h, err = agent.Open(ctx, store, agent.Options{Runtime: e.s.Runtime(), Tools: tools, Env: execEnv, CheckInvariants: true,
		TaskKinds:     []core.TaskKind{e.meddlerKind(), e.shaperKind()},
		CheckPreviews: e.spec.seed%previewSeeds == 1, CheckContexts: e.spec.seed%contextSeeds == 2,
		WatchQueueMax: swarm.queue, Retry: swarm.retry, Budget: swarm.limits, TracerProvider: e.tracer(),
		Models:       agent.NewModels(agent.ModelSource{Provider: checkedProvider{e.faux, e.oracle}, Models: e.faux.Models()}),
		OnInvocation: func(inv core.Invocation, returned bool) { _ = e.oracle.invocation(inv, returned) },
		Report:       e.reported})
	if err != nil {
		e.noteEnv(err)
		e.h = nil
		return err
	}
	if handle == e.first {
		e.firstH = e.h
	} else if e.meddles() {
		e.abortOrphanedKeepers(ctx)
	}
	e.oracle.hooks.catalogTools = e.h.Tools(nil) // with the built-in tools the harness adds
	if e.spec.sc.generated && e.spec.seed%yieldSeeds == 0 {
		e.h.Hooks().On(agent.GenerationKind, agent.HookOnYield, core.Hook(e.onYield), core.HookOptions{})
	}
	if err := e.openHooks(ctx); err != nil {
		return err
	}
	// The root's events go into the trace, so a replay compares them too.
	w, err := e.h.Watch(ctx, root, rootWatched)
	if err != nil {
		return err
	}
	e.watch = w
	trail := e.trail(w, fmt.Sprintf("the watch of conversation %d", root))
	w.Start(ctx, func(ev core.ConversationEvent) {
		e.s.Record("event", ev)
		trail.listen(ctx, w, ev)
	})
	return nil
}

// ruleReports: the harness reports a failure it carries on past (§9.4:
// Options.Report, session watches' report events) only for a reason: a
// fault of the session or a failing hook's failure (failhooks.go). No
// other hook of picosim's fails, no listener of its
// panics, and every event a watch receives folds, so a hook error (a
// cancellation reported as a hook's failure among them), a listener's
// panic or an event that does not fold is the harness's mistake.
const ruleReports oracleRule = "reports-have-a-reason"

// reported is the session's Options.Report.
func (e *env) reported(err error) {
	var fe *core.FaultError
	if errors.As(err, &fe) {
		return
	}
	var he *core.HookError
	if errors.As(err, &he) && e.oracle.hookReported(he) {
		return // a failing hook's (failhooks.go)
	}
	_ = e.oracle.fail(broke(ruleReports, "the harness reported %v", err))
}

// yieldSeeds spaces the generated runs whose harness has an on_yield hook
// (onYield): every third seed.
const yieldSeeds = 3

// yieldsMax bounds the continuations onYield asks for in a row of one
// conversation.
const yieldsMax = 2

// onYield is an on_yield hook (§8.2): it continues a turn whose final
// answer's text has a length divisible by three, at most yieldsMax times
// in a row per conversation, so that continuations, and the input that
// may or may not join them, happen in generated runs.
func (e *env) onYield(ctx context.Context, in agent.OnYieldInput) (agent.OnYieldOutput, error) {
	if e.meddles() {
		e.driveOwnScope(ctx, e.h.Harness, in.ConversationID, fmt.Sprintf("conversation %d's on_yield hook", in.ConversationID))
	}
	if e.yields == nil {
		e.yields = map[storage.ID]int{}
	}
	n := 0
	for _, b := range in.Answer.Content.Blocks {
		n += len(b.Text)
	}
	if n%3 != 0 || e.yields[in.ConversationID] >= yieldsMax {
		e.yields[in.ConversationID] = 0
		return agent.OnYieldOutput{}, nil
	}
	e.yields[in.ConversationID]++
	return agent.OnYieldOutput{Continue: "keep going"}, nil
}

// watchQueue is the session's WatchQueueMax: a generated program's swarm
// queue, 0 (the default bound) for every other run.
func (e *env) watchQueue() int {
	if e.spec.sc.generated {
		return e.program().queue
	}
	return 0
}

// unfaulted reports whether nothing can have faulted the open session: it
// is a restarted process's (a restart runs without faults) or no fault of
// the plan has fired. A kind's unexpected error faults a session too, but
// fails the run on its own.
func (e *env) unfaulted() bool {
	return e.h != nil && (e.h != e.firstH || e.firedCount() == 0)
}

// noteEnv remembers err if it is the first of the machine's failures.
func (e *env) noteEnv(err error) {
	if e.envErr == nil && isEnvironment(err) {
		e.envErr = err
	}
}

// startHolds starts an actor per hold of the plan that releases it a
// seeded few virtual milliseconds after it fires, or lets its commit pass
// when the run ends first.
func (e *env) startHolds(ctx context.Context) {
	ctx, e.stopHolds = context.WithCancel(ctx)
	rt, handle := e.s.Runtime(), e.first
	for _, f := range e.spec.plan.Faults {
		if f.Kind != fault.Hold {
			continue
		}
		delay := time.Duration(1+e.s.Rand().IntN(holdDelayMax)) * time.Millisecond
		rt.Go(ctx, "release:"+f.Name, func(ctx context.Context) {
			switch err := handle.WaitHeld(ctx, f.Name); {
			case err == nil:
				_ = rt.Sleep(ctx, delay)
			case ctx.Err() == nil:
				return // the process died: its commit is dropped
			}
			handle.Release(f.Name)
		})
	}
}

// endHolds ends the hold releasers; the harness is closed by then.
func (e *env) endHolds() {
	if e.stopHolds != nil {
		e.stopHolds()
	}
}

// firedCount counts the plan's faults that fired.
func (e *env) firedCount() int {
	if e.first == nil {
		return 0
	}
	n := 0
	for _, f := range e.first.Fired() {
		if f.Event == fault.EventFire {
			n++
		}
	}
	return n
}

// stopper is the fault that stopped the first process: the first fail,
// uncertain or crash that fired.
func (e *env) stopper() (fault.Fault, bool) {
	if e.first == nil {
		return fault.Fault{}, false
	}
	for _, f := range e.first.Fired() {
		if f.Event == fault.EventFire && !f.Missed && (f.Kind == fault.Fail || f.Kind == fault.Uncertain || f.Kind == fault.Crash) {
			for _, pf := range e.spec.plan.Faults {
				if pf.Name == f.Name {
					return pf, true
				}
			}
		}
	}
	return fault.Fault{}, false
}

// stopping reports whether the current process is the first and a fault
// that stops it fired: its store may hold a commit the oracle could not
// know landed (an uncertain one), which the restart resyncs.
func (e *env) stopping() bool {
	_, stopped := e.stopper()
	return stopped && e.h == e.firstH
}

// recoveryAnswersMax is how many answers the faux model has for the
// restarted process beyond what the scenario scripted.
const recoveryAnswersMax = 16

// play runs the scenario and judges the run. Without a stopping fault the
// scenario's own checks and the session's invariants decide. A fail,
// uncertain or crash fault fail-stops the session, and the scenario's checks
// describe a run without it; the run is then judged as a restart would be:
// the session must have stopped, and a new process over the durable state
// must reopen it, drive it to idle, end every accepted input and keep every
// invariant. A run that fails after an oracle found a violation reports
// the violation: it came first, and the later failure is often its
// consequence.
func (e *env) play(ctx context.Context) error {
	err := e.playOut(ctx)
	if err != nil && e.oracle.first != nil {
		return e.oracle.first
	}
	return err
}

func (e *env) playOut(ctx context.Context) error {
	e.hostCtx = ctx
	err := e.open(ctx)
	if err == nil {
		err = e.spec.sc.run(ctx, e)
	}
	f, stopped := e.stopper()
	if !stopped {
		if err != nil {
			return err
		}
		return e.invariants(ctx)
	}
	set := map[string]any{"fault": f.Name}
	if err != nil {
		set["scenario"] = err.Error()
	}
	e.s.Record("restart", set)
	e.recovered = true
	if e.firstH != nil {
		if r, err := e.firstH.Drive(ctx); err == nil && r == core.Idle {
			return fmt.Errorf("the session carried on after %s", f)
		}
	}
	if e.h != nil {
		_ = e.h.Close(ctx) // the stopped process's own error, or a later one's close
	}
	for i := range recoveryAnswersMax {
		e.faux.AppendResponses(reply(fmt.Sprintf("recovered %d", i)))
	}
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("reopen after %s: %w", f, inRunDir{err, e.dir})
	}
	if err := e.driveIdle(ctx); err != nil {
		return err
	}
	if err := e.endQueued(ctx, "after the restart", e.driveIdle); err != nil {
		return err
	}
	if err := e.settled(ctx, nil); err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	return e.invariants(ctx)
}

// queuedRoundsMax bounds endQueued's rounds.
const queuedRoundsMax = 4

// endQueued makes every input still queued end. An idle accept takes
// nextRun input still queued into its turn, and a turn ends with queued
// steer and followUp: so text is accepted into the root, and into every
// other conversation with queued input (a fork; a child a failed turn left
// its followUp in; an acceptance that persisted though its caller saw the
// crash), then idle drives the session to idle. The turns those start may
// leave input queued in conversations they make (a child spawned and sent
// to), so this repeats, into those alone, at most queuedRoundsMax times.
func (e *env) endQueued(ctx context.Context, text string, idle func(context.Context) error) error {
	for round := range queuedRoundsMax {
		convs, err := e.queuedConversations(ctx, round == 0)
		if err != nil {
			return err
		}
		if len(convs) == 0 {
			return nil
		}
		for _, conv := range convs {
			if _, err := e.acceptInput(ctx, conv, agent.ModeFollowUp, text); err != nil && !isRejection(err) {
				return fmt.Errorf("the accept %s into %d: %w", text, conv, err)
			}
		}
		if err := idle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// queuedConversations is, ascending, every conversation with an input
// still queued, and with root the root whatever it holds.
func (e *env) queuedConversations(ctx context.Context, withRoot bool) ([]storage.ID, error) {
	store := e.h.Store()
	all, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	var out []storage.ID
	for _, c := range all {
		if c.ID == root && withRoot {
			out = append(out, root)
			continue
		}
		results, err := inputResults(ctx, store, c.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range results {
			if r.Status == agent.InputQueued {
				out = append(out, c.ID)
				break
			}
		}
	}
	return out, nil
}

// driveIdle drives the whole session of the restarted process to idle.
func (e *env) driveIdle(ctx context.Context) error {
	if r, err := e.h.Drive(ctx); err != nil || r != core.Idle {
		return fmt.Errorf("drive after the restart = %q, %v; want idle", r, err)
	}
	return nil
}

// watchCollapses follows the overflow collapses a committed batch creates
// and settles, and remembers the first task created to wait on a live one.
func (e *env) watchCollapses(rng storage.Range, b storage.CommitBatch) {
	if e.overflowing == nil {
		e.overflowing = map[storage.ID]bool{}
	}
	for i, w := range b.Writes {
		switch {
		case w.Type == storage.WriteTask && w.Task != nil:
			id := rng.First + storage.ID(i)
			for _, d := range w.Task.After {
				if e.overflowing[d] && e.waited == nil {
					e.waited = fmt.Errorf("commit %d–%d: task %d (%s) waits on overflow collapse %d, which hands its turn on only when it settles", rng.First, rng.Last, id, w.Task.Kind, d)
				}
			}
			var st agent.CollapseState
			if w.Task.Kind == agent.CollapseKindName && json.Unmarshal(w.Task.State, &st) == nil && st.Reason == agent.CollapseOverflow {
				e.overflowing[id] = true
			}
		case w.Type == storage.WriteSettle:
			delete(e.overflowing, w.ID)
		}
	}
}

// invariants checks that nothing acknowledged was lost and what picosim
// check checks, on the live session.
func (e *env) invariants(ctx context.Context) error {
	if e.waited != nil {
		return e.waited
	}
	if err := e.checkWatch(ctx, e.watch, root, rootWatched); err != nil {
		return err
	}
	if e.oracle.first != nil {
		return e.oracle.first
	}
	store := e.h.Store()
	if last := store.LastSeq(); last < e.acked {
		return fmt.Errorf("sequence %d was acknowledged, but the session ends at %d", e.acked, last)
	}
	got, err := store.GetEntries(ctx, e.entries)
	if err != nil {
		return err
	}
	for _, id := range e.entries {
		if got[id] == nil {
			return fmt.Errorf("entry %d was acknowledged, but the session has lost it", id)
		}
	}
	if _, problems := checkState(ctx, store, nil); len(problems) > 0 {
		return fmt.Errorf("session invariant: %s", strings.Join(problems, "; "))
	}
	if err := historicalContexts(ctx, store); err != nil {
		return e.oracle.fail(err)
	}
	if err := storeReads(ctx, store, e.mirrorLog); err != nil {
		return e.oracle.fail(err)
	}
	edgeQueries(ctx, store)
	if err := e.placedAsGiven(ctx, store); err != nil {
		return e.oracle.fail(err)
	}
	if err := e.oracle.queries(e.faux); err != nil {
		return err
	}
	if err := e.spans.check(ctx, store); err != nil {
		return e.oracle.fail(err)
	}
	if err := e.oracle.conversationsChecked(ctx, store, "the run"); err != nil {
		return err
	}
	if e.oracle.first != nil {
		// A rule a read above broke without saying so: the mirror's, a
		// disk answer memory does not give.
		return e.oracle.first
	}
	return nil
}

// coldReopen holds a disk backend's files, once the session closed, to
// what the run acknowledged: a new process opening them replays them
// whole, ends no earlier than last (the sequence the session closed at),
// keeps every acknowledged entry and passes picosim check's invariants.
// What a run leaves in the middle of its files (a torn line not cut before
// the next append, a retired scratch that replays) shows here, though the
// process that wrote after it never reads it back. It records nothing, so
// a replay's trace is unchanged.
func (e *env) coldReopen(ctx context.Context, last storage.ID) error {
	if e.spec.backend == "memory" {
		return nil
	}
	store, err := e.disk().Open(ctx)
	if err != nil {
		// Named without the run's temporary directory, so that a replay
		// of the run writes the same verdict.
		return fmt.Errorf("a cold open of the closed session's files fails: %s", strings.ReplaceAll(err.Error(), e.dir+string(filepath.Separator), ""))
	}
	defer store.Close(ctx)
	if got := store.LastSeq(); got < last {
		return fmt.Errorf("the session closed at sequence %d, but its files reopen at %d", last, got)
	}
	got, err := store.GetEntries(ctx, e.entries)
	if err != nil {
		return fmt.Errorf("a cold open of the closed session's files: %s", strings.ReplaceAll(err.Error(), e.dir+string(filepath.Separator), ""))
	}
	for _, id := range e.entries {
		if got[id] == nil {
			return fmt.Errorf("entry %d was acknowledged, but a cold open of the session's files has lost it", id)
		}
	}
	if _, problems := checkState(ctx, store, nil); len(problems) > 0 {
		return fmt.Errorf("session invariant, on a cold open of the files: %s", strings.Join(problems, "; "))
	}
	if e.mirrorLog != nil {
		if d := mirrorDiff(ctx, store, e.mirrorLog); d != "" {
			return fmt.Errorf("a cold open of the closed session's files: %s", strings.ReplaceAll(d, e.dir+string(filepath.Separator), ""))
		}
		if err := storeReads(ctx, store, e.mirrorLog); err != nil {
			return fmt.Errorf("a cold open of the closed session's files: %w", err)
		}
	}
	if e.spec.backend == "sqlite" {
		if d := neighboursIntact(ctx, sessionFile("sqlite", e.dir)); d != "" {
			return fmt.Errorf("after the run: %s", strings.ReplaceAll(d, e.dir+string(filepath.Separator), ""))
		}
		if d := leakedRows(ctx, sessionFile("sqlite", e.dir)); d != "" {
			return fmt.Errorf("after the run, the session's database: %s", d)
		}
	}
	return nil
}

// recorded writes every committed batch into the run's trace and counts the
// commits that reach the first process's handle.
type recorded struct {
	storage.Storage
	e      *env
	counts bool
}

func (r *recorded) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	if r.counts {
		r.e.batches++
	}
	// Persistence is a scheduling point: between a batch's construction
	// and its persistence any other actor may run (a reader, a watcher, a
	// host call waiting for the line), without a fault having to hold it.
	sim.Yield(ctx, "persist")
	rng, err := r.Storage.Commit(ctx, b)
	r.e.noteEnv(err)
	if f, broken := r.e.first.Broken(); broken {
		_ = r.e.oracle.fail(broke(ruleFailedWrite, "%s: %s", f.Name, f.Broken))
	}
	if errors.Is(err, fault.ErrInjected) && planted("ack-failed") {
		rng, err = storage.Range{First: r.Storage.LastSeq() + 1, Last: r.Storage.LastSeq() + storage.ID(len(b.Writes))}, nil
	}
	if err == nil {
		inv, byTask := core.InvocationOf(ctx)
		abort, aborts := hostAbortOf(ctx)
		var set abortSet
		if aborts && !byTask {
			set = r.e.oracle.foregroundSet(abort)
		}
		verdict := r.e.oracle.commit(inv, byTask, rng, b)
		r.e.oracle.idleSeen()
		if verdict == nil {
			_ = r.e.oracle.placed(ctx, r.Storage, b, rng, committer(inv, byTask))
			_ = r.e.oracle.configCaptured(ctx, r.Storage, b, rng, committer(inv, byTask))
			_ = r.e.oracle.selectionAdded(ctx, r.Storage, rng)
			if aborts && !byTask {
				_ = r.e.oracle.aborted(set, b, rng, committer(inv, byTask))
			}
		}
		r.e.acked = max(r.e.acked, rng.Last)
		r.e.watchCollapses(rng, b)
		for i, w := range b.Writes {
			if w.Type == storage.WriteEntry {
				r.e.entries = append(r.e.entries, rng.First+storage.ID(i))
			}
		}
		rec := struct {
			First  storage.ID      `json:"first"`
			Last   storage.ID      `json:"last"`
			Task   storage.ID      `json:"task,omitempty"`
			Writes []storage.Write `json:"writes"`
		}{rng.First, rng.Last, b.Task, b.Writes}
		r.e.s.Record("commit", rec)
		if r.e.spec.inspect != nil {
			r.e.last, _ = json.Marshal(rec)
		}
	}
	return rng, err
}

// echo is a tool that writes its name and arguments (after waiting
// waitMs, if they name it) and records the order tools ran in. One that
// must never be replayed (b) is held to running at most once per call: a
// process that reopens with the call interrupted settles it without
// running it again (§8.3).
func (e *env) echo(name string, replay agent.ReplayPolicy) agent.Tool {
	policy := replay
	if policy == "" {
		policy = agent.ReplayNever // what a tool that declares none gets (§8.3)
	}
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: "echo " + name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Replay:     replay,
		Execute: func(ctx context.Context, call string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			e.ran(name, call, rt.TaskID(), policy)
			if e.meddles() {
				e.meddleAsTool(ctx, rt.TaskRuntime, name, call)
			}
			var a struct {
				WaitMs int `json:"waitMs"` // how long it takes, waiting on nothing but ctx
			}
			if json.Unmarshal(args, &a) == nil && a.WaitMs > 0 {
				if err := rt.Sleep(ctx, rt.Now().Add(time.Duration(a.WaitMs)*time.Millisecond)); err != nil {
					return err
				}
			}
			out.Write(name + string(args))
			// Done with its arguments, it overwrites them: they are the
			// tool's to keep, so nothing durable may share their bytes.
			for i := range args {
				args[i] = 'x'
			}
			return nil
		},
	}
}

// ran notes that tool name ran call, of task: its place in toolOrder and,
// for a tool that is never replayed, its count, a second run being a
// failure. A call is its task: its id may come back in another answer.
func (e *env) ran(name, call string, task storage.ID, replay agent.ReplayPolicy) {
	e.toolOrder = append(e.toolOrder, name)
	if e.oracle.notOffered(task) {
		_ = e.oracle.fail(broke(ruleOffered, "tool %s ran call %s (task %d), which its request did not offer", name, call, task))
	}
	if replay != agent.ReplayNever {
		return
	}
	if e.onceRan == nil {
		e.onceRan = map[storage.ID]int{}
	}
	if e.onceRan[task]++; e.onceRan[task] > 1 {
		_ = e.oracle.fail(broke(ruleReplayNever, "tool %s, which is never replayed, ran call %s (task %d) %d times", name, call, task, e.onceRan[task]))
	}
}

// plantedEnv plants a bug for picosim's own tests, so that a test can show
// fuzz finding, shrinking and reproducing a failure of each kind:
//   - "tool-order": parallel-tools fails whenever tool b runs before tool
//     a, which only some schedules do;
//   - "ack-failed": a commit a fail fault refused is reported to the
//     harness as a success, so the session carries on past the fault;
//   - "steer": input-while-busy fails whenever it accepts a steer, whatever
//     else it does.
const plantedEnv = "PICOSIM_PLANT"

func planted(bug string) bool { return os.Getenv(plantedEnv) == bug }

// host numbers a host action that shrinking may leave out and records it
// in the trace; it reports whether to perform it (false when --drop names
// it).
func (e *env) host(action string) bool {
	i := e.actions
	e.actions++
	dropped := slices.Contains(e.spec.drop, i)
	e.s.Record("host", struct {
		Index   int    `json:"index"`
		Action  string `json:"action"`
		Dropped bool   `json:"dropped,omitempty"`
	}{i, action, dropped})
	return !dropped
}

// stopAndReopen is the host action of stopping the process and opening the
// session again: close joins what runs and writes no outcome. It reports
// whether it happened (false when --drop names it).
func (e *env) stopAndReopen(ctx context.Context) (bool, error) {
	if !e.host("stop and reopen") {
		return false, nil
	}
	if err := e.h.Close(ctx); err != nil {
		return true, err
	}
	if err := e.open(ctx); err != nil {
		return true, fmt.Errorf("reopen: %w", err)
	}
	return true, nil
}

// abort is the host action of aborting conversation conv. It reports
// whether it happened (false when --drop names it).
func (e *env) abort(ctx context.Context, conv storage.ID) (bool, error) {
	if !e.host("abort") {
		return false, nil
	}
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return true, err
	}
	return true, c.Abort(ctx)
}

// accept is the host action of accepting input in conv. A dropped accept
// returns input 0, which expect passes.
func (e *env) accept(ctx context.Context, conv storage.ID, mode agent.InputMode, text string) (storage.ID, error) {
	if !e.host(fmt.Sprintf("%s %q in %d", mode, text, conv)) {
		return 0, nil
	}
	return e.acceptInput(ctx, conv, mode, text)
}

// remember records an accepted input for the final check.
func (e *env) remember(conv, id storage.ID) {
	if e.inputs == nil {
		e.inputs = map[storage.ID][]storage.ID{}
	}
	e.inputs[conv] = append(e.inputs[conv], id)
}

// acceptInput accepts input in conv and remembers it for the final check.
func (e *env) acceptInput(ctx context.Context, conv storage.ID, mode agent.InputMode, text string) (storage.ID, error) {
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return 0, err
	}
	var id, entry storage.ID
	content := ai.PlainText(text)
	switch mode {
	case agent.ModeSteer:
		id, err = c.Steer(ctx, content)
	case agent.ModeNextRun:
		id, err = c.NextRun(ctx, content)
	case agent.ModeWrite:
		id, entry, err = c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": text}})
	default:
		id, err = c.Accept(ctx, content, agent.AcceptOptions{})
	}
	if err == nil {
		e.remember(conv, id)
		kind := core.UserKind.Kind()
		if mode == agent.ModeWrite {
			kind = core.NoticeKind.Kind()
		}
		e.give(conv, id, kind, text)
		if mode == agent.ModeWrite && !e.stopping() {
			err = e.oracle.writeMade(ctx, e.h.Store(), conv, id, entry, kind)
		}
	}
	return id, err
}

// hostInput is what the host gave an input as: an entry's kind and text
// (a user entry's message, a written notice's data).
type hostInput struct {
	conv       storage.ID
	kind, text string
}

// give notes what input id was given as, at its first acceptance (a
// request id's repeat returns the first input, whatever it carried).
func (e *env) give(conv, id storage.ID, kind, text string) {
	if e.given == nil {
		e.given = map[storage.ID]hostInput{}
	}
	if _, ok := e.given[id]; !ok {
		e.given[id] = hostInput{conv, kind, text}
	}
}

// rulePlacedAsGiven: an input placed in its conversation is the entry the
// host gave: a user entry whose message says its text, a notice whose
// data is what was written, a reset that heads the context from itself,
// or a handoff that does so saying its text.
const rulePlacedAsGiven oracleRule = "a-placed-input-is-what-the-host-gave"

// placedAsGiven holds every input the host gave that its result says was
// placed to the rule, by reading the entry it names.
func (e *env) placedAsGiven(ctx context.Context, store storage.Storage) error {
	convs := map[storage.ID]bool{}
	for _, g := range e.given {
		convs[g.conv] = true
	}
	for _, conv := range slices.Sorted(maps.Keys(convs)) {
		var placed []storage.ID
		at := map[storage.ID]storage.ID{}
		if err := agent.EachInputResult(ctx, store, conv, func(input storage.ID, r agent.InputResult, _ json.RawMessage) {
			if _, ok := e.given[input]; ok && r.PlacementEntryID != 0 {
				placed = append(placed, input)
				at[input] = r.PlacementEntryID
			}
		}); err != nil {
			return err
		}
		ids := make([]storage.ID, 0, len(placed))
		for _, in := range placed {
			ids = append(ids, at[in])
		}
		entries, err := store.GetEntries(ctx, ids)
		if err != nil {
			return err
		}
		for _, in := range placed {
			g, ent := e.given[in], entries[at[in]]
			switch {
			case ent == nil:
				return broke(rulePlacedAsGiven, "input %d was placed at entry %d, which does not exist", in, at[in])
			case ent.Kind != g.kind:
				return broke(rulePlacedAsGiven, "input %d, given as a %s, was placed as entry %d, a %s", in, g.kind, ent.ID, ent.Kind)
			case g.kind == core.NoticeKind.Kind() && !sameJSON(ent.Data, map[string]string{"text": g.text}):
				return broke(rulePlacedAsGiven, "input %d, written with the text %q, was placed as entry %d with data %s", in, g.text, ent.ID, ent.Data)
			case g.kind == core.UserKind.Kind() && (len(ent.Model) != 1 || ent.Model[0].Content.TextOf() != g.text):
				return broke(rulePlacedAsGiven, "input %d, given as %q, was placed as entry %d saying %v", in, g.text, ent.ID, ent.Model)
			case (g.kind == core.ResetKind.Kind() || g.kind == core.HandoffKind.Kind()) && ent.Head != ent.ID:
				return broke(rulePlacedAsGiven, "input %d, given as a %s, was placed as entry %d with head %d, not itself", in, g.kind, ent.ID, ent.Head)
			case g.kind == core.ResetKind.Kind() && len(ent.Model) > 0:
				return broke(rulePlacedAsGiven, "input %d, given as a reset, was placed as entry %d saying %v", in, ent.ID, ent.Model)
			case g.kind == core.HandoffKind.Kind() && (len(ent.Model) != 1 || ent.Model[0].Content.TextOf() != g.text || !sameJSON(ent.Data, core.HandoffData{Text: g.text})):
				return broke(rulePlacedAsGiven, "input %d, a handoff saying %q, was placed as entry %d saying %v with data %s", in, g.text, ent.ID, ent.Model, ent.Data)
			}
		}
	}
	return nil
}

// driveAsync drives conv on an actor of its own; the returned event is set
// when the drive returns.
func (e *env) driveAsync(ctx context.Context, conv storage.ID) core.Event {
	done := e.s.Runtime().NewEvent("drive")
	e.s.Runtime().Go(ctx, "driver:"+strconv.FormatInt(int64(conv), 10), func(ctx context.Context) {
		if c, err := e.h.Conversation(ctx, conv); err == nil {
			w := e.oracle.watchIdle(conv)
			r, err := c.Drive(ctx)
			_ = e.oracle.droveIdle(w, r, err)
		}
		done.Set()
	})
	return done
}

// scribble overwrites the tasks an Inspect returned, once the host is done
// with them: they are the caller's copies (core.Harness.Inspect), so a
// harness that handed out its own records instead has its index changed
// under it, which its invariants and the oracles then see.
func scribble(in core.Inspection) {
	for _, t := range append(in.Start, in.Inflight...) {
		t.Status, t.Role, t.Abort, t.Background = "scribbled", storage.RoleTerminal, !t.Abort, !t.Background
		t.ConversationID, t.Kind = t.ConversationID+1000, "scribbled"
		for i := range t.State {
			t.State[i] = ' '
		}
		for i := range t.After {
			t.After[i] = 0
		}
		for i := range t.Owns {
			t.Owns[i] = 0
		}
	}
}

// settled checks the invariants every scenario ends with: no live
// foreground work, every accepted input has a result, and every input of
// the session, whoever accepted it, is terminal (or still queued when
// allowQueued says its mode waits).
func (e *env) settled(ctx context.Context, allowQueued func(storage.ID) bool) error {
	in, err := e.h.Inspect(ctx)
	if err != nil {
		return err
	}
	for _, t := range append(in.Start, in.Inflight...) {
		if !t.Background {
			return fmt.Errorf("task %d (%s) is still %s", t.ID, t.Kind, t.Status)
		}
	}
	if err := e.idleHoldsNothing(ctx, in); err != nil {
		return err
	}
	scribble(in)
	store := e.h.Store()
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	for _, c := range convs {
		results, err := inputResults(ctx, store, c.ID)
		if err != nil {
			return err
		}
		for _, id := range e.inputs[c.ID] {
			if _, ok := results[id]; !ok {
				return fmt.Errorf("input %d has no result", id)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(results)) {
			switch r := results[id]; {
			case r.Status == agent.InputQueued && allowQueued != nil && allowQueued(id):
			case !r.Status.Terminal():
				return fmt.Errorf("input %d ended %s, not terminal", id, r.Status)
			}
		}
	}
	return nil
}

// idleChecked reports whether the run holds an idle session to holding
// nothing: on three seeds in four, not those from 1 (the golden traces'
// seed), whose schedules the extra reads would change.
func (e *env) idleChecked() bool { return e.spec.seed%4 != 1 }

// idleHoldsNothing holds a session whose inspection in shows no live task
// to holding no drive or task waiter either (when idleChecked).
func (e *env) idleHoldsNothing(ctx context.Context, in core.Inspection) error {
	if len(in.Start)+len(in.Inflight) > 0 || !e.idleChecked() {
		return nil
	}
	st, err := e.h.Stats(ctx)
	if err != nil {
		return err
	}
	if st.Live != 0 || st.Waiters != 0 || st.TaskWaiters != 0 {
		return e.oracle.fail(broke(ruleIdleHoldsNothing, "no task is live, yet the driver counts %d live, %d drive waiters and %d task waiters", st.Live, st.Waiters, st.TaskWaiters))
	}
	return nil
}

func (e *env) expect(ctx context.Context, conv, input storage.ID, want agent.InputStatus) error {
	if input == 0 {
		return nil // a dropped accept
	}
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return err
	}
	r, _, err := c.Result(ctx, input)
	if err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("input %d is %s; want %s", input, r.Status, want)
	}
	return nil
}

// inRunDir is an error that names files of the run's temporary directory
// by their names in it, so that a replay of the run, in another directory,
// writes the same verdict.
type inRunDir struct {
	err error
	dir string
}

func (e inRunDir) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.dir+string(filepath.Separator), "")
}

func (e inRunDir) Unwrap() error { return e.err }
