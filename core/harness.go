package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options configures Open.
type Options struct {
	// Runtime is where actors run and time passes; nil means RealRuntime.
	Runtime Runtime
	// EntryKinds and TaskKinds are added to the built-in entry kinds (the
	// kernel has no built-in task kind). Adding a task kind under a name
	// that is already registered is an error: swapping one is explicit,
	// through Replace.
	EntryKinds []storage.Kinder
	TaskKinds  []TaskKind
	// Replace swaps registered task kinds by name. A replacement must
	// understand the persisted statuses and state of its live tasks.
	Replace []TaskKind
	// Rules are checks the line runs on every main batch after its own
	// (§7.3), before persistence; ValidateBatch takes the same rules.
	Rules []BatchRule
	// Watched says which state the views carry beyond what the kernel
	// knows of: the conversation inbox and the session's usage record.
	Watched Watched
	// ConversationAbort, when set, runs inside the commit of
	// Conversation.Abort, after the marks, with the conversations of the
	// marked foreground set (the aborted one first), so that a package of
	// kinds composes its own abort policy into the same commit.
	ConversationAbort func(tx *Tx, convs []storage.ID) error
	// Extensions are process-local values kinds look up by key through
	// Harness.Extension: how a package of kinds keeps per-session
	// configuration (models, tools, an execution environment) without
	// package state. Keys follow context.WithValue's rule: a type of the
	// package that owns them.
	Extensions map[any]any
	// TracerProvider supplies the tracer for invocation and commit spans;
	// nil means no telemetry. No span is ever stored in session data.
	TracerProvider trace.TracerProvider
	// OnTaskOutput receives each flush of a task's preview (the ops after
	// one of its scratch commits), outside the line, in commit order. It
	// must not block.
	OnTaskOutput func(TaskOutput)
	// OnInvocation observes every task method call: with returned false as
	// the method starts, on its own actor, and with returned true as it
	// returns, before its completion reaches the line (so before the next
	// invocation of the task can be reserved). A simulation's oracle uses it
	// to check that a task never has two invocations at once. It must not
	// block.
	OnInvocation func(inv Invocation, returned bool)
	// WatchQueueMax bounds the commits a watch may have queued before its
	// listener gets a lag fault and must resnapshot; 0 means 1024. A
	// simulation draws small bounds so that lagging listeners happen.
	WatchQueueMax int
	// Report receives task and hook errors that are reported rather than
	// fatal, and the fault that stops a session. It must not block.
	Report func(error)
	// CheckInvariants checks the driver's indexes after every commit and
	// panics, naming the invariant, when one is broken (CheckInvariants).
	// Simulated runs and tests set it; it costs a walk of the live set.
	CheckInvariants bool
	// CheckPreviews holds every task preview flushed at a scratch commit to
	// the one the task's durable scratch builds (the kind's InitPreview)
	// and panics with the *DriverInvariantError "preview" when they differ:
	// a preview left alone while nobody watched is rebuilt that way, so a
	// kind's live preview must agree. A watch's capture is held to it too
	// ("captured preview"): it shows what the flushes published, never what
	// the producer holds mid-window. It costs a rebuild per scratch commit
	// and per previewed task a capture shows.
	CheckPreviews bool
	// CheckContexts holds every context, system fold and model request the
	// per-conversation cache answers (Tx.DerivedContext, Tx.SystemFold,
	// Tx.RequestMessages) to a fresh derivation from storage (DeriveContext,
	// Context.System, Context.Request) and panics with the
	// *DriverInvariantError "context" when they differ: the cache folds
	// only what landed since and projects only past its stable prefix, so
	// it must agree with the slow way. It costs a derivation per read.
	CheckContexts bool
}

// Watched names the state a package of kinds asks the views to carry.
// The kernel folds it without knowing what it means (§9.4).
type Watched struct {
	// Inbox is an unbound conversation list: every ConversationView
	// carries its elements as Inbox, and its changes arrive as inbox
	// events. Zero means views carry an empty inbox.
	Inbox storage.Address
	// UsageRows is a session list whose appends session watches deliver
	// as usage events, each with the UsageTotals value as its batch leaves
	// it. UsageTotals is also carried by every SessionView.
	UsageRows   storage.Address
	UsageTotals storage.Address
}

