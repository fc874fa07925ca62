package boundary_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func must[T any](v T, err error) T { return simtest.Must(v, err) }

type session struct {
	h    *agent.Harness
	faux *faux.Provider
}

func openSession(t testing.TB, ctx context.Context, s *sim.Sim) *session {
	p := must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
	h := must(agent.Open(ctx, memory.New(), agent.Options{Runtime: s.Runtime(), CheckInvariants: true,
		Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})}))
	return &session{h: h, faux: p}
}

func (x *session) apply(t testing.TB, ctx context.Context, kind boundary.Kind, source, id string) boundary.Transition {
	t.Helper()
	return must(boundary.Apply(ctx, x.h.Harness, boundary.Boundary{Kind: kind, Provider: boundary.Claude, SessionID: id, Source: source}))
}

// A clear is one commit: the old conversation stopped with its reason and
// its foreground work marked, a new independent conversation whose first
// entry is the provider_boundary entry, made current, and the provider
// session bound to it. The old conversation and its entries stay. A
// repeated delivery commits nothing and returns the same binding.
func TestAClearStartsANewConversationInOneCommit(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		x := openSession(t, ctx, s)
		root := x.h.Root()
		if tr := x.apply(t, ctx, boundary.Startup, "startup", P); !tr.Changed || tr.Binding.Conversation != root.ID {
			t.Fatalf("startup = %+v; want the root bound", tr)
		}
		x.faux.SetResponses(faux.Reply(faux.Text("first answer")), faux.Reply(faux.Text("slow answer")).WithDelay(time.Hour))
		must(root.Prompt(ctx, ai.PlainText("hello"), agent.AcceptOptions{}))
		busy := must(root.Accept(ctx, ai.PlainText("a long one"), agent.AcceptOptions{}))
		done := simtest.DriveInActor(ctx, s, root, nil)
		must(0, s.Runtime().Sleep(ctx, time.Second))

		before := x.h.Store().LastSeq()
		tr := x.apply(t, ctx, boundary.Clear, "clear", N)
		next := tr.Binding.Conversation
		switch {
		case !tr.Changed || next == root.ID || tr.Binding.Previous != root.ID || tr.Binding.Entry == 0:
			t.Fatalf("clear = %+v; want a new conversation bound, leaving the root", tr)
		case must(boundary.Current(ctx, x.h.Harness)) != next:
			t.Fatal("the new conversation is not current")
		}
		convs := must(x.h.Store().GetConversations(ctx, []storage.ID{next}))
		if c := convs[next]; c.Parent != nil || c.Owner != 0 {
			t.Fatalf("the new conversation %+v is not independent", c)
		}
		page := must(x.h.Entries(ctx, next, storage.Cursor{Limit: 10}))
		if len(page.Items) != 1 || page.Items[0].Kind != "provider_boundary" || len(page.Items[0].Model) != 0 {
			t.Fatalf("the new conversation's entries = %+v; want one data-only provider_boundary entry", page.Items)
		}
		var data boundary.BoundaryData
		must(0, json.Unmarshal(page.Items[0].Data, &data))
		if data != (boundary.BoundaryData{Schema: 1, Provider: boundary.Claude, Source: "clear", Previous: root.ID, SessionID: N}) {
			t.Fatalf("boundary data = %+v", data)
		}
		var stopped boundary.Stopped
		v, ok := must2(x.h.Store().GetValue(ctx, boundary.StoppedValue.In(root.ID).Address, 0))
		if !ok || json.Unmarshal(v.Value, &stopped) != nil || stopped.Reason != boundary.ReasonProviderClear || stopped.Successor != next {
			t.Fatalf("the root's stop mark = %s (found %v)", v.Value, ok)
		}
		if v.Seq <= before {
			t.Fatal("the stop mark predates the clear")
		}
		done.Wait(ctx)
		if r, _ := must2(root.Result(ctx, busy)); r.Status != agent.InputCancelled {
			t.Fatalf("the root's running input = %+v; want cancelled by the clear's abort mark", r)
		}
		if n := len(must(x.h.Entries(ctx, root.ID, storage.Cursor{Limit: 100})).Items); n < 3 {
			t.Fatalf("the root keeps %d entries; nothing is deleted", n)
		}

		last := x.h.Store().LastSeq()
		again := x.apply(t, ctx, boundary.Clear, "clear", N)
		if again.Changed || again.Binding != tr.Binding || x.h.Store().LastSeq() != last {
			t.Fatalf("a repeated clear = %+v, lastSeq %d → %d; want the same binding and nothing written", again, last, x.h.Store().LastSeq())
		}
		must(0, x.h.Close(ctx))
	})
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// Two deliveries of the same clear racing (the provider's retry, two hook
// handlers) make one boundary: both see the same binding, and there is
// one new conversation.
func TestRacingDeliveriesOfOneClearMakeOneBoundary(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		x := openSession(t, ctx, s)
		x.apply(t, ctx, boundary.Startup, "startup", P)
		var a, b boundary.Transition
		ea := simtest.DriveInActor(ctx, s, applier{x, &a}, nil)
		eb := simtest.DriveInActor(ctx, s, applier{x, &b}, nil)
		ea.Wait(ctx)
		eb.Wait(ctx)
		convs := must(storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			return x.h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
		}))
		if a.Binding != b.Binding || a.Changed == b.Changed || len(convs) != 2 {
			t.Fatalf("deliveries %+v and %+v, %d conversations; want one boundary both report", a, b, len(convs))
		}
		must(0, x.h.Close(ctx))
	})
}

