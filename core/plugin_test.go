package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The kernel's kind API is complete when a plugin can write what the
// built-in generation does. miniGeneration is such a plugin, written with
// exported names only: in one commit it reads the cached derived context
// and the request projection and marks itself streaming; it asks a hook
// chain for a prefix (a failing handler is reported and skipped); it
// streams the provider's reply into its scratch as compact frames through
// the progress bridge, keeping a preview of the text so far; and it settles
// with the answer in one commit.
type miniGeneration struct {
	core.KindFuncs
}

var (
	miniFrames  = storage.ScratchList[ai.Frame]("mini.frames")
	miniBefore  = "before_stream"
	miniStatus  = map[string]storage.TaskRole{"pending": storage.RoleStart, "streaming": storage.RoleInflight, "done": storage.RoleTerminal, "aborted": storage.RoleTerminal}
	miniKindRef = storage.DefineEntryKind[struct{}]("mini_generation") // what hooks are registered against
)

// prefixIn and prefixOut are the before_stream hook's types.
type prefixIn struct{ Prefix string }
type prefixOut struct{ Add string }

// miniSeen is what the plugin observed, for the test to compare.
type miniSeen struct {
	contextIDs []storage.ID
	request    []ai.Message
	frames     []ai.Frame
}

// InitPreview builds the preview, {"text": ...}, from durable frames: what
// a reopened process or a late watcher starts from.
func (miniGeneration) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	frames, err := readMiniFrames(sc)
	if err != nil {
		return nil, err
	}
	text := ""
	if m, err := ai.ReduceFrames(frames); err == nil && m != nil {
		text = m.Content.TextOf()
	}
	return map[string]any{"text": text}, nil
}

func readMiniFrames(sc core.ScratchReader) ([]ai.Frame, error) {
	elems, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return sc.ReadList(miniFrames.Address, storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	out := make([]ai.Frame, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e.Value, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func newMiniGeneration(provider ai.Provider, model ai.Model, seen *miniSeen) miniGeneration {
	k := miniGeneration{core.KindFuncs{Statuses: core.Statuses{Name: miniKindRef.Kind(), Initial: "pending", Roles: miniStatus}}}
	k.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
			c, err := tx.DerivedContext(tx.ID)
			if err != nil {
				return err
			}
			seen.contextIDs = c.IDs()
			if seen.request, err = tx.RequestMessages(tx.ID, nil); err != nil {
				return err
			}
			tx.Patch(task.ID, core.TaskPatch{Status: "streaming"})
			return nil
		}); err != nil {
			return err
		}
		in, err := core.RunHookChain(ctx, rt, miniKindRef, miniBefore, prefixIn{},
			func(in prefixIn, out prefixOut, ok bool, err error) prefixIn {
				if err != nil {
					rt.Report(&core.HookError{Kind: miniKindRef.Kind(), Point: miniBefore, Task: task.ID, Err: err})
					return in
				}
				if ok {
					in.Prefix += out.Add
				}
				return in
			})
		if err != nil {
			return err
		}
		progress, err := rt.Progress(ctx)
		if err != nil {
			return err
		}
		preview, err := rt.Preview(ctx)
		if err != nil {
			return err
		}
		var enc ai.FrameEncoder
		var final *ai.Message
		stream := provider.Stream(ctx, ai.Request{Model: model, Messages: seen.request})
		for final == nil {
			ev, ok := stream.Next(ctx)
			if !ok {
				return errors.New("mini: the stream ended without a final event")
			}
			if ev.Terminal() {
				final = ev.Message
				break
			}
			if ev.Type == ai.EventTextDelta {
				if err := preview.AppendString(delta.Path{"text"}, ev.Delta); err != nil {
					return err
				}
			}
			frame, emit, err := enc.Encode(ev)
			if err != nil {
				return err
			}
			if emit {
				progress.Write(func(sc core.ScratchTx) error { sc.Append(miniFrames.Address, frame); return nil })
			}
		}
		if err := progress.Drain(); err != nil {
			return err
		}
		if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
			seen.frames, err = readMiniFrames(sc)
			return err
		}); err != nil {
			return err
		}
		_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
			answer := core.AppendAssistant(tx.Tx, tx.ID, *final)
			tx.Settle(task.ID, "done", map[string]any{"answer": answer, "prefix": in.Prefix})
			return nil
		})
		return err
	}
	k.AbortFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
		return err
	}
	return k
}