// Harness is one open session: the line, the driver and the registries.
type Harness struct {
	rt     Runtime
	line   *Line
	kinds  *Kinds
	d      *driver
	tracer trace.Tracer
	hooks  atomic.Pointer[hookTable]
	root   storage.ID

	// previews holds the previews of live tasks; used on the line (and by
	// the invocation that owns the task while the line waits on it).
	previews map[storage.ID]*taskPreview
	// published marks previews that have flushed at least once; only those
	// are in a captured view, since a watcher learns a preview from its
	// first flush (a base).
	published map[storage.ID]bool
	// watchers are the conversation watches by conversation, and
	// sessionWatchers the session watches; used on the line. Reports
	// happen off the line, so they read sessionWatchersCopy, which watchMu
	// guards; watchMu is held only to swap or read that slice, never across
	// a wait, a delivery or a call out, so it never blocks an actor.
	watchers            map[storage.ID][]*WatchHandle
	sessionWatchers     []*SessionWatchHandle
	watchMu             sync.Mutex
	sessionWatchersCopy []*SessionWatchHandle

	// contexts caches derived contexts by conversation; used on the line only.
	contexts   map[storage.ID]*contextCache
	contextUse uint64
	opts       Options

	unregistered []string
	// release gives up the claim on the store; the closer calls it once
	// the store is closed.
	release func()
}

type shutdownKey struct{}

// Open opens a session over store (§6.4): it registers the built-in entry
// kinds and the given kinds, reports stored entry kinds nobody registered
// (without scanning entries), seeds the live-task indexes with one scan,
// rejects a live task of an unknown kind, creates the root conversation of
// an empty session, and starts nothing. It registers no task kind of its
// own: agent.Open adds pico's built-in kinds.
//
// A session has one writer (DESIGN §9a): a store that admits one harness at
// a time (storage.Claimer, as every backend does) is claimed until the
// harness closes, and a second Open on it fails with a *storage.LockedError.
func Open(ctx context.Context, store storage.Storage, opts Options) (*Harness, error) {
	if store == nil {
		return nil, ErrNoStore
	}
	release := func() {}
	if c, ok := store.(storage.Claimer); ok {
		r, err := c.Claim()
		if err != nil {
			return nil, err
		}
		release = sync.OnceFunc(r) // the closer and a failed open may both give it up
	}
	h, err := open(ctx, store, opts, release)
	if err != nil {
		release()
		return nil, err
	}
	return h, nil
}

// open is Open once the store is claimed; release gives the claim up (a
// fault while opening already runs the closer).
func open(ctx context.Context, store storage.Storage, opts Options, release func()) (*Harness, error) {
	if opts.Runtime == nil {
		opts.Runtime = RealRuntime()
	}
	kinds := NewKinds()
	for _, k := range opts.EntryKinds {
		kinds.AddEntry(k)
	}
	for _, k := range opts.TaskKinds {
		if _, dup := kinds.Task(k.Kind()); dup {
			return nil, fmt.Errorf("core: task kind %q is already registered; use Options.Replace to swap it", k.Kind())
		}
		if err := kinds.AddTask(k); err != nil {
			return nil, err
		}
	}
	for _, k := range opts.Replace {
		if _, ok := kinds.Task(k.Kind()); !ok {
			return nil, fmt.Errorf("core: cannot replace task kind %q: nothing is registered under that name", k.Kind())
		}
		if err := kinds.AddTask(k); err != nil {
			return nil, err
		}
	}
	h := &Harness{rt: opts.Runtime, kinds: kinds, opts: opts, release: release}
	h.hooks.Store(&hookTable{})
	h.tracer = noop.NewTracerProvider().Tracer("pico")
	if opts.TracerProvider != nil {
		h.tracer = opts.TracerProvider.Tracer("github.com/pico-go/pico/core")
	}
	h.d = newDriver(h)
	h.line = NewLine(h.rt, store, kinds, LineOptions{
		Admit: h.d.admit, Authorize: h.d.authorize, AfterCommit: h.d.afterCommit,
		OnPersistenceError: h.d.persistenceFault, Tracer: h.tracer, Rules: opts.Rules,
	})
	h.line.harness = h
	stored, err := store.EntryKinds(ctx)
	if err != nil {
		return nil, err
	}
	h.unregistered = kinds.UnregisteredEntryKinds(stored)
	if err := h.d.seed(ctx); err != nil {
		return nil, err
	}
	first, err := store.ScanConversations(ctx, storage.ConversationQuery{Cursor: storage.Cursor{Limit: 1}})
	if err != nil {
		return nil, err
	}
	if len(first.Items) > 0 {
		h.root = first.Items[0].ID
		return h, nil
	}
	if store.LastSeq() != 0 {
		return nil, fmt.Errorf("core: storage has history (last sequence %d) but no conversation", store.LastSeq())
	}
	if _, err := h.line.Commit(ctx, func(tx *Tx) error {
		h.root = tx.CreateConversation(ConversationSpec{})
		return nil
	}); err != nil {
		return nil, err
	}
	return h, nil
}