// applier applies the clear N as a simtest.Driver, so that it runs in an
// actor of its own.
type applier struct {
	x   *session
	out *boundary.Transition
}

func (a applier) Drive(ctx context.Context) (core.DriveResult, error) {
	tr, err := boundary.Apply(ctx, a.x.h.Harness, boundary.Boundary{Kind: boundary.Clear, Provider: boundary.Claude, SessionID: N, Source: "clear"})
	*a.out = tr
	return core.Idle, err
}

// Resume rebinds the current conversation; compact and ui-only change
// nothing; fork makes a fork of the current conversation, bound and
// current; a boundary without a session or of no known kind is a typed
// error that writes nothing.
func TestResumeCompactForkAndBadBoundaries(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		x := openSession(t, ctx, s)
		root := x.h.Root()
		x.apply(t, ctx, boundary.Startup, "startup", P)
		x.faux.SetResponses(faux.Reply(faux.Text("answer")))
		must(root.Prompt(ctx, ai.PlainText("hello"), agent.AcceptOptions{}))
		if tr := x.apply(t, ctx, boundary.Resume, "resume", N); !tr.Changed || tr.Binding.Conversation != root.ID {
			t.Fatalf("resume = %+v; want the root rebound", tr)
		}
		last := x.h.Store().LastSeq()
		for _, k := range []boundary.Kind{boundary.Compact, boundary.UIOnly, boundary.None} {
			if tr := x.apply(t, ctx, k, string(k), N); tr.Changed || x.h.Store().LastSeq() != last {
				t.Fatalf("%s changed something: %+v", k, tr)
			}
		}
		fork := x.apply(t, ctx, boundary.Fork, "fork", N2)
		convs := must(x.h.Store().GetConversations(ctx, []storage.ID{fork.Binding.Conversation}))
		if c := convs[fork.Binding.Conversation]; !fork.Changed || c.Parent == nil || c.Parent.ConversationID != root.ID || must(boundary.Current(ctx, x.h.Harness)) != c.ID {
			t.Fatalf("fork = %+v (%+v); want a current fork of the root", fork, c)
		}
		last = x.h.Store().LastSeq()
		for _, b := range []boundary.Boundary{{Kind: boundary.Clear, Provider: boundary.Claude}, {Kind: "explode", Provider: boundary.Claude, SessionID: "x"}} {
			_, err := boundary.Apply(ctx, x.h.Harness, b)
			var pe *boundary.PayloadError
			if !errors.As(err, &pe) || x.h.Store().LastSeq() != last {
				t.Fatalf("Apply(%+v) = %v; want a PayloadError and nothing written", b, err)
			}
		}
		must(0, x.h.Close(ctx))
	})
}

// A boundary that would start from a current conversation the host deleted
// is a typed error naming it and writes nothing, whatever its kind; a
// repeat of a binding made before still returns it; once the host makes
// another conversation current, a clear starts from that one.
func TestABoundaryFromADeletedCurrentConversationIsRefused(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		x := openSession(t, ctx, s)
		root := x.h.Root()
		first := x.apply(t, ctx, boundary.Startup, "startup", P)
		fork := x.apply(t, ctx, boundary.Fork, "fork", N2).Binding.Conversation
		must(0, x.h.DeleteConversation(ctx, fork))
		last := x.h.Store().LastSeq()
		for _, k := range []boundary.Kind{boundary.Startup, boundary.Resume, boundary.Clear, boundary.Fork} {
			_, err := boundary.Apply(ctx, x.h.Harness, boundary.Boundary{Kind: k, Provider: boundary.Claude, SessionID: N, Source: string(k)})
			var gone *boundary.CurrentGoneError
			if !errors.As(err, &gone) || gone.Conversation != fork || !errors.Is(err, core.ErrNotFound) || x.h.Store().LastSeq() != last {
				t.Fatalf("%s from the deleted conversation %d = %v, last sequence %d → %d; want a CurrentGoneError naming it and nothing written", k, fork, err, last, x.h.Store().LastSeq())
			}
		}
		if again := x.apply(t, ctx, boundary.Startup, "startup", P); again.Changed || again.Binding != first.Binding {
			t.Fatalf("a repeated startup = %+v; want its binding %+v unchanged", again, first.Binding)
		}
		_ = must(x.h.Commit(ctx, func(tx *core.Tx) error {
			core.TxValue(tx, boundary.CurrentValue).Set(root.ID)
			return nil
		}))
		if tr := x.apply(t, ctx, boundary.Clear, "clear", N); !tr.Changed || tr.Binding.Previous != root.ID {
			t.Fatalf("a clear once the root is current again = %+v; want it to leave the root", tr)
		}
		must(0, x.h.Close(ctx))
	})
}
