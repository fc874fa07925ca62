package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// scratchOf reads a task's committed scratch straight from storage, the way
// a freshly opened process would.
type scratchOf struct {
	ctx   context.Context
	store storage.Storage
	task  storage.ID
}

func (s scratchOf) bind(a storage.Address) storage.Address { a.Scope.ID = s.task; return a }

func (s scratchOf) GetValue(a storage.Address) (storage.Version, bool, error) {
	return s.store.GetValue(s.ctx, s.bind(a), 0)
}

func (s scratchOf) ReadList(a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	return s.store.ReadList(s.ctx, s.bind(a), q)
}

// previewRun opens a harness that records every task output and checks, at
// each one, that a replica folded from the outputs, the live preview and a
// preview built from durable scratch are all the same value.
type previewRun struct {
	t       testing.TB
	h       *agent.Harness
	faux    *faux.Provider
	store   storage.Storage
	outputs map[storage.ID][]core.TaskOutput
	replica map[storage.ID]any
}

func openPreviewRun(t testing.TB, ctx context.Context, s *sim.Sim, tools []agent.Tool) *previewRun {
	r := &previewRun{t: t, store: memory.New(), outputs: map[storage.ID][]core.TaskOutput{}, replica: map[storage.ID]any{}}
	r.faux = must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
	var err error
	r.h, err = agent.Open(ctx, r.store, agent.Options{
		Runtime: s.Runtime(), Tools: tools, CheckInvariants: true,
		Models:       agent.NewModels(agent.ModelSource{Provider: r.faux, Models: r.faux.Models()}),
		OnTaskOutput: func(o core.TaskOutput) { r.check(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *previewRun) check(ctx context.Context, o core.TaskOutput) {
	r.t.Helper()
	r.outputs[o.Task] = append(r.outputs[o.Task], o)
	live, ok := must2(r.h.Preview(ctx, o.Task))
	if !ok {
		r.t.Fatalf("task %d has no live preview", o.Task)
	}
	prev, known := r.replica[o.Task]
	switch {
	case known || delta.IsBase(o.Ops):
		next, err := delta.ApplyImmutable(prev, o.Ops)
		if err != nil {
			r.t.Fatalf("task %d: applying %v: %v", o.Task, o.Ops, err)
		}
		if diff := cmp.Diff(live, next); diff != "" {
			r.t.Fatalf("task %d: the replica folded from task outputs differs from the live preview (-live +replica):\n%s", o.Task, diff)
		}
		r.replica[o.Task] = next
	default:
		// A replica that attaches now starts from the view's preview.
		r.replica[o.Task] = live
	}
	task, _, err := r.h.GetTask(ctx, o.Task)
	if err != nil {
		r.t.Fatal(err)
	}
	kind, _ := r.h.Kinds().Task(task.Kind)
	durable := must(kind.(core.PreviewKind).InitPreview(ctx, task, scratchOf{ctx, r.store, o.Task}))
	if diff := cmp.Diff(live, durable); diff != "" {
		r.t.Fatalf("task %d: the preview built from durable scratch differs from the live one (-live +durable):\n%s", o.Task, diff)
	}
}

func TestAStreamedTokenIsOneAppendOpAndNothingElse(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		r := openPreviewRun(t, ctx, s, nil)
		r.faux.SetResponses(faux.Reply(faux.Thinking("let me think about it"), faux.Text(strings.Repeat("word ", 40))))
		c := r.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		gens := must(r.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: agent.GenerationKindName})).Items
		outs := r.outputs[gens[0].ID]
		if len(outs) < 10 {
			t.Fatalf("%d outputs; want one per streamed frame", len(outs))
		}
		appends := 0
		for i, o := range outs {
			if i > 0 && delta.IsBase(o.Ops) {
				t.Fatalf("output %d is a replace mid-stream: %v", i, o.Ops)
			}
			for _, op := range o.Ops {
				if op.Verb == delta.VerbAppend {
					appends++
					if len(o.Ops) != 1 {
						t.Fatalf("output %d carries %v; a token is one append and nothing else", i, o.Ops)
					}
				}
			}
		}
		if appends == 0 {
			t.Fatal("no append op: tokens did not stream as appends")
		}
		if _, ok := must2(r.h.Preview(ctx, gens[0].ID)); ok {
			t.Fatal("a settled generation still has a preview")
		}
		must(0, r.h.Close(ctx))
	})
}

func TestASlidingToolTailIsTruncateThenAppend(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		tail := toolFunc("tail", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			for i := range 8 {
				out.Write(strings.Repeat(string(rune('a'+i)), 3) + "\n")
			}
			return nil
		})
		tail.Output = agent.OutputLimits{MaxLines: 3, Retain: "tail"}
		r := openPreviewRun(t, ctx, s, []agent.Tool{tail})
		r.faux.SetResponses(calls("tail"), answer("done"))
		must(r.h.Root().Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		tools := must(r.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, Kind: agent.ToolKindName})).Items
		textPath := delta.Path{"content", 0, "text"}
		slid := 0
		for i, o := range r.outputs[tools[0].ID] {
			var onText []delta.Verb
			for _, op := range o.Ops {
				if cmp.Equal(op.Path, textPath) {
					onText = append(onText, op.Verb)
				}
			}
			switch {
			case cmp.Equal(onText, []delta.Verb{delta.VerbTruncate, delta.VerbAppend}):
				slid++
			case len(onText) > 1 || (len(onText) == 1 && onText[0] != delta.VerbAppend):
				t.Fatalf("output %d changes the text with %v; want an append, or a truncate then an append once the tail slides", i, o.Ops)
			}
		}
		if slid != 5 {
			t.Fatalf("%d sliding writes became t+a; want 5 (writes 4 to 8 of a 3-line tail)", slid)
		}
		must(0, r.h.Close(ctx))
	})
}

// A process that restarts mid-stream builds the preview from the frames on
// disk, and it equals what the first process had live.
func TestPreviewAfterReopenEqualsTheLivePreview(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		var live any
		var gen storage.ID
		p := must(faux.New(s.Runtime(), s.Rand(), faux.Options{TokensPerSecond: 10}))
		p.SetResponses(faux.Reply(faux.Text(strings.Repeat("slow words ", 30))))
		var h *agent.Harness
		h = must(agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), CheckInvariants: true,
			Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()}),
			OnTaskOutput: func(o core.TaskOutput) {
				gen = o.Task
				live, _ = must2(h.Preview(ctx, o.Task))
			}}))
		c := h.Root()
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) { _, _ = c.Drive(ctx) })
		must(0, s.Runtime().Sleep(ctx, time.Duration(500+s.Rand().IntN(5000))*time.Millisecond))
		if gen == 0 {
			t.Fatal("nothing streamed before the restart")
		}
		simtest.CloseCrashed(ctx, h)

		again := must(agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), CheckInvariants: true}))
		got, ok := must2(again.Preview(ctx, gen))
		if !ok {
			t.Fatalf("generation %d has no preview after reopen", gen)
		}
		if diff := cmp.Diff(live, got); diff != "" {
			t.Fatalf("preview after reopen (-live +reopened):\n%s", diff)
		}
		var m ai.Message
		raw := must(json.Marshal(got))
		must(0, json.Unmarshal(raw, &m))
		if m.Role != ai.RoleAssistant || m.StopReason != ai.StopPending || !strings.HasPrefix(m.Content.TextOf(), "slow") {
			t.Fatalf("reopened preview = %s; want the partial assistant message", raw)
		}
		must(0, again.Close(ctx))
	})
}
