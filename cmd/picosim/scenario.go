package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// scenario is one built-in agent-loop scenario: a program over a session
// that returns an error when an invariant it checks breaks.
type scenario struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env) error
}

// scenarios are the built-in suite, in the order `picosim list` shows.
var scenarios = []scenario{
	{"basic-turn", "one input, one answer", basicTurn},
	{"parallel-tools", "an answer that calls two tools at once, then answers", parallelTools},
	{"input-while-busy", "steer, followUp, nextRun and write while a turn runs", inputWhileBusy},
	{"abort-mid-stream", "a conversation abort while the answer streams", abortMidStream},
	{"retry-and-deferred", "a rate-limited attempt, then a deferred answer polled to the end", retryAndDeferred},
	{"crash-reopen", "the process stops mid-turn; a new one reopens and drives to the end", crashReopen},
	{"fork-and-continue", "fork at an answer and continue both conversations", forkAndContinue},
	{"shutdown-queued", "shutdown with queued input, which survives a reopen", shutdownQueued},
}

func findScenario(name string) (scenario, bool) {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc, true
		}
	}
	return scenario{}, false
}

// env is a scenario's session: a backend in a directory, the faux provider
// and the tools, reopenable as a restarted process would.
type env struct {
	s       *sim.Sim
	backend string
	dir     string
	store   storage.Storage
	faux    *faux.Provider
	h       *core.Harness
	watch   *core.WatchHandle
	inputs  map[storage.ID][]storage.ID // conversation → inputs accepted
	// toolOrder is the order tools ran in (the simulator runs one at a time).
	toolOrder []string
}

// keepOpen is a memory store whose Close keeps the data, so a "new
// process" can open it again.
type keepOpen struct{ *memory.Store }

func (keepOpen) Close(context.Context) error { return nil }

func (e *env) openStore(ctx context.Context) (storage.Storage, error) {
	switch e.backend {
	case "jsonl":
		return jsonl.Open(ctx, filepath.Join(e.dir, "session.jsonl"), jsonl.Options{})
	case "sqlite":
		return sqlite.Open(ctx, filepath.Join(e.dir, "sessions.db"), sqlite.Options{Session: "picosim"})
	}
	if rec, ok := e.store.(recorded); ok {
		return rec.keepData(), nil
	}
	return keepOpen{memory.New()}, nil
}

// open opens (or reopens) the session: a new harness over the durable state.
func (e *env) open(ctx context.Context) error {
	store, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	store = recorded{Storage: store, s: e.s}
	e.store = store
	tools := []core.Tool{e.echo("a"), e.echo("b")}
	e.h, err = core.Open(ctx, store, core.Options{Runtime: e.s.Runtime(), Tools: tools,
		Models: core.NewModels(core.ModelSource{Provider: e.faux, Models: e.faux.Models()})})
	if err != nil {
		return err
	}
	// The root's events go into the trace, so a replay compares them too.
	w, err := e.h.Watch(ctx, root, core.WatchOptions{Tail: 1})
	if err != nil {
		return err
	}
	e.watch = w
	w.Start(ctx, func(ev core.ConversationEvent) { e.s.Record("event", ev) })
	return nil
}

// recorded writes every committed batch into the run's trace.
type recorded struct {
	storage.Storage
	s *sim.Sim
}

func (r recorded) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	rng, err := r.Storage.Commit(ctx, b)
	if err == nil {
		r.s.Record("commit", struct {
			First  storage.ID      `json:"first"`
			Last   storage.ID      `json:"last"`
			Task   storage.ID      `json:"task,omitempty"`
			Writes []storage.Write `json:"writes"`
		}{rng.First, rng.Last, b.Task, b.Writes})
	}
	return rng, err
}

// keepData unwraps the memory store a reopen continues from.
func (r recorded) keepData() storage.Storage { return r.Storage }

// echo is a tool that writes its name and arguments and records the order
// tools ran in.
func (e *env) echo(name string) core.Tool {
	return core.Tool{
		Definition: ai.Tool{Name: name, Description: "echo " + name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Replay:     core.ReplaySafe,
		Execute: func(_ context.Context, _ string, args json.RawMessage, out *core.ToolOutput, _ *core.ToolRuntime) error {
			e.toolOrder = append(e.toolOrder, name)
			out.Write(name + string(args))
			return nil
		},
	}
}

// plantedEnv, set to "tool-order", plants a bug for picosim's own tests:
// parallel-tools fails whenever tool b runs before tool a, which only some
// schedules do. It exists so a test can show fuzz finding, shrinking and
// reproducing a failure.
const plantedEnv = "PICOSIM_PLANT"

// accept accepts input in conv and remembers it for the final check.
func (e *env) accept(ctx context.Context, conv storage.ID, mode core.InputMode, text string) (storage.ID, error) {
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return 0, err
	}
	var id storage.ID
	content := ai.PlainText(text)
	switch mode {
	case core.ModeSteer:
		id, err = c.Steer(ctx, content)
	case core.ModeNextRun:
		id, err = c.NextRun(ctx, content)
	case core.ModeWrite:
		id, err = c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": text}})
	default:
		id, err = c.Accept(ctx, content, core.AcceptOptions{})
	}
	if err == nil {
		if e.inputs == nil {
			e.inputs = map[storage.ID][]storage.ID{}
		}
		e.inputs[conv] = append(e.inputs[conv], id)
	}
	return id, err
}