// Extension returns the value registered under key in Options.Extensions,
// or nil.
func (h *Harness) Extension(key any) any { return h.opts.Extensions[key] }

// Kinds is the registry in use: h.Kinds().Task(name) is whatever is
// registered under that name now.
func (h *Harness) Kinds() *Kinds { return h.kinds }

// UnregisteredEntryKinds lists stored entry kinds no registered kind
// claims. Their stored model, head and edits still derive context.
func (h *Harness) UnregisteredEntryKinds() []string { return slices.Clone(h.unregistered) }

// Runtime is the harness's runtime.
func (h *Harness) Runtime() Runtime { return h.rt }

// Store is the session's storage, for reads.
func (h *Harness) Store() storage.Storage { return h.line.Store() }

func (h *Harness) report(err error) {
	h.reportToWatchers(err)
	if h.opts.Report != nil {
		h.opts.Report(err)
	}
}

// commit runs a plan on the line; uncertain persistence faults the session
// on the line itself (driver.persistenceFault).
func (h *Harness) commit(ctx context.Context, plan func(tx *Tx) error) (storage.Range, error) {
	return h.line.Commit(ctx, plan)
}

func (h *Harness) scratch(ctx context.Context, task storage.ID, plan func(ScratchTx) error) (storage.Range, error) {
	return h.line.Scratch(ctx, task, plan)
}

// Commit runs plan as one commit on the line.
func (h *Harness) Commit(ctx context.Context, plan func(tx *Tx) error) (storage.Range, error) {
	return h.commit(ctx, plan)
}

// Root returns the root conversation's handle.
func (h *Harness) Root() *Conversation { return &Conversation{h: h, ID: h.root} }

// Conversation returns the handle of an existing conversation.
func (h *Harness) Conversation(ctx context.Context, id storage.ID) (*Conversation, error) {
	got, err := h.Store().GetConversations(ctx, []storage.ID{id})
	if err != nil {
		return nil, err
	}
	if _, ok := got[id]; !ok {
		return nil, fmt.Errorf("%w: conversation %d", ErrNotFound, id)
	}
	return &Conversation{h: h, ID: id}, nil
}

// ErrNoStore is what Open returns without a store.
var ErrNoStore = errors.New("core: Open needs a store")

// ErrNotFound reports a missing conversation, task or entry.
var ErrNotFound = errors.New("core: not found")

// ConversationFilter selects conversations: forks of Parent, conversations
// owned by tasks of OwnedFrom, or (Independent) those owned by nobody.
type ConversationFilter struct {
	storage.Cursor
	Parent      storage.ID
	OwnedFrom   storage.ID
	Independent bool
}

// Conversations pages through conversations. With Independent, the page
// holds up to Limit conversations owned by nobody: the scan reads on past
// owned ones until the page is full or nothing is left, and Next is set
// only when another independent conversation follows.
func (h *Harness) Conversations(ctx context.Context, f ConversationFilter) (storage.Page[storage.Conversation], error) {
	f.Cursor = f.Cursor.Defaulted()
	q := storage.ConversationQuery{Cursor: f.Cursor, Parent: f.Parent, OwnedFrom: f.OwnedFrom}
	if !f.Independent {
		return h.Store().ScanConversations(ctx, q)
	}
	if err := storage.CheckCursor(f.Cursor); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	backward := f.Cursor.Backward()
	var found []storage.Conversation // in scan order, one past the limit at most
	var readAt storage.ID
	for len(found) <= f.Limit {
		p, err := h.Store().ScanConversations(ctx, q)
		if err != nil {
			return p, err
		}
		if !plant.On("independent-page-read-at-nothing") {
			readAt = p.ReadAt
		}
		items := p.Items
		if backward && !plant.On("independent-backward-unreversed") {
			items = slices.Clone(items)
			slices.Reverse(items)
		}
		for _, c := range items {
			if c.Owner == 0 && (len(found) <= f.Limit && !plant.On("independent-page-never-continues") || len(found) < f.Limit) {
				found = append(found, c)
			}
		}
		if p.Next == 0 {
			break
		}
		if backward {
			q.Before = p.Next
		} else {
			q.After = p.Next
		}
	}
	// found is in scan order (descending for a backward cursor), as
	// NewPage takes it.
	return storage.NewPage(f.Cursor, readAt, found, func(c storage.Conversation) storage.ID { return c.ID }), nil
}

