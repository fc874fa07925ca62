package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync/atomic"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Method names a task kind method the driver invokes.
type Method string

const (
	MethodExecute Method = "execute"
	MethodRecover Method = "recover"
	MethodAbort   Method = "abort"
)

// phase is the session's lifecycle (§6.1). It changes only through
// setPhase.
type phase uint8

const (
	phaseOpen phase = iota
	phaseStopping
	phaseClosing
	phaseFaulted
	phaseClosed
)

var phaseNames = [...]string{phaseOpen: "open", phaseStopping: "stopping", phaseClosing: "closing", phaseFaulted: "faulted", phaseClosed: "closed"}

func (p phase) String() string { return phaseNames[p] }

// phaseMoves are the legal lifecycle moves: shutdown's marks stop an open
// session (a second shutdown finds it stopping), close starts closing, the
// closer ends it closed once storage is closed, and a fault can stop any
// session that is not over. A faulted session stays faulted.
var phaseMoves = map[phase][]phase{
	phaseOpen:     {phaseStopping, phaseClosing, phaseFaulted},
	phaseStopping: {phaseStopping, phaseClosing, phaseFaulted},
	phaseClosing:  {phaseClosed, phaseFaulted},
}

// setPhase is the one place the phase changes; an illegal move is a broken
// invariant of the driver, not an operating error.
func (d *driver) setPhase(next phase) {
	if !slices.Contains(phaseMoves[d.phase], next) {
		panic(fmt.Sprintf("core: driver phase cannot move from %s to %s", d.phase, next))
	}
	d.phase = next
}

// ownershipLinksMax bounds a walk up the ownership tree.
const ownershipLinksMax = 10_000

// invocation is one call of a task kind method. Its identity travels in the
// ctx the method receives; the line compares it with running[task] to decide
// whether a write still has authority.
type invocation struct {
	task   storage.ID
	conv   storage.ID
	kind   TaskKind
	method Method
	epoch  int // the task's status epoch when the invocation was reserved
	ctx    context.Context
	cancel context.CancelFunc
	// admitted is ctx as a commit admits it (admittedContext), made once
	// for the commits the method makes with ctx itself.
	admitted context.Context
	span     trace.Span
	home     home // its task's home when it was reserved; what it creates inherits it
	snap     *storage.Task

	progress []*Progress // bridges the method opened; drained before completion
	// returned is set once the method returned: its runtime is stale.
	returned atomic.Bool
	// name names its actor; held are the invocations it holds back until
	// it has completed (handon.go). Only its own goroutine touches held.
	name string
	held []*invocation
	// origin is the context, outside every invocation, that began the
	// chain of invocations that made this one runnable: a host's commit or
	// drive, or the session's open. Its ctx derives from origin, not from
	// the invocation that made it runnable, so that a long chain of tasks
	// neither deepens every context lookup nor keeps its predecessors'
	// contexts alive.
	origin context.Context
	// preview is the task's preview (nil for a kind without one).
	preview *taskPreview
	// holds is how the line names this invocation while one of its calls
	// holds it (Line.hold), made once instead of at every call.
	holds lineHolder
}

type invocationKey struct{}

