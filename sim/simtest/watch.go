package simtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// Watched is a started conversation watch that records what it delivered.
type Watched struct {
	W      *core.WatchHandle
	Base   []byte // the initial view, as a thin client receives it
	Events []core.ConversationEvent
}

// Watcher opens conversation watches: a harness, the kernel's or the agent's.
type Watcher interface {
	Watch(ctx context.Context, conv storage.ID, opts core.WatchOptions) (*core.WatchHandle, error)
}

// StartWatch watches conv with a tail of 1000 entries and records every
// event; onEvent, when set, runs inside the listener after the recording.
func StartWatch(t testing.TB, ctx context.Context, h Watcher, conv storage.ID, onEvent func(*Watched, core.ConversationEvent)) *Watched {
	t.Helper()
	w := Must(h.Watch(ctx, conv, core.WatchOptions{Tail: 1000}))
	r := &Watched{W: w, Base: Must(json.Marshal(w.View()))}
	w.Start(ctx, func(e core.ConversationEvent) {
		r.Events = append(r.Events, e)
		if onEvent != nil {
			onEvent(r, e)
		}
	})
	return r
}

// caughtUpYieldsMax bounds how long CaughtUp yields to the watch's actor.
const caughtUpYieldsMax = 10_000

// CaughtUp yields until the watch has delivered every commit through last.
func CaughtUp(ctx context.Context, s *sim.Sim, r *Watched, last storage.ID) {
	for i := 0; i < caughtUpYieldsMax && r.W.View().ReadAt < last; i++ {
		Must(0, s.Runtime().Sleep(ctx, 0))
	}
}

// ViewsEqual fails t unless two views are equal as a client sees them.
func ViewsEqual(t testing.TB, what string, want, got *core.ConversationView) {
	t.Helper()
	if diff := ViewDiff(want, got); diff != "" {
		t.Fatalf("%s (-capture +folded):\n%s", what, diff)
	}
}

// ViewDiff compares two views as a client sees them: their JSON, without
// readAt (commits that change nothing in a view raise only the capture's).
func ViewDiff(want, got *core.ConversationView) string {
	norm := func(v *core.ConversationView) map[string]any {
		var m map[string]any
		Must(0, json.Unmarshal(Must(json.Marshal(v)), &m))
		delete(m, "readAt")
		return m
	}
	return cmp.Diff(norm(want), norm(got), cmpopts.EquateEmpty())
}

// CountType counts the events of one type.
func CountType(es []core.ConversationEvent, typ string) int {
	n := 0
	for _, e := range es {
		if e.Type == typ {
			n++
		}
	}
	return n
}