// Inspection is the live work of a session: tasks that may start and tasks
// found inflight, which recover will handle.
type Inspection struct {
	Start    []*storage.Task
	Inflight []*storage.Task
}

// Inspect reports live work from the driver's index, without scanning.
func (h *Harness) Inspect(ctx context.Context) (Inspection, error) {
	var in Inspection
	err := h.line.Read(ctx, func(context.Context) error {
		for _, id := range h.d.liveIDs() {
			t := cloneTask(h.d.live[id].task)
			if plant.On("inspect-shares-records") {
				t = h.d.live[id].task
			}
			if t.Role == storage.RoleInflight {
				in.Inflight = append(in.Inflight, t)
			} else {
				in.Start = append(in.Start, t)
			}
		}
		return nil
	})
	return in, err
}

// GetEntries reads entries by id.
func (h *Harness) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	return h.Store().GetEntries(ctx, ids)
}

// GetEntry reads one entry.
func (h *Harness) GetEntry(ctx context.Context, id storage.ID) (*storage.Entry, bool, error) {
	m, err := h.Store().GetEntries(ctx, []storage.ID{id})
	e, ok := m[id]
	return e, ok, err
}

// Entries pages through a conversation's logical transcript.
func (h *Harness) Entries(ctx context.Context, conversationID storage.ID, c storage.Cursor) (storage.Page[*storage.Entry], error) {
	return h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: c, ConversationID: conversationID})
}

// GetTasks reads tasks by id, terminal ones included.
func (h *Harness) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	return h.Store().GetTasks(ctx, ids)
}

// GetTask reads one task.
func (h *Harness) GetTask(ctx context.Context, id storage.ID) (*storage.Task, bool, error) {
	m, err := h.Store().GetTasks(ctx, []storage.ID{id})
	t, ok := m[id]
	return t, ok, err
}

// AbortTask durably marks one live task for cancellation (§6.3). A
// terminal task rejects; marking an already-marked task writes nothing, so a
// running abort handler is never disturbed.
func (h *Harness) AbortTask(ctx context.Context, id storage.ID) error {
	_, err := h.commit(ctx, func(tx *Tx) error {
		t, err := tx.stored(id) // an already marked task writes nothing: read what storage has
		if err != nil {
			return err
		}
		if !t.Live() {
			return Rejectf(RuleTaskTerminal, id, "task %d is already %s", id, t.Status)
		}
		if !t.Abort {
			tx.Patch(id, TaskPatch{Abort: true})
		}
		return nil
	})
	return err
}

// Drive attaches the session and waits until no live foreground task is
// left anywhere ("idle") or the session closes ("closed"). Cancelling ctx
// removes only this wait; the attachment stays and durable work goes on.
func (h *Harness) Drive(ctx context.Context) (DriveResult, error) {
	if invocationOf(ctx) != nil {
		return "", ErrLifecycleFromTask
	}
	return h.drive(ctx, 0, true)
}