func invocationOf(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

type liveTask struct {
	task  *storage.Task
	epoch int  // committed status transitions since the task was seeded
	home  home // where its invocation spans go (telemetry.go)
}

// waiter is a temporary drive or task waiter. Resolving or cancelling it
// removes it; the attachment a drive made stays.
type waiter struct {
	session bool
	conv    storage.ID // drive waiter scope when !session
	target  storage.ID // task waiter target
	by      storage.ID // the waiting task, when a task waits
	ev      Event
	result  DriveResult
	err     error
	done    bool
}

// DriveResult is how a drive ended.
type DriveResult string

const (
	Idle   DriveResult = "idle"
	Closed DriveResult = "closed"
)

// driver holds the process state of §6.1. Every field is read and written
// only on the line; what the driver decides to do (start an invocation,
// signal one, wake a waiter) is collected as actions that run after the
// line is released.
type driver struct {
	h     *Harness
	phase phase
	fault *FaultError

	live       map[storage.ID]*liveTask
	running    map[storage.ID]*invocation
	byConv     map[storage.ID]map[storage.ID]struct{}
	fg         map[storage.ID]int // conversation → live foreground tasks
	fgTotal    int
	dependents map[storage.ID][]storage.ID // live dependency → live tasks after it

	// Immutable ownership links, loaded on demand for live work only and
	// released when nothing pins them: a conversation is pinned by every live
	// task in it or below it in the ownership tree, and by an attachment.
	convOwner   map[storage.ID]storage.ID // conversation → owner task (0: none)
	taskConv    map[storage.ID]storage.ID // task → its conversation
	pins        map[storage.ID]int
	ownedPinned map[storage.ID]int // owner task → its pinned conversations

	// existing are conversations known to exist: a commit created them or
	// a transaction's lookup found them; the commit deleting one forgets
	// it. Conversations are otherwise immutable, so an entry's check needs
	// no read of storage for them.
	existing map[storage.ID]bool

	session  bool
	attached map[storage.ID]bool
	waiters  []*waiter
	tasksW   map[storage.ID][]*waiter

	closeStarted bool
	closeErr     error // closing storage failed; read after closed is set
	drained      Event // set when closing/faulted and no invocation runs
	closed       Event
	stopIdle     Event // shutdown: no live task and no invocation left
	invocations  int
	tel          telemetry
	// handsOn is set when the runtime hands on (handon.go); held is the
	// collector lent to the decision running on the line, if any.
	handsOn bool
	held    *heldStarts
}

func newDriver(h *Harness) *driver {
	rt := h.rt
	d := &driver{
		h: h, live: map[storage.ID]*liveTask{}, running: map[storage.ID]*invocation{},
		byConv: map[storage.ID]map[storage.ID]struct{}{}, fg: map[storage.ID]int{},
		dependents: map[storage.ID][]storage.ID{}, convOwner: map[storage.ID]storage.ID{}, existing: map[storage.ID]bool{},
		taskConv: map[storage.ID]storage.ID{}, pins: map[storage.ID]int{}, ownedPinned: map[storage.ID]int{}, attached: map[storage.ID]bool{},
		tasksW:  map[storage.ID][]*waiter{},
		drained: rt.NewEvent("drained"), closed: rt.NewEvent("closed"), stopIdle: rt.NewEvent("shutdown-idle"),
	}
	_, d.handsOn = rt.(handingOn)
	return d
}

// actions collects what the line decided, to run after release.
type actions []func()

func (a actions) run() {
	for _, f := range a {
		f()
	}
}

func (a *actions) add(f func()) { *a = append(*a, f) }

// then is what runs the actions after the line: nil when there are none,
// which spares a commit that decided nothing a closure.
func (a actions) then() func() {
	if len(a) == 0 {
		return nil
	}
	return a.run
}

// --- seeding ---

// seed loads the complete live-task set once (one indexed scan) and the
// ownership links those tasks need; nothing historical is read.
func (d *driver) seed(ctx context.Context) error {
	store := d.h.line.Store()
	live, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: c, Live: storage.Bool(true)})
	})
	if err != nil {
		return err
	}
	for _, t := range live {
		if _, ok := d.h.kinds.Task(t.Kind); !ok {
			return &UnknownKindError{Task: t.ID, Kind: t.Kind}
		}
		d.addLive(t)
	}
	for id, lt := range d.live {
		for _, dep := range lt.task.After {
			if _, ok := d.live[dep]; ok {
				d.dependents[dep] = append(d.dependents[dep], id)
			}
		}
	}
	for _, deps := range d.dependents {
		slices.Sort(deps)
	}
	convs := make([]storage.ID, 0, len(d.byConv))
	for c := range d.byConv {
		convs = append(convs, c)
	}
	slices.Sort(convs)
	if err := d.loadLinks(ctx, convs); err != nil {
		return err
	}
	for _, lt := range d.live {
		d.pin(lt.task.ConversationID)
	}
	d.assertIndexes()
	return nil
}

func (d *driver) addLive(t *storage.Task) {
	d.live[t.ID] = &liveTask{task: t}
	d.taskConv[t.ID] = t.ConversationID
	set := d.byConv[t.ConversationID]
	if set == nil {
		set = map[storage.ID]struct{}{}
		d.byConv[t.ConversationID] = set
	}
	set[t.ID] = struct{}{}
	if !t.Background {
		d.fg[t.ConversationID]++
		d.fgTotal++
	}
}