func TestAPluginKindStreamsAGenerationThroughTheExportedKindAPI(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		provider := must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		reply := strings.Repeat("plugin token ", 12)
		provider.SetResponses(faux.Reply(faux.Text(reply)))
		var seen miniSeen
		kind := newMiniGeneration(provider, provider.Models()[0], &seen)
		var reports []error
		var outputs []core.TaskOutput
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{kind}, CheckInvariants: true,
			Report:       func(err error) { reports = append(reports, err) },
			OnTaskOutput: func(o core.TaskOutput) { outputs = append(outputs, o) }}))
		h.Hooks().On(miniKindRef, miniBefore, core.Hook(func(context.Context, prefixIn) (prefixOut, error) {
			return prefixOut{}, errors.New("a broken plugin handler")
		}), core.HookOptions{})
		h.Hooks().On(miniKindRef, miniBefore, core.Hook(func(_ context.Context, in prefixIn) (prefixOut, error) {
			return prefixOut{Add: in.Prefix + "ok:"}, nil
		}), core.HookOptions{})
		c := h.Root()
		var task storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("first", 0))
			core.AppendAssistant(tx.Tx, tx.ID, ai.Message{Role: ai.RoleAssistant, Content: ai.PlainText("earlier answer"), StopReason: ai.StopStop})
			core.AppendUser(tx.Tx, tx.ID, ai.UserText("now answer this", 0))
			return nil
		}))
		fresh := must(core.DeriveContext(ctx, h.Store(), c.ID, 0))
		wantRequest := must(fresh.Request())
		task = simtest.CreateTask(t, ctx, c, kind, core.TaskSpec{})
		must(c.Drive(ctx))

		if diff := cmp.Diff(fresh.IDs(), seen.contextIDs); diff != "" {
			t.Fatalf("cached context (-fresh +cached):\n%s", diff)
		}
		if diff := cmp.Diff(wantRequest, seen.request); diff != "" {
			t.Fatalf("cached request projection (-fresh +cached):\n%s", diff)
		}
		if got := provider.Requests(); len(got) != 1 || len(got[0].Messages) != len(wantRequest) {
			t.Fatalf("provider requests = %d; want one carrying the %d projected messages", len(got), len(wantRequest))
		}
		if m := must(ai.ReduceFrames(seen.frames)); m == nil || m.Content.TextOf() != reply {
			t.Fatalf("frames in scratch rebuild %v; want the reply", m)
		}
		var replica any
		for _, o := range outputs {
			if o.Task != task {
				t.Fatalf("output of task %d; only %d streams", o.Task, task)
			}
			replica = must(delta.ApplyImmutable(replica, o.Ops))
		}
		if got := fmt.Sprint(replica); got != fmt.Sprint(map[string]any{"text": reply}) {
			t.Fatalf("preview replica = %s; want the streamed text", got)
		}
		var he *core.HookError
		if len(reports) != 1 || !errors.As(reports[0], &he) || he.Task != task || he.Point != miniBefore || he.Kind != miniKindRef.Kind() {
			t.Fatalf("reports = %v; want the broken handler's HookError for task %d", reports, task)
		}
		done := must2(h.GetTask(ctx, task))
		st := simtest.State(t, done)
		if done.Status != "done" || st["prefix"] != "ok:" {
			t.Fatalf("task %s with state %v; want done with the working handler's prefix", done.Status, st)
		}
		answer := must2(h.GetEntry(ctx, storage.ID(st["answer"].(float64))))
		if answer.Model[0].Content.TextOf() != reply {
			t.Fatalf("answer entry %q; want the reply", answer.Model[0].Content.TextOf())
		}
		must(0, h.Close(ctx))
	})
}

// must2 is must for a read that also says whether it found something.
func must2[T any](v T, ok bool, err error) T {
	if err != nil || !ok {
		panic(fmt.Sprintf("read: found %v, %v", ok, err))
	}
	return v
}