// Close stops admission in one line operation, signals and joins every
// invocation outside the line, then closes storage. It writes nothing; the
// next open continues from durable state. Repeated calls share completion,
// and close waits for the join whatever ctx says.
func (h *Harness) Close(ctx context.Context) error {
	if invocationOf(ctx) != nil {
		return ErrLifecycleFromTask
	}
	err := h.line.Do(context.WithoutCancel(ctx), func() (func(), error) {
		d := h.d
		var acts actions
		if d.phase == phaseOpen || d.phase == phaseStopping {
			d.setPhase(phaseClosing)
			d.release(Closed, nil, ErrClosed, &acts)
		}
		// A fault ended the watches it found, but a faulted session still
		// takes new ones (their view says faulted): close ends those too.
		h.endWatchers(ConversationEvent{Type: EventClosed, ReadAt: h.Store().LastSeq()}, SessionEvent{Type: SessionEventClosed})
		d.startCloser(ctx, &acts)
		d.checkDrained()
		return acts.then(), nil
	})
	if err != nil {
		return err
	}
	if err := h.d.closed.Wait(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	return h.d.closeErr
}

// Shutdown marks every live task in one commit, serves their abort cleanup
// session-wide, and closes once no live task and no invocation is left.
// Queued input stays untouched. Once admitted, ctx cannot abandon it; an
// explicit Close interrupts it (ErrShutdownInterrupted).
func (h *Harness) Shutdown(ctx context.Context) error {
	if invocationOf(ctx) != nil {
		return ErrLifecycleFromTask
	}
	admitted := context.WithoutCancel(ctx)
	var already bool
	if err := h.line.Read(admitted, func(context.Context) error {
		switch h.d.phase {
		case phaseStopping:
			already = true
		case phaseClosing, phaseClosed:
			return ErrShutdownInterrupted
		case phaseFaulted:
			return h.d.fault
		}
		return nil
	}); err != nil {
		return err
	}
	if !already {
		_, err := h.commit(context.WithValue(admitted, shutdownKey{}, true), func(tx *Tx) error {
			ids := make([]storage.ID, 0, len(h.d.live))
			for id, lt := range h.d.live {
				if !lt.task.Abort {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			for _, id := range ids {
				tx.Patch(id, TaskPatch{Abort: true})
			}
			if len(ids) == 0 {
				// Nothing to mark: enter stopping without a write.
				h.d.setPhase(phaseStopping)
			}
			return nil
		})
		if errors.Is(err, ErrClosed) {
			return ErrShutdownInterrupted // close won the line before the marks
		}
		if err != nil {
			return err
		}
		if err := h.line.Do(admitted, func() (func(), error) {
			var acts actions
			h.d.attach(admitted, 0, true, &acts)
			h.d.checkWaiters()
			return acts.then(), nil
		}); err != nil {
			return err
		}
	}
	_ = h.d.stopIdle.Wait(admitted)
	var result error
	_ = h.line.Read(admitted, func(context.Context) error {
		switch h.d.phase {
		case phaseFaulted:
			result = h.d.fault
		case phaseClosing, phaseClosed:
			result = ErrShutdownInterrupted
		}
		return nil
	})
	if result != nil {
		// A fault rejects shutdown at once (§6.1); the closer joins the
		// invocations and closes storage on its own.
		return result
	}
	return h.Close(admitted)
}

// DeleteConversation deletes a conversation when neither it nor anything
// it owns has live tasks or running invocations (§6.4); otherwise it
// refuses with a *ConversationBusyError and deletes nothing. One that does
// not exist, or was deleted already, is ErrNotFound.
func (h *Harness) DeleteConversation(ctx context.Context, id storage.ID) error {
	_, err := h.commit(ctx, func(tx *Tx) error {
		if got, err := h.Store().GetConversations(ctx, []storage.ID{id}); err != nil {
			return err
		} else if _, ok := got[id]; !ok {
			return fmt.Errorf("%w: conversation %d", ErrNotFound, id)
		}
		subtree, err := h.ownedSubtree(ctx, id)
		if err != nil {
			return err
		}
		for _, c := range subtree {
			if len(h.d.byConv[c]) > 0 || plant.On("delete-refuses-idle") {
				return &ConversationBusyError{Conversation: id, Busy: c}
			}
			for _, task := range h.d.runningIDs() {
				if h.d.running[task].conv == c {
					return &ConversationBusyError{Conversation: id, Busy: c, Task: task}
				}
			}
		}
		tx.DeleteConversation(id) // its cached context goes when the commit lands (afterCommit)
		return nil
	})
	return err
}

// ownedSubtree is a conversation and every conversation owned, directly or
// not, by its tasks.
func (h *Harness) ownedSubtree(ctx context.Context, id storage.ID) ([]storage.ID, error) {
	out := []storage.ID{id}
	for i := 0; i < len(out); i++ {
		owned, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			return h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c, OwnedFrom: out[i]})
		})
		if err != nil {
			return nil, err
		}
		for _, c := range owned {
			out = append(out, c.ID)
		}
	}
	return out, nil
}

// DriverStats is a snapshot of the driver's process state, for monitoring
// and for tests that hold the driver to its memory bounds.
type DriverStats struct {
	Live    int // non-terminal tasks
	Running int // invocation slots held
	Waiters int // temporary drive waiters
	// TaskWaiters are the pending TaskRuntime.WaitForTask calls.
	TaskWaiters int
	Links       int // cached ownership links (conversations and tasks)
}

// Stats reads the driver's state on the line.
func (h *Harness) Stats(ctx context.Context) (DriverStats, error) {
	var st DriverStats
	err := h.line.Read(ctx, func(context.Context) error {
		d := h.d
		st = DriverStats{Live: len(d.live), Running: len(d.running), Waiters: len(d.waiters), Links: len(d.convOwner) + len(d.taskConv)}
		for _, ws := range d.tasksW {
			st.TaskWaiters += len(ws)
		}
		return nil
	})
	return st, err
}
