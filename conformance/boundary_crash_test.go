package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// A provider clear after a turn, cut at every commit (DESIGN §11): the
// restarted session holds either the old state (no binding of the new
// provider session, no new conversation, the root current and not
// stopped) or the whole new one (the binding, one new conversation whose
// only first entry is the provider_boundary entry, current, and the root
// stopped naming it), never a part.
var boundaryCrashes = crashScenario{
	test:       "TestCrashPointsOfAProviderClear",
	first:      crashProviderClear,
	transcript: []string{"user:hello", "system:", "assistant:hi"},
	results:    []agent.InputStatus{agent.InputDone},
	after:      crashBoundaryWhole,
}

func TestCrashPointsOfAProviderClear(t *testing.T) { exploreCrashPoints(t, boundaryCrashes) }

func crashProviderClear(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord) {
	r.first.Storage = store
	a, err := openCrashAgent(ctx, s, &r.first, nil)
	if errors.Is(err, fault.ErrCrashed) {
		return
	}
	crashMust(0, err)
	c := a.h.Root()
	a.faux.SetResponses(faux.Reply(faux.Text("hi")))
	apply := func(kind boundary.Kind, id string) bool {
		_, err := boundary.Apply(ctx, a.h.Harness, boundary.Boundary{Kind: kind, Provider: boundary.Claude, SessionID: id, Source: string(kind)})
		if err != nil && !errors.Is(err, fault.ErrCrashed) {
			r.problems = append(r.problems, fmt.Sprintf("the first process's %s failed without a crash: %v", kind, err))
		}
		return err == nil
	}
	if apply(boundary.Startup, "thread-1") {
		id, err := c.Accept(ctx, ai.PlainText("hello"), agent.AcceptOptions{})
		if err == nil {
			r.inputs = append(r.inputs, id)
			if _, err := c.Drive(ctx); err == nil {
				apply(boundary.Clear, "thread-2")
			}
		}
	}
	r.end(ctx, a, c)
}

// crashBoundaryWhole holds the restarted session to all-or-nothing, then
// redelivers the clear: afterwards the boundary exists exactly once.
func crashBoundaryWhole(ctx context.Context, h *agent.Harness) []string {
	if problems := crashBoundaryState(ctx, h); len(problems) > 0 {
		return problems
	}
	tr, err := boundary.Apply(ctx, h.Harness, boundary.Boundary{Kind: boundary.Clear, Provider: boundary.Claude, SessionID: "thread-2", Source: "clear"})
	if err != nil {
		return []string{fmt.Sprintf("the redelivered clear: %v", err)}
	}
	entries := 0
	for _, c := range crashMust(storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Conversation], error) {
		return h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: cur})
	})) {
		entries += len(crashMust(h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: boundary.EntryKind.Kind()})).Items)
	}
	if entries != 1 || crashMust(boundary.Current(ctx, h.Harness)) != tr.Binding.Conversation {
		return []string{fmt.Sprintf("after the redelivery %d provider_boundary entries, binding %+v; want exactly one boundary, current", entries, tr.Binding)}
	}
	return crashBoundaryState(ctx, h)
}

// crashBoundaryState is the all-or-nothing check.
func crashBoundaryState(ctx context.Context, h *agent.Harness) []string {
	store := h.Store()
	bound, _ := crashMust2(store.GetValue(ctx, boundary.BindingValue.WithKey("claude/thread-2").Address, 0))
	current := crashMust(boundary.Current(ctx, h.Harness))
	_, stopped := crashMust2(store.GetValue(ctx, boundary.StoppedValue.In(h.Root().ID).Address, 0))
	convs := crashMust(storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	}))
	if bound.Seq == 0 {
		if len(convs) != 1 || current != h.Root().ID || stopped {
			return []string{fmt.Sprintf("no binding of the new provider session, yet %d conversations, current %d, root stopped %v", len(convs), current, stopped)}
		}
		return nil
	}
	var b boundary.Binding
	crashMust(0, json.Unmarshal(bound.Value, &b))
	page := crashMust(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 1}, ConversationID: b.Conversation}))
	switch {
	case len(convs) != 2 || current != b.Conversation || !stopped:
		return []string{fmt.Sprintf("the binding %+v, yet %d conversations, current %d, root stopped %v", b, len(convs), current, stopped)}
	case len(page.Items) != 1 || page.Items[0].ID != b.Entry || page.Items[0].Kind != boundary.EntryKind.Kind():
		return []string{fmt.Sprintf("the new conversation %d does not start with its provider_boundary entry %d", b.Conversation, b.Entry)}
	}
	return nil
}

func crashMust2[A, B any](a A, b B, err error) (A, B) {
	crashMust(0, err)
	return a, b
}
