package core

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// DriverInvariantError names a driver index that no longer agrees with the
// others or with the live set. It is a broken invariant of the harness, so
// the check panics with it (Options.CheckInvariants).
type DriverInvariantError struct {
	Invariant string
	Detail    string
}

func (e *DriverInvariantError) Error() string {
	return fmt.Sprintf("core: driver invariant %q broken: %s", e.Invariant, e.Detail)
}

// checkIndexes recomputes what the driver's indexes must hold from the live
// set and the attachments, and compares: the live set itself, tasks by
// conversation, foreground counts, reverse dependencies, ownership pins and
// their links, attachments, drive and task waiters, and running slots. It
// runs on the line, after a commit has been applied and the waiters checked.
func (d *driver) checkIndexes() error {
	broken := func(name, format string, args ...any) error {
		return &DriverInvariantError{Invariant: name, Detail: fmt.Sprintf(format, args...)}
	}
	if d.phase == phaseFaulted && d.fault == nil {
		return broken("fault", "the session is faulted without a fault")
	}
	fg, fgTotal := map[storage.ID]int{}, 0
	for _, id := range d.liveIDs() {
		t := d.live[id].task
		switch {
		case t.ID != id:
			return broken("live", "live[%d] holds task %d", id, t.ID)
		case t.Role == storage.RoleTerminal:
			return broken("live", "task %d is %s (terminal) but live", id, t.Status)
		case d.taskConv[id] != t.ConversationID:
			return broken("live", "task %d is in conversation %d, its link says %d", id, t.ConversationID, d.taskConv[id])
		}
		if _, ok := d.byConv[t.ConversationID][id]; !ok {
			return broken("by-conversation", "live task %d is missing from conversation %d's set", id, t.ConversationID)
		}
		if !t.Background {
			fg[t.ConversationID]++
			fgTotal++
		}
		for _, dep := range t.After {
			if _, live := d.live[dep]; live && !slices.Contains(d.dependents[dep], id) {
				return broken("dependents", "task %d waits for live task %d but is not among its dependents", id, dep)
			}
		}
	}
	for _, c := range sortedIDs(d.byConv) {
		set := d.byConv[c]
		if len(set) == 0 {
			return broken("by-conversation", "conversation %d has an empty set", c)
		}
		for _, id := range sortedIDs(set) {
			if lt, ok := d.live[id]; !ok || lt.task.ConversationID != c {
				return broken("by-conversation", "conversation %d's set holds task %d, which is not live there", c, id)
			}
		}
	}
	if fgTotal != d.fgTotal {
		return broken("foreground", "%d live foreground tasks, the total says %d", fgTotal, d.fgTotal)
	}
	for _, c := range sortedIDs(d.fg) {
		if n := d.fg[c]; fg[c] != n {
			return broken("foreground", "conversation %d has %d live foreground tasks, its count says %d", c, fg[c], n)
		}
	}
	for _, c := range sortedIDs(fg) {
		if n := fg[c]; d.fg[c] != n {
			return broken("foreground", "conversation %d has %d live foreground tasks, its count says %d", c, n, d.fg[c])
		}
	}
	for _, dep := range sortedIDs(d.dependents) {
		if _, live := d.live[dep]; !live {
			return broken("dependents", "task %d has a dependents list but is not live", dep)
		}
	}
	if err := d.checkPins(broken); err != nil {
		return err
	}
	if err := d.checkLiveRecords(broken); err != nil {
		return err
	}
	if err := d.checkExisting(broken); err != nil {
		return err
	}
	return d.checkWaitersIndex(broken)
}

// checkLiveRecords compares the driver's record of every live task with
// the store's: Tx.current answers from the record, so it must be what a
// read of committed state returns. A read that fails proves nothing and is
// skipped.
func (d *driver) checkLiveRecords(broken func(name, format string, args ...any) error) error {
	ids := d.liveIDs()
	if len(ids) == 0 {
		return nil
	}
	stored, err := d.h.Store().GetTasks(context.Background(), ids)
	if err != nil {
		return nil
	}
	for _, id := range ids {
		t, s := d.live[id].task, stored[id]
		switch {
		case s == nil:
			return broken("live-records", "live task %d is not in storage", id)
		case t.Kind != s.Kind || t.ConversationID != s.ConversationID || t.Status != s.Status || t.Role != s.Role ||
			t.Background != s.Background || t.Abort != s.Abort || !slices.Equal(t.After, s.After) || !slices.Equal(t.Owns, s.Owns) ||
			!bytes.Equal(t.State, s.State):
			return broken("live-records", "live task %d is %s; storage has %s", id, describeTask(t), describeTask(s))
		}
	}
	return nil
}