// driveAsync drives conv on an actor of its own; the returned event is set
// when the drive returns.
func (e *env) driveAsync(ctx context.Context, conv storage.ID) core.Event {
	done := e.s.Runtime().NewEvent("drive")
	e.s.Runtime().Go(ctx, "driver:"+strconv.FormatInt(int64(conv), 10), func(ctx context.Context) {
		if c, err := e.h.Conversation(ctx, conv); err == nil {
			_, _ = c.Drive(ctx)
		}
		done.Set()
	})
	return done
}

// settled checks the invariants every scenario ends with: no live
// foreground work, and every accepted input in a terminal result (or still
// queued when allowQueued says its mode waits).
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
	for conv, ids := range e.inputs {
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, ok, err := c.Result(ctx, id)
			switch {
			case err != nil:
				return err
			case !ok:
				return fmt.Errorf("input %d has no result", id)
			case r.Status == core.InputQueued && allowQueued != nil && allowQueued(id):
			case !r.Status.Terminal():
				return fmt.Errorf("input %d ended %s, not terminal", id, r.Status)
			}
		}
	}
	return nil
}

func (e *env) expect(ctx context.Context, conv, input storage.ID, want core.InputStatus) error {
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

func reply(text string) faux.Step { return faux.Reply(faux.Text(text)) }

func toolCalls(names ...string) faux.Step {
	blocks := make([]ai.Block, len(names))
	for i, n := range names {
		blocks[i] = faux.ToolCall(fmt.Sprintf("call-%s", n), n, `{}`)
	}
	return faux.Reply(blocks...).WithStop(ai.StopToolUse)
}

const root storage.ID = 1

// turn accepts text in the root, drives it to idle and expects the input
// done.
func (e *env) turn(ctx context.Context, text string) error {
	id, err := e.accept(ctx, root, core.ModeFollowUp, text)
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	return e.expect(ctx, root, id, core.InputDone)
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
	id, err := e.accept(ctx, root, core.ModeFollowUp, "tool:a,b")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	p, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: core.PostToolsKindName})
	if err != nil {
		return err
	}
	if len(p.Items) != 1 {
		return fmt.Errorf("%d post_tools tasks; want exactly one", len(p.Items))
	}
	if os.Getenv(plantedEnv) == "tool-order" && strings.Join(e.toolOrder, ",") == "b,a" {
		return fmt.Errorf("planted bug: tool b ran before tool a")
	}
	if err := e.expect(ctx, root, id, core.InputDone); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

func inputWhileBusy(ctx context.Context, e *env) error {
	e.faux.SetResponses(toolCalls("a").WithDelay(time.Second), reply("joined"), reply("followed up"), reply("next run"))
	if _, err := e.accept(ctx, root, core.ModeFollowUp, "go"); err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	steps := []core.InputMode{core.ModeSteer, core.ModeFollowUp, core.ModeWrite}
	e.s.Rand().Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	for _, m := range steps {
		if _, err := e.accept(ctx, root, m, string(m)); err != nil {
			return err
		}
	}
	next, err := e.accept(ctx, root, core.ModeNextRun, "next")
	if err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.settled(ctx, func(id storage.ID) bool { return id == next }); err != nil {
		return err
	}
	if err := e.expect(ctx, root, next, core.InputQueued); err != nil {
		return fmt.Errorf("nextRun must wait for an idle accept: %w", err)
	}
	// The next explicit idle accept takes the nextRun input into its group.
	if _, err := e.accept(ctx, root, core.ModeFollowUp, "now"); err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	return e.settled(ctx, nil)
}

func abortMidStream(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply(strings.Repeat("streaming words ", 50)).WithDelay(100 * time.Millisecond))
	id, err := e.accept(ctx, root, core.ModeFollowUp, "go")
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
	if err := c.Abort(ctx); err != nil {
		return err
	}
	done.Wait(ctx)
	// The abort wins or the answer does: either way the input ends once.
	r, _, err := c.Result(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != core.InputCancelled && r.Status != core.InputDone {
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
	id, err := e.accept(ctx, root, core.ModeFollowUp, "go")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(e.s.Rand().IntN(120))*time.Millisecond); err != nil {
		return err
	}
	// The process stops: close joins what runs and writes no outcome.
	if err := e.h.Close(ctx); err != nil {
		return err
	}
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("reopen: %w", err)
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

func forkAndContinue(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("first"), reply("on the fork"), reply("on the source"))
	if _, err := e.accept(ctx, root, core.ModeFollowUp, "one"); err != nil {
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
	if _, err := e.accept(ctx, fork.ID, core.ModeFollowUp, "fork"); err != nil {
		return err
	}
	if _, err := e.accept(ctx, root, core.ModeFollowUp, "source"); err != nil {
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

func shutdownQueued(ctx context.Context, e *env) error {
	e.faux.SetResponses(reply("slow").WithDelay(time.Hour))
	if _, err := e.accept(ctx, root, core.ModeFollowUp, "go"); err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	next, err := e.accept(ctx, root, core.ModeNextRun, "later")
	if err != nil {
		return err
	}
	if err := e.h.Shutdown(ctx); err != nil {
		return err
	}
	done.Wait(ctx)
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if err := e.expect(ctx, root, next, core.InputQueued); err != nil {
		return fmt.Errorf("queued input after shutdown and reopen: %w", err)
	}
	return e.settled(ctx, func(id storage.ID) bool { return id == next })
}
