package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// parked is a kind whose tasks nobody drives in these tests.
var parked = KindFuncs{Statuses: Statuses{Name: "parked", Initial: "planned", Roles: map[string]storage.TaskRole{
	"planned": storage.RoleStart, "done": storage.RoleTerminal,
}}}

func openChecked(t *testing.T) (*Harness, context.Context) {
	t.Helper()
	ctx := context.Background()
	h, err := Open(ctx, memory.New(), Options{TaskKinds: []TaskKind{parked}, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, ctx
}

// panicOf runs fn and returns what it panicked with ("" for nothing).
func panicOf(fn func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	fn()
	return ""
}

func TestTheInvariantCheckerFiresOnACorruptedIndex(t *testing.T) {
	corruptions := []struct {
		invariant string
		corrupt   func(d *driver, conv, task storage.ID)
	}{
		{"foreground", func(d *driver, conv, _ storage.ID) { d.fg[conv]++ }},
		{"foreground", func(d *driver, _, _ storage.ID) { d.fgTotal-- }},
		{"by-conversation", func(d *driver, conv, task storage.ID) { delete(d.byConv[conv], task) }},
		{"live", func(d *driver, _, task storage.ID) { d.taskConv[task] = 999 }},
		{"pins", func(d *driver, conv, _ storage.ID) { d.pins[conv]++ }},
		{"links", func(d *driver, _, _ storage.ID) { d.ownedPinned[12345] = 1 }},
		{"dependents", func(d *driver, _, _ storage.ID) { d.dependents[4242] = []storage.ID{1} }},
		{"live-records", func(d *driver, _, task storage.ID) {
			t := *d.live[task].task
			t.State = json.RawMessage(`{"forged":true}`)
			d.live[task].task = &t
		}},
		{"existing", func(d *driver, _, _ storage.ID) { d.existing[4242] = true }},
		{"task-waiters", func(d *driver, _, _ storage.ID) {
			d.tasksW[4242] = []*waiter{{target: 4242, ev: d.h.rt.NewEvent("stray")}}
		}},
		{"previews", func(d *driver, _, _ storage.ID) { d.h.previews = map[storage.ID]*taskPreview{4242: {}} }},
		{"previews", func(d *driver, _, _ storage.ID) { d.h.published = map[storage.ID]bool{4242: true} }},
	}
	for _, tc := range corruptions {
		t.Run(tc.invariant, func(t *testing.T) {
			h, ctx := openChecked(t)
			c := h.Root()
			var task storage.ID
			if _, err := c.Commit(ctx, func(tx *ConversationTx) error { task = tx.Task(parked, TaskSpec{}); return nil }); err != nil {
				t.Fatal(err)
			}
			if err := h.d.checkIndexes(); err != nil {
				t.Fatalf("a healthy driver fails its check: %v", err)
			}
			tc.corrupt(h.d, c.ID, task)
			msg := panicOf(func() {
				_, _ = c.Commit(ctx, func(tx *ConversationTx) error {
					tx.SetValue(storage.SessionValue[int]("tick").Address, 1)
					return nil
				})
			})
			if !strings.Contains(msg, `driver invariant "`+tc.invariant+`" broken`) {
				t.Fatalf("the commit after the corruption panicked with %q; want the %s invariant named", msg, tc.invariant)
			}
		})
	}
}

// A drive waiter whose scope is idle must have been resolved: a commit's
// own waiter pass resolves a stray one first, so the check runs alone here.
func TestTheInvariantCheckerFiresOnAnUnresolvedIdleWaiter(t *testing.T) {
	h, _ := openChecked(t)
	h.d.waiters = append(h.d.waiters, &waiter{conv: h.root + 100, ev: h.rt.NewEvent("stray")})
	if err := h.d.checkIndexes(); err == nil || !strings.Contains(err.Error(), `driver invariant "waiters" broken`) {
		t.Fatalf("check = %v; want the waiters invariant named", err)
	}
}

func TestTheCheckerIsOffUnlessAsked(t *testing.T) {
	ctx := context.Background()
	h, err := Open(ctx, memory.New(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	h.d.fgTotal = 7
	if _, err := h.Commit(ctx, func(tx *Tx) error { tx.SetValue(storage.SessionValue[int]("tick").Address, 1); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestThePhaseMovesOnlyAlongTheLifecycle(t *testing.T) {
	legal := [][2]phase{
		{phaseOpen, phaseStopping}, {phaseOpen, phaseClosing}, {phaseOpen, phaseFaulted},
		{phaseStopping, phaseStopping}, {phaseStopping, phaseClosing}, {phaseStopping, phaseFaulted},
		{phaseClosing, phaseClosed}, {phaseClosing, phaseFaulted},
	}
	all := []phase{phaseOpen, phaseStopping, phaseClosing, phaseFaulted, phaseClosed}
	for _, from := range all {
		for _, to := range all {
			d := &driver{phase: from}
			msg := panicOf(func() { d.setPhase(to) })
			isLegal := false
			for _, m := range legal {
				isLegal = isLegal || m == [2]phase{from, to}
			}
			switch {
			case isLegal && (msg != "" || d.phase != to):
				t.Errorf("%s → %s: panicked %q, phase %s; want the move", from, to, msg, d.phase)
			case !isLegal && !strings.Contains(msg, "cannot move from "+from.String()+" to "+to.String()):
				t.Errorf("%s → %s: panicked %q; want the illegal move named", from, to, msg)
			}
		}
	}
}

func TestDeleteConversationDropsTheCachedContextOnlyWhenItCommits(t *testing.T) {
	h, ctx := openChecked(t)
	var busy, idle storage.ID
	if _, err := h.Commit(ctx, func(tx *Tx) error {
		busy, idle = tx.CreateConversation(ConversationSpec{}), tx.CreateConversation(ConversationSpec{})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Commit(ctx, func(tx *Tx) error {
		tx.Task(parked, TaskSpec{ConversationID: busy})
		for _, c := range []storage.ID{busy, idle} {
			if _, err := tx.DerivedContext(c); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteConversation(ctx, busy); err == nil {
		t.Fatal("a conversation with a live task was deleted")
	}
	if h.contexts[busy] == nil {
		t.Fatal("a rejected delete dropped the conversation's cached context")
	}
	if err := h.DeleteConversation(ctx, idle); err != nil {
		t.Fatal(err)
	}
	if h.contexts[idle] != nil {
		t.Fatal("a deleted conversation's cached context is still held")
	}
}