// checkPins holds the ownership pins to their definition: every live task
// pins the chain from its conversation to its ownership root, and so does
// every attachment; a pinned conversation's link is known, and an owner's
// count of pinned conversations matches.
func (d *driver) checkPins(broken func(name, format string, args ...any) error) error {
	want := map[storage.ID]int{}
	pin := func(c storage.ID) {
		for _, x := range d.ownerChain(c) {
			want[x]++
		}
	}
	for _, id := range d.liveIDs() {
		pin(d.live[id].task.ConversationID)
	}
	for _, c := range sortedIDs(d.attached) {
		if d.attached[c] {
			pin(c)
		}
	}
	for _, x := range sortedIDs(want) {
		if n := want[x]; d.pins[x] != n {
			return broken("pins", "conversation %d is needed %d times, pinned %d", x, n, d.pins[x])
		}
	}
	owned := map[storage.ID]int{}
	for _, x := range sortedIDs(d.pins) {
		if n := d.pins[x]; want[x] != n {
			return broken("pins", "conversation %d is pinned %d times, needed %d", x, n, want[x])
		}
		owner, known := d.convOwner[x]
		if !known {
			return broken("links", "pinned conversation %d has no known owner link", x)
		}
		if owner == 0 {
			continue
		}
		if _, ok := d.taskConv[owner]; !ok {
			return broken("links", "pinned conversation %d's owner task %d has no known conversation", x, owner)
		}
		owned[owner]++
	}
	for _, o := range sortedIDs(d.ownedPinned) {
		if n := d.ownedPinned[o]; owned[o] != n {
			return broken("links", "task %d owns %d pinned conversations, its count says %d", o, owned[o], n)
		}
	}
	for _, o := range sortedIDs(owned) {
		if n := owned[o]; d.ownedPinned[o] != n {
			return broken("links", "task %d owns %d pinned conversations, its count says %d", o, n, d.ownedPinned[o])
		}
	}
	return nil
}

// checkWaitersIndex holds the waiters to the rule checkWaiters enforces:
// a drive waiter still waiting is unresolved and its scope is not idle; a
// task waiter waits for a live task; a running slot belongs to its task.
func (d *driver) checkWaitersIndex(broken func(name, format string, args ...any) error) error {
	for _, w := range d.waiters {
		switch {
		case w.done:
			return broken("waiters", "a resolved drive waiter of conversation %d is still listed", w.conv)
		case d.idle(w):
			return broken("waiters", "a drive waiter of conversation %d waits although its scope is idle", w.conv)
		}
	}
	for _, target := range sortedIDs(d.tasksW) {
		ws := d.tasksW[target]
		if _, live := d.live[target]; !live {
			return broken("task-waiters", "waiters wait for task %d, which is not live", target)
		}
		for _, w := range ws {
			if w.done || w.target != target {
				return broken("task-waiters", "task %d's waiter is resolved or waits for task %d", target, w.target)
			}
		}
	}
	for _, id := range d.runningIDs() {
		inv := d.running[id]
		if inv.task != id {
			return broken("running", "slot %d holds an invocation of task %d", id, inv.task)
		}
	}
	// A task's preview, and the mark that it was published, go with it
	// when it settles.
	for _, id := range sortedIDs(d.h.previews) {
		if _, live := d.live[id]; !live {
			return broken("previews", "task %d holds a preview but is not live", id)
		}
	}
	for _, id := range sortedIDs(d.h.published) {
		if _, live := d.live[id]; !live {
			return broken("previews", "task %d is marked published but is not live", id)
		}
	}
	return nil
}

// checkExisting checks that every conversation the driver knows to exist
// is in storage, not deleted. A read that fails proves nothing.
func (d *driver) checkExisting(broken func(name, format string, args ...any) error) error {
	ids := sortedIDs(d.existing)
	if len(ids) == 0 {
		return nil
	}
	stored, err := d.h.Store().GetConversations(context.Background(), ids)
	if err != nil {
		return nil
	}
	for _, id := range ids {
		if _, ok := stored[id]; !ok {
			return broken("existing", "conversation %d is known to exist but storage has none", id)
		}
	}
	return nil
}

// describeTask is a task record in one line, its state as JSON.
func describeTask(t *storage.Task) string {
	return fmt.Sprintf("%s %s (%s) of conversation %d, state %s, after %v, owns %v, background %t, abort %t",
		t.Kind, t.Status, t.Role, t.ConversationID, t.State, t.After, t.Owns, t.Background, t.Abort)
}

// RethrowInvariant panics again with p when it is a broken invariant of
// the harness (a *DriverInvariantError, which assertIndexes panics with,
// or a *jsonvalue.FastPathError, which a codec checked under SetCheckJSON
// panics with) and returns otherwise. Every recover that turns a panic of user code
// into an error (an invocation, a hook, a watch listener, a tool) calls it
// first: the check runs in whichever actor committed, so without it a
// recover around code that commits would make the harness's bug a failed
// task or tool, and drop the actions of the commit it broke in.
func RethrowInvariant(p any) {
	switch p.(type) {
	case *DriverInvariantError, *jsonvalue.FastPathError:
		panic(p)
	}
}

// assertIndexes panics with the *DriverInvariantError when
// Options.CheckInvariants is set and an index is broken (RethrowInvariant).
func (d *driver) assertIndexes() {
	if !d.h.opts.CheckInvariants {
		return
	}
	if err := d.checkIndexes(); err != nil {
		panic(err)
	}
}