// liveOfKind lists conv's live tasks of a kind, ascending.
func (d *driver) liveOfKind(conv storage.ID, kind string) []storage.ID {
	var ids []storage.ID
	for id := range d.byConv[conv] {
		if d.live[id].task.Kind == kind {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (d *driver) removeLive(id storage.ID) {
	lt := d.live[id]
	d.unpin(lt.task.ConversationID)
	delete(d.live, id)
	if d.ownedPinned[id] == 0 { // no pinned conversation below needs its link
		delete(d.taskConv, id)
	}
	c := lt.task.ConversationID
	delete(d.byConv[c], id)
	if len(d.byConv[c]) == 0 {
		delete(d.byConv, c)
	}
	if !lt.task.Background {
		if d.fg[c]--; d.fg[c] == 0 {
			delete(d.fg, c)
		}
		d.fgTotal--
	}
}

// loadLinks makes the ownership chains above the given conversations
// complete: it walks each chain through the links it knows and reads, in
// batches, the conversation and owner-task records it is missing, until
// every chain reaches an unowned conversation. A chain is complete only when
// every link on it is known; a link dropped since (its owner settled and
// nothing pinned it) is read again.
func (d *driver) loadLinks(ctx context.Context, convs []storage.ID) error {
	if !slices.ContainsFunc(convs, func(c storage.ID) bool { owner, known := d.convOwner[c]; return !known || owner != 0 }) {
		return nil // every one known to be owned by no task: nothing to load
	}
	store := d.h.line.Store()
	frontier := slices.Clone(convs)
	for range ownershipLinksMax {
		var needConvs, needTasks []storage.ID
		var next []storage.ID
		for _, c := range frontier {
			owner, known := d.convOwner[c]
			switch {
			case !known:
				needConvs = append(needConvs, c)
			case owner == 0:
			default:
				if up, ok := d.taskConv[owner]; ok {
					next = append(next, up)
				} else {
					needTasks = append(needTasks, owner)
				}
			}
		}
		if len(needConvs) > 0 {
			got, err := store.GetConversations(ctx, needConvs)
			if err != nil {
				return err
			}
			for _, c := range needConvs {
				rec := got[c] // a deleted conversation owns nothing we can serve
				d.convOwner[c] = rec.Owner
				if rec.Owner != 0 {
					if up, ok := d.taskConv[rec.Owner]; ok {
						next = append(next, up)
					} else {
						needTasks = append(needTasks, rec.Owner)
					}
				}
			}
		}
		if len(needTasks) > 0 {
			tasks, err := store.GetTasks(ctx, needTasks)
			if err != nil {
				return err
			}
			for _, o := range needTasks {
				if t, ok := tasks[o]; ok {
					d.taskConv[o] = t.ConversationID
					next = append(next, t.ConversationID)
				}
			}
		}
		if len(next) == 0 {
			return nil
		}
		slices.Sort(next)
		frontier = slices.Compact(next)
	}
	panic("core: ownership chain longer than ownershipLinksMax")
}

// pin and unpin count what needs the links from c up to its root; links
// nothing needs are dropped, so a long session does not accumulate them.
func (d *driver) pin(c storage.ID) {
	for _, x := range d.ownerChain(c) {
		if d.pins[x]++; d.pins[x] == 1 {
			if owner := d.convOwner[x]; owner != 0 {
				d.ownedPinned[owner]++
			}
		}
	}
}

func (d *driver) unpin(c storage.ID) {
	for _, x := range d.ownerChain(c) {
		if d.pins[x]--; d.pins[x] > 0 {
			continue
		}
		delete(d.pins, x)
		owner := d.convOwner[x]
		delete(d.convOwner, x)
		if owner == 0 {
			continue
		}
		if d.ownedPinned[owner]--; d.ownedPinned[owner] == 0 {
			delete(d.ownedPinned, owner)
			if _, live := d.live[owner]; !live {
				delete(d.taskConv, owner)
			}
		}
	}
}

// ownerChain returns the conversations from c up through owner tasks'
// conversations to the root of c's ownership tree.
func (d *driver) ownerChain(c storage.ID) []storage.ID {
	chain := []storage.ID{c}
	for range ownershipLinksMax {
		owner := d.convOwner[c]
		if owner == 0 {
			return chain
		}
		c = d.taskConv[owner]
		chain = append(chain, c)
	}
	panic("core: ownership chain longer than ownershipLinksMax")
}

// served reports whether some attachment serves work in conversation c:
// the session, or c or an ownership ancestor (never fork provenance).
func (d *driver) served(c storage.ID) bool {
	if d.session || d.phase == phaseStopping {
		return true
	}
	for _, x := range d.ownerChain(c) {
		if d.attached[x] {
			return true
		}
	}
	return false
}

// inForeground reports whether a live foreground task in conversation c is
// in the foreground set of scope: c is scope, or c's owner is a live
// foreground task whose conversation is in scope's foreground set.
func (d *driver) inForeground(c, scope storage.ID) bool {
	for range ownershipLinksMax {
		if c == scope {
			return true
		}
		owner := d.convOwner[c]
		lt, live := d.live[owner]
		if owner == 0 || !live || lt.task.Background {
			return false
		}
		c = lt.task.ConversationID
	}
	panic("core: ownership chain longer than ownershipLinksMax")
}

// --- the line's hooks ---

// admit runs before a plan builds anything.
func (d *driver) admit(ctx context.Context, scratchTask storage.ID) error {
	inv := invocationOf(ctx)
	switch d.phase {
	case phaseClosing, phaseClosed:
		return ErrClosed
	case phaseFaulted:
		return d.fault
	case phaseStopping:
		if inv == nil && ctx.Value(shutdownKey{}) == nil {
			return ErrShuttingDown
		}
	}
	if inv == nil {
		if scratchTask != 0 {
			return fmt.Errorf("%w: scratch of task %d is written only by its own invocation", ErrStaleInvocation, scratchTask)
		}
		return nil
	}
	if d.running[inv.task] != inv {
		return fmt.Errorf("%w: task %d %s", ErrStaleInvocation, inv.task, inv.method)
	}
	lt, live := d.live[inv.task]
	if !live {
		return fmt.Errorf("%w: task %d already settled", ErrStaleInvocation, inv.task)
	}
	if lt.task.Abort && inv.method != MethodAbort && !plant.On("line-admits-marked") {
		return ErrTaskCancelled
	}
	if scratchTask != 0 && scratchTask != inv.task {
		return fmt.Errorf("%w: task %d writes the scratch of task %d", ErrStaleInvocation, inv.task, scratchTask)
	}
	return nil
}

// authorize checks a built batch against invocation authority: only a
// task's current invocation changes its status or state or settles it
// (abort marks are anyone's); an abort invocation creates no new work; new
// work may not close a known wait cycle.
func (d *driver) authorize(ctx context.Context, batch storage.CommitBatch) error {
	inv := invocationOf(ctx)
	b := batchView{d: d, owners: map[storage.ID]storage.ID{}, tasks: map[storage.ID]*storage.Task{}}
	for _, w := range batch.Writes {
		switch w.Type {
		case storage.WriteTask:
			if inv != nil && inv.method == MethodAbort && !plant.On("abort-may-create") {
				return Rejectf(RuleAbortCreates, w.Task.ID, "abort of task %d cannot create task %d", inv.task, w.Task.ID)
			}
			b.tasks[w.Task.ID] = w.Task
			if err := d.loadLinksFor(ctx, w.Task.ConversationID, b); err != nil {
				return err
			}
			if err := d.checkNewWait(w.Task, b); err != nil {
				return err
			}
		case storage.WriteCreateConversation:
			if inv != nil && inv.method == MethodAbort && !plant.On("abort-may-create") {
				return Rejectf(RuleAbortCreates, w.Conversation.ID, "abort of task %d cannot create conversation %d", inv.task, w.Conversation.ID)
			}
			b.owners[w.Conversation.ID] = w.Conversation.Owner
		case storage.WritePatch, storage.WriteSettle:
			if _, fresh := b.tasks[w.ID]; fresh {
				continue
			}
			onlyMark := w.Type == storage.WritePatch && w.Role == "" && w.State == nil && w.Owns == nil
			if onlyMark {
				continue
			}
			if inv == nil || inv.task != w.ID && !plant.On("line-authorizes-any-invocation") {
				by := "the host"
				if inv != nil {
					by = fmt.Sprintf("task %d", inv.task)
				}
				return Rejectf(RuleNotOwner, w.ID, "%s changes task %d; only its own invocation may (abort marks excepted)", by, w.ID)
			}
		}
	}
	return nil
}

// loadLinksFor makes sure the ownership links above a conversation are
// known, unless the batch itself creates it.
func (d *driver) loadLinksFor(ctx context.Context, conv storage.ID, b batchView) error {
	if _, created := b.owners[conv]; created {
		return nil
	}
	return d.loadLinks(ctx, []storage.ID{conv})
}

// batchView answers ownership questions for a batch being authorized: the
// committed indexes plus the conversations and tasks the batch creates.
type batchView struct {
	d      *driver
	owners map[storage.ID]storage.ID    // conversations created by the batch → owner task
	tasks  map[storage.ID]*storage.Task // tasks created by the batch
}

// inForeground is driver.inForeground counting the batch's new work as live.
func (b batchView) inForeground(c, scope storage.ID) bool {
	for range ownershipLinksMax {
		if c == scope {
			return true
		}
		owner, created := b.owners[c]
		if !created {
			owner = b.d.convOwner[c]
		}
		t := b.tasks[owner]
		if t == nil {
			if lt, live := b.d.live[owner]; live {
				t = lt.task
			}
		}
		if owner == 0 || t == nil || t.Background {
			return false
		}
		c = t.ConversationID
	}
	panic("core: ownership chain longer than ownershipLinksMax")
}

// checkNewWait rejects a new task that a waiting task's wait would include
// while its dependencies lead back to that waiting task.
func (d *driver) checkNewWait(t *storage.Task, b batchView) error {
	if len(t.After) == 0 || t.Background || plant.On("new-self-wait-allowed") {
		return nil
	}
	for _, w := range d.waiters {
		if w.by == 0 || w.done {
			continue
		}
		inScope := w.session || b.inForeground(t.ConversationID, w.conv)
		if inScope && d.dependsOn(t.After, w.by, b.tasks) {
			return Rejectf(RuleSelfWait, t.ID, "task %d waits for conversation %d, and new task %d would wait for it", w.by, w.conv, t.ID)
		}
	}
	return nil
}

// dependsOn reports whether a dependency path from deps through live tasks
// (and tasks a batch being authorized creates) reaches target.
func (d *driver) dependsOn(deps []storage.ID, target storage.ID, created map[storage.ID]*storage.Task) bool {
	seen := map[storage.ID]bool{}
	stack := slices.Clone(deps)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == target {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if lt, live := d.live[id]; live {
			stack = append(stack, lt.task.After...)
		} else if t, ok := created[id]; ok {
			stack = append(stack, t.After...)
		}
	}
	return false
}

// afterCommit applies a whole persisted batch to the indexes, then
// reconsiders the changed tasks and waiters. It runs on the line.
func (d *driver) afterCommit(ctx context.Context, batch storage.CommitBatch, r storage.Range) func() {
	plan := d.tel.plan // what this commit asked of telemetry (line.go)
	d.tel.plan = nil
	defer func() { d.held = nil }() // lent by the commit's Tx (line.go) for its starts only
	var acts actions
	if ctx.Value(shutdownKey{}) != nil {
		d.setPhase(phaseStopping)
	}
	if batch.Kind == storage.BatchScratch {
		d.h.flushPreview(ctx, batch.Task, r, &acts)
		d.assertIndexes()
		return acts.then()
	}
	d.h.watchEvents(ctx, batch, r)
	d.h.sessionEvents(ctx, batch, r)
	d.endTraces(plan, &acts) // before the starts: a key may end and start again in one commit
	d.startTraces(ctx, plan)
	var affected, created []storage.ID
	for i := range batch.Writes {
		w := &batch.Writes[i]
		switch w.Type {
		case storage.WriteCreateConversation:
			d.convOwner[w.Conversation.ID] = w.Conversation.Owner
			d.existing[w.Conversation.ID] = true
			created = append(created, w.Conversation.ID)
		case storage.WriteDeleteConversation:
			delete(d.h.contexts, w.ID) // after the commit: a rejected delete keeps the cache
			delete(d.existing, w.ID)
		case storage.WriteTask:
			d.addLive(w.Task)
			if d.h.Tracing() {
				d.live[w.Task.ID].home = d.homeOf(ctx, plan, w.Task.ID)
			}
			d.pin(w.Task.ConversationID)
			for _, dep := range w.Task.After {
				if _, ok := d.live[dep]; ok {
					d.dependents[dep] = append(d.dependents[dep], w.Task.ID)
				}
			}
			affected = append(affected, w.Task.ID)
		case storage.WritePatch:
			lt := d.live[w.ID]
			if w.Role != "" && w.Status != lt.task.Status {
				lt.epoch++
			}
			if w.Abort && !lt.task.Abort {
				if inv := d.running[w.ID]; inv != nil && inv.method != MethodAbort && !(plant.On("abort-spares-recover") && inv.method == MethodRecover) {
					acts.add(inv.cancel) // the mark revoked it; signal after the line
				}
			}
			lt.task = applyTaskWrite(lt.task, w)
			affected = append(affected, w.ID)
		case storage.WriteSettle:
			lt := d.live[w.ID]
			lt.epoch++
			d.removeLive(w.ID)
			delete(d.h.previews, w.ID)
			delete(d.h.published, w.ID)
			if !plant.On("driver-forgets-dependents") {
				affected = append(affected, d.dependents[w.ID]...)
			}
			delete(d.dependents, w.ID)
			for _, tw := range d.tasksW[w.ID] {
				d.resolve(tw, Idle, nil)
			}
			delete(d.tasksW, w.ID)
		}
	}
	d.rehome(plan)
	for _, c := range created {
		if d.pins[c] == 0 { // nothing live needs the new conversation's link yet
			delete(d.convOwner, c)
		}
	}
	for _, id := range affected {
		d.reconsider(ctx, id, &acts)
	}
	d.checkWaiters()
	d.assertIndexes()
	return acts.then()
}

// reconsider reserves an invocation for a task when it can run (§6.1):
// marked → abort regardless of dependencies; start with terminal
// dependencies → execute; inflight → recover.
func (d *driver) reconsider(ctx context.Context, id storage.ID, acts *actions) {
	lt, live := d.live[id]
	if plant.On("driver-abort-while-running") && live && lt.task.Abort && d.running[id] != nil && d.running[id].method != MethodAbort && d.served(lt.task.ConversationID) {
		d.reserve(ctx, lt, MethodAbort, acts)
		return
	}
	if !live || d.running[id] != nil || !d.served(lt.task.ConversationID) {
		return
	}
	var m Method
	switch {
	case d.phase == phaseClosing || d.phase == phaseFaulted || d.phase == phaseClosed:
		return
	case lt.task.Abort:
		m = MethodAbort
	case d.phase == phaseStopping:
		return
	case lt.task.Role == storage.RoleInflight:
		m = MethodRecover
	default:
		for _, dep := range lt.task.After {
			if _, waiting := d.live[dep]; waiting {
				return
			}
		}
		m = MethodExecute
	}
	d.reserve(ctx, lt, m, acts)
}

// reserve takes the task's invocation slot before dispatch; the slot is
// released only when the method actually returns.
func (d *driver) reserve(parent context.Context, lt *liveTask, m Method, acts *actions) {
	kind, _ := d.h.kinds.Task(lt.task.Kind)
	inv := &invocation{task: lt.task.ID, conv: lt.task.ConversationID, kind: kind, method: m, epoch: lt.epoch, home: lt.home, snap: cloneTask(lt.task),
		preview: d.h.previewHolder(lt.task)}
	// The span goes under the task's home; what made the task runnable (a
	// drive, a commit, the previous invocation's completion) is at most a
	// link, and its cancellation never reaches the task: a drive caller
	// giving up is not the task's signal.
	origin := parent
	if by := invocationOf(parent); by != nil {
		origin = by.origin
	}
	spanCtx, span := context.WithoutCancel(origin), trace.Span(noop.Span{})
	if d.h.Tracing() {
		base, opts := d.invocationSpanStart(parent, origin, lt.home)
		spanCtx, span = startSpan(d.h.tracer, d.h.rt, base, "pico.task."+string(m), append(opts, trace.WithAttributes(
			attribute.Int64("pico.task.id", int64(lt.task.ID)),
			attribute.Int64("pico.conversation.id", int64(lt.task.ConversationID)),
			attribute.String("pico.task.kind", lt.task.Kind),
			attribute.String("pico.task.status", lt.task.Status),
		))...)
	}
	cctx, cancel := context.WithCancel(spanCtx)
	inv.ctx, inv.cancel, inv.span = context.WithValue(cctx, invocationKey{}, inv), cancel, span
	// spanCtx is inv.ctx's values without its cancellation: admitted as
	// admit would make it from inv.ctx.
	inv.admitted = context.WithValue(spanCtx, invocationKey{}, inv)
	inv.holds.inv = inv
	d.running[lt.task.ID] = inv
	d.invocations++
	inv.name, inv.origin = fmt.Sprintf("task%d.%s", lt.task.ID, m), origin
	acts.add(d.start(inv))
}

// invoke runs one method outside the line, then reports its completion.
func (d *driver) invoke(inv *invocation) {
	rt := &TaskRuntime{h: d.h, inv: inv}
	observe := d.h.opts.OnInvocation
	if observe != nil {
		observe(Invocation{Task: inv.task, ConversationID: inv.conv, Method: inv.method}, false)
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				RethrowInvariant(r) // the harness's bug, not the kind's
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		switch inv.method {
		case MethodExecute:
			return inv.kind.Execute(inv.ctx, inv.snap, rt)
		case MethodRecover:
			return inv.kind.Recover(inv.ctx, inv.snap, rt)
		default:
			return inv.kind.Abort(inv.ctx, inv.snap, rt)
		}
	}()
	for _, p := range inv.progress {
		if perr := p.Drain(); perr != nil && err == nil {
			err = fmt.Errorf("progress: %w", perr)
		}
	}
	inv.returned.Store(true)
	if observe != nil {
		observe(Invocation{Task: inv.task, ConversationID: inv.conv, Method: inv.method}, true)
	}
	d.complete(inv, err)
}

// complete is the invocation's completion on the line: the slot is released
// only now, the contract is checked, and the task is reconsidered. What the
// completion makes runnable is held back for the invocation's goroutine.
func (d *driver) complete(inv *invocation, err error) {
	ctx, held := admittedContext(inv.ctx), d.newHeld()
	defer inv.hold(held)
	_ = d.h.line.Do(ctx, func() (func(), error) {
		d.held = held
		defer func() { d.held = nil }()
		var acts actions
		if d.running[inv.task] != inv {
			panic(fmt.Sprintf("core: completion of task %d %s does not own its slot", inv.task, inv.method))
		}
		delete(d.running, inv.task)
		if fe := d.contract(inv, err); fe != nil {
			inv.span.SetStatus(codes.Error, fe.Error())
			d.faultLocked(ctx, fe, &acts)
		}
		acts.add(func() { inv.span.End() })
		inv.cancel()
		d.reconsider(ctx, inv.task, &acts)
		d.checkWaiters()
		d.checkDrained()
		return acts.then(), nil
	})
}

// contract decides whether a returned method kept the task contract.
func (d *driver) contract(inv *invocation, err error) *FaultError {
	lt, live := d.live[inv.task]
	unwinding := d.phase == phaseClosing || d.phase == phaseFaulted || d.phase == phaseClosed ||
		(live && lt.task.Abort && inv.method != MethodAbort)
	fe := &FaultError{Task: inv.task, Kind: inv.kind.Kind(), Method: string(inv.method)}
	switch {
	case err != nil && unwinding && (errors.Is(err, ErrTaskCancelled) || errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) || errors.Is(err, ErrStaleInvocation)):
		return nil
	case err != nil && d.phase == phaseFaulted:
		return nil // the session already faulted; this is its unwinding
	case err != nil:
		fe.Err = err
		return fe
	case inv.method == MethodAbort && live && !unwinding:
		fe.Err = errors.New("abort returned without settling the task")
		return fe
	case inv.method != MethodAbort && live && lt.epoch == inv.epoch && !unwinding:
		fe.Err = errors.New("returned without a committed status transition")
		return fe
	}
	return nil
}

// --- waiters ---

// drive attaches a scope and waits until it is idle or the session closes:
// the decision half of Harness.Drive and Conversation.Drive.
func (h *Harness) drive(ctx context.Context, conv storage.ID, session bool) (DriveResult, error) {
	w := &waiter{session: session, conv: conv, ev: h.rt.NewEvent(fmt.Sprintf("drive:%d", conv))}
	err := h.line.Do(ctx, func() (func(), error) {
		d := h.d
		switch d.phase {
		case phaseClosing, phaseClosed:
			d.resolve(w, Closed, nil)
			return nil, nil
		case phaseFaulted:
			return nil, d.fault
		}
		if inv := invocationOf(ctx); inv != nil {
			if err := d.checkDrive(inv, conv); err != nil {
				return nil, err
			}
			w.by = inv.task
		}
		if !session {
			if err := d.loadLinks(ctx, []storage.ID{conv}); err != nil {
				return nil, err
			}
		}
		var acts actions
		d.attach(ctx, conv, session, &acts)
		d.waiters = append(d.waiters, w)
		d.checkWaiters()
		return acts.then(), nil
	})
	if err != nil {
		return "", err
	}
	return h.await(ctx, w)
}

// await waits for a waiter; a cancelled caller removes it on the line.
func (h *Harness) await(ctx context.Context, w *waiter) (DriveResult, error) {
	if err := w.ev.Wait(ctx); err != nil {
		_ = h.line.Do(context.WithoutCancel(ctx), func() (func(), error) {
			h.d.removeWaiter(w)
			return nil, nil
		})
		if w.done { // resolved while we were leaving: report that instead
			return w.result, w.err
		}
		return "", err
	}
	return w.result, w.err
}

// checkDrive rejects a task driving a scope it is itself part of: its own
// foreground scope, or one whose foreground tasks depend on it.
func (d *driver) checkDrive(inv *invocation, conv storage.ID) error {
	self := d.live[inv.task]
	if self != nil && !self.task.Background && d.inForeground(self.task.ConversationID, conv) && !plant.On("drive-own-scope-allowed") {
		return &SelfWaitError{Task: inv.task, Target: fmt.Sprintf("its own foreground scope, conversation %d", conv)}
	}
	for _, id := range d.liveIDs() {
		lt := d.live[id]
		if lt.task.Background || !d.inForeground(lt.task.ConversationID, conv) || plant.On("drive-dependent-scope-allowed") {
			continue
		}
		if d.dependsOn(lt.task.After, inv.task, nil) {
			return &SelfWaitError{Task: inv.task, Target: fmt.Sprintf("conversation %d, whose task %d depends on it", conv, id)}
		}
	}
	return nil
}

// markForeground adds abort marks for every unmarked live foreground task
// in conv's foreground set, and returns the conversations of that set (conv
// first). It runs inside a plan, on the line (Tx.MarkForeground).
func (d *driver) markForeground(tx *Tx, conv storage.ID) []storage.ID {
	convs := []storage.ID{conv}
	for _, id := range d.liveIDs() {
		lt := d.live[id]
		if lt.task.Background && !plant.On("abort-marks-background") || !d.inForeground(lt.task.ConversationID, conv) ||
			plant.On("abort-stops-at-owners") && lt.task.ConversationID != conv {
			continue
		}
		if !lt.task.Abort {
			tx.Patch(id, TaskPatch{Abort: true})
		}
		if !slices.Contains(convs, lt.task.ConversationID) {
			convs = append(convs, lt.task.ConversationID)
		}
	}
	return convs
}

// waitForTask registers task self's waiter for task id on the line, or
// resolves it at once when id is already terminal: the decision half of
// TaskRuntime.WaitForTask. It rejects a wait for the task itself or for a
// task whose unresolved dependencies lead back to it.
func (d *driver) waitForTask(ctx context.Context, self, id storage.ID, w *waiter) error {
	switch d.phase {
	case phaseFaulted:
		return d.fault
	case phaseClosing, phaseClosed:
		return ErrClosed
	}
	if id == self && !plant.On("wait-for-self-allowed") {
		return &SelfWaitError{Task: self, Target: "itself"}
	}
	lt, live := d.live[id]
	if !live {
		got, err := d.h.Store().GetTasks(ctx, []storage.ID{id})
		if err != nil {
			return err
		}
		if _, exists := got[id]; !exists {
			return fmt.Errorf("%w: task %d", ErrNotFound, id)
		}
		if plant.On("wait-for-ended-task-registers") {
			d.tasksW[id] = append(d.tasksW[id], w)
			return nil
		}
		d.resolve(w, Idle, nil)
		return nil
	}
	if d.dependsOn(lt.task.After, self, nil) {
		return &SelfWaitError{Task: self, Target: fmt.Sprintf("task %d, which depends on it", id)}
	}
	d.tasksW[id] = append(d.tasksW[id], w)
	return nil
}

func (d *driver) idle(w *waiter) bool {
	if w.session {
		return d.fgTotal == 0
	}
	if plant.On("driver-idle-early") && d.fg[w.conv] == 1 {
		for _, id := range d.liveIDs() {
			if lt := d.live[id]; lt.task.ConversationID == w.conv && !lt.task.Background && len(lt.task.After) > 0 {
				return true // the one left waits on a dependency: taken for idle
			}
		}
	}
	return d.fg[w.conv] == 0
}

func (d *driver) checkWaiters() {
	keep := d.waiters[:0]
	for _, w := range d.waiters {
		if !w.done && d.idle(w) {
			d.resolve(w, Idle, nil)
		}
		if !w.done {
			keep = append(keep, w)
		}
	}
	clear(d.waiters[len(keep):])
	d.waiters = keep
	if d.phase == phaseStopping && len(d.live) == 0 && len(d.running) == 0 {
		d.stopIdle.Set()
	}
}

func (d *driver) resolve(w *waiter, r DriveResult, err error) {
	if w.done {
		return
	}
	w.done, w.result, w.err = true, r, err
	w.ev.Set()
}

func (d *driver) removeWaiter(w *waiter) {
	d.waiters = slices.DeleteFunc(d.waiters, func(x *waiter) bool { return x == w })
	if w.target != 0 {
		d.tasksW[w.target] = slices.DeleteFunc(d.tasksW[w.target], func(x *waiter) bool { return x == w })
		if len(d.tasksW[w.target]) == 0 {
			delete(d.tasksW, w.target)
		}
	}
}

// attach makes a scope served and reconsiders the live tasks it newly
// serves: the one place a drive inspects the whole live map.
func (d *driver) attach(ctx context.Context, conv storage.ID, session bool, acts *actions) {
	if !session {
		if d.attached[conv] {
			return
		}
		d.attached[conv] = true
		d.pin(conv) // an attachment keeps its links for as long as it lasts
		if d.session {
			return // already served
		}
	} else {
		if d.session {
			return
		}
		d.session = true
	}
	d.attachAll(ctx, acts)
}

// attachAll reconsiders every live task once, in id order.
func (d *driver) attachAll(ctx context.Context, acts *actions) {
	for _, id := range d.liveIDs() {
		d.reconsider(ctx, id, acts)
	}
}

// --- faults and closing ---

// persistenceFault faults the session, on the line, when a commit's
// persistence failed or is uncertain (§3.3): the indexes no longer match
// storage, so nothing more may be admitted.
func (d *driver) persistenceFault(ctx context.Context, err error) func() {
	fe := &FaultError{Err: err}
	if inv := invocationOf(ctx); inv != nil {
		fe.Task, fe.Kind, fe.Method = inv.task, inv.kind.Kind(), string(inv.method)
	}
	var acts actions
	d.faultLocked(ctx, fe, &acts)
	return acts.then()
}

// faultLocked fail-stops the session on the line: waiters reject, admission
// stops, every invocation is signalled; a closer joins them and closes
// storage. Nothing is written.
func (d *driver) faultLocked(ctx context.Context, fe *FaultError, acts *actions) {
	if d.phase == phaseFaulted || d.phase == phaseClosed {
		return
	}
	d.setPhase(phaseFaulted)
	d.fault = fe
	acts.add(func() { d.h.report(fe) })
	d.h.endWatchers(ConversationEvent{Type: EventFault, Error: fe.Error()}, SessionEvent{Type: SessionEventFault, Task: fe.Task, Kind: fe.Kind, Method: fe.Method, Error: fe.Error()})
	d.release("", fe, fe, acts)
	d.startCloser(ctx, acts)
	d.checkDrained()
}

// release ends every wait when the session stops: drive waiters get result
// (or driveErr), task waiters taskErr; a pending shutdown wakes; every
// running invocation is signalled after the line.
func (d *driver) release(result DriveResult, driveErr, taskErr error, acts *actions) {
	for _, w := range d.waiters {
		d.resolve(w, result, driveErr)
	}
	d.waiters = nil
	ids := make([]storage.ID, 0, len(d.tasksW))
	for id := range d.tasksW {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, w := range d.tasksW[id] {
			d.resolve(w, "", taskErr)
		}
		delete(d.tasksW, id)
	}
	d.stopIdle.Set()
	d.signalAll(acts)
}

func (d *driver) signalAll(acts *actions) {
	for _, id := range d.runningIDs() {
		acts.add(d.running[id].cancel)
	}
}

// liveIDs and runningIDs list the indexes in id order: decisions and error
// messages never depend on map iteration order.
func (d *driver) liveIDs() []storage.ID { return sortedIDs(d.live) }

func (d *driver) runningIDs() []storage.ID { return sortedIDs(d.running) }

func sortedIDs[V any](m map[storage.ID]V) []storage.ID {
	ids := make([]storage.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// cloneTask copies a task record so that callers cannot change the
// driver's (or the backend's) shared one.
// applyTaskWrite returns a task as a patch or settle write leaves it. The
// result shares slices with prev; neither is ever written in place.
func applyTaskWrite(prev *storage.Task, w *storage.Write) *storage.Task {
	next := *prev
	if w.Role != "" {
		next.Status, next.Role = w.Status, w.Role
	}
	if w.State != nil {
		next.State = w.State
	}
	if w.Owns != nil {
		next.Owns = w.Owns
	}
	next.Abort = next.Abort || w.Abort
	return &next
}

func cloneTask(t *storage.Task) *storage.Task {
	c := *t
	c.State = slices.Clone(t.State)
	c.After = slices.Clone(t.After)
	c.Owns = slices.Clone(t.Owns)
	return &c
}

func (d *driver) checkDrained() {
	if (d.phase == phaseClosing || d.phase == phaseFaulted) && len(d.running) == 0 {
		d.drained.Set()
	}
}

// startCloser spawns, once, the actor that joins every invocation and then
// closes storage.
// closingOrClosed reports whether Close has begun: the phase says so, or,
// for a faulted session (which stays faulted), the closer has started. A
// watch registered then would never be ended.
func (d *driver) closingOrClosed() bool {
	return d.phase == phaseClosing || d.phase == phaseClosed || d.closeStarted
}

func (d *driver) startCloser(ctx context.Context, acts *actions) {
	if d.closeStarted {
		return
	}
	d.closeStarted = true
	acts.add(func() {
		d.h.rt.Go(context.WithoutCancel(ctx), "closer", func(actx context.Context) {
			_ = d.drained.Wait(context.WithoutCancel(ctx))
			if err := d.h.line.Store().Close(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, storage.ErrClosed) {
				d.closeErr = err
			}
			d.h.release()
			_ = d.h.line.Do(context.WithoutCancel(ctx), func() (func(), error) {
				if d.phase != phaseFaulted {
					d.setPhase(phaseClosed)
				}
				return d.endOpenTraces(), nil
			})
			d.closed.Set()
		})
	})
}
