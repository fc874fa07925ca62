package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// watchCommitsMax bounds the commits a watcher may have queued; a listener
// that falls further behind gets a fault event and must resnapshot.
const watchCommitsMax = 1024

// watchQueueMax is the session's bound on a watch's queued commits.
func (h *Harness) watchQueueMax() int {
	if h.opts.WatchQueueMax > 0 {
		return h.opts.WatchQueueMax
	}
	if plant.On("watch-default-bound-tiny") {
		return 2
	}
	return watchCommitsMax
}

// ErrWatchLagging is the fault a lagging watcher receives.
var ErrWatchLagging = errors.New("core: watch: the listener fell behind; resnapshot")

// WatchOptions configures a conversation watch.
type WatchOptions struct {
	// Tail is how many of the newest entries the view keeps.
	Tail int
	// Values are addresses to watch besides the registered kinds' config;
	// an unbound conversation address binds to the watched conversation.
	Values []storage.Address
}

// Watch is one subscription (§9.4): a view captured on the line together
// with the subscription, and the events that keep it current, delivered
// per commit, in commit order, by one actor of its own. WatchHandle
// watches a conversation, SessionWatchHandle the session.
type Watch[V any, E any] struct {
	h       *Harness
	name    string
	conv    storage.ID                 // the watched conversation; 0 for the session
	tail    int                        // conversation watches: entries kept
	values  map[string]storage.Address // watched values by canonical string
	apply   func(*V, E) error
	capture func(ctx context.Context) (*V, error)

	// mu guards what follows; it is never held across a wait or a call
	// out, so it never blocks an actor.
	mu       sync.Mutex
	view     *V
	queue    [][]E
	wake     Event
	gen      int
	lagged   bool
	closed   bool
	started  bool
	listener func(E)
	done     Event
	lagEvent E
}

// WatchHandle is a conversation watch.
type WatchHandle = Watch[ConversationView, ConversationEvent]

func newWatch[V, E any](h *Harness, name string, conv storage.ID, apply func(*V, E) error, lag E) *Watch[V, E] {
	return &Watch[V, E]{h: h, name: name, conv: conv, values: map[string]storage.Address{}, apply: apply, lagEvent: lag,
		wake: h.rt.NewEvent(name), done: h.rt.NewEvent(name + ":done")}
}

// Watch captures a conversation's view and subscribes to its events in one
// step on the line, so no commit falls between them.
func (h *Harness) Watch(ctx context.Context, conv storage.ID, opts WatchOptions) (*WatchHandle, error) {
	w := newWatch(h, fmt.Sprintf("watch:%d", conv), conv, ApplyEvent, ConversationEvent{Type: EventFault, Error: ErrWatchLagging.Error()})
	w.tail = max(opts.Tail, 0)
	w.capture = func(ctx context.Context) (*ConversationView, error) { return h.captureView(ctx, w) }
	for _, name := range h.kinds.TaskNames() {
		k, _ := h.kinds.Task(name)
		if d, ok := k.(ConfigDeclarer); ok {
			for _, a := range d.Config() {
				if a.Scope.Kind == storage.ScopeConversation {
					w.watch(a)
				}
			}
		}
	}
	for _, a := range opts.Values {
		w.watch(a)
	}
	err := h.line.Do(ctx, func() (func(), error) {
		if h.d.closingOrClosed() {
			return nil, ErrClosed
		}
		v, err := w.capture(ctx)
		if err != nil {
			return nil, err
		}
		w.view = v
		if h.watchers == nil {
			h.watchers = map[storage.ID][]*WatchHandle{}
		}
		h.watchers[conv] = append(h.watchers[conv], w)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Watch[V, E]) watch(a storage.Address) {
	if a.Scope.Kind == storage.ScopeConversation && a.Scope.ID == 0 {
		a.Scope.ID = w.conv
	}
	w.values[a.String()] = a
}

// View returns the current view. Inside the listener it is already folded
// with the event being delivered. The caller must not modify it.
func (w *Watch[V, E]) View() *V {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view
}

// ErrWatchStarted is what a second Start of one watch returns: a watch has
// one listener, and its events go out once.
var ErrWatchStarted = errors.New("core: the watch was already started")

// Start delivers everything since the capture, then live events, to
// listener, on an actor of its own started from ctx's actor; cancelling
// ctx does not stop the watch (Unsubscribe does). It runs once: a second
// call returns ErrWatchStarted and changes nothing.
func (w *Watch[V, E]) Start(ctx context.Context, listener func(E)) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return ErrWatchStarted
	}
	w.started, w.listener = true, listener
	w.mu.Unlock()
	w.h.rt.Go(context.WithoutCancel(ctx), w.name, w.deliver)
	return nil
}

// deliver is the watch's actor: one commit's events at a time, each folded
// into the view before the listener sees it.
func (w *Watch[V, E]) deliver(ctx context.Context) {
	defer w.done.Set()
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			if w.closed {
				w.mu.Unlock()
				return
			}
			wake := w.wake
			w.mu.Unlock()
			_ = wake.Wait(ctx)
			continue
		}
		batch, gen := w.queue[0], w.gen
		w.queue = w.queue[1:]
		w.mu.Unlock()
		for _, e := range batch {
			w.mu.Lock()
			if w.gen != gen || (w.closed && w.listener == nil) {
				w.mu.Unlock()
				break // a resnapshot already holds the rest of this commit
			}
			err := w.apply(w.view, e)
			listener := w.listener
			w.mu.Unlock()
			if err != nil {
				w.h.report(fmt.Errorf("core: %s: %w", w.name, err))
			}
			if !w.call(listener, e) {
				return
			}
		}
	}
}

// call runs the listener; a panic is reported and unsubscribes the watch
// without harming other listeners or the line.
func (w *Watch[V, E]) call(listener func(E), e E) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			RethrowInvariant(p) // a listener that committed: the harness's bug
			w.h.report(fmt.Errorf("core: %s: the listener panicked: %v", w.name, p))
			w.Unsubscribe()
			ok = false
		}
	}()
	listener(e)
	return true
}

// Resnapshot captures a fresh view for the same subscription; events
// already queued are dropped, since the capture holds them. It may be
// called from inside the listener.
func (w *Watch[V, E]) Resnapshot(ctx context.Context) (*V, error) {
	var v *V
	err := w.h.line.Do(ctx, func() (func(), error) {
		var err error
		if v, err = w.capture(ctx); err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.view, w.queue, w.lagged = v, nil, false
		w.gen++
		w.mu.Unlock()
		return nil, nil
	})
	return v, err
}

// Unsubscribe ends the watch: nothing more is delivered.
func (w *Watch[V, E]) Unsubscribe() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed, w.queue = true, nil
		w.listener = nil
		w.wake.Set()
	}
}

// enqueue queues one commit's events. It runs on the line.
func (w *Watch[V, E]) enqueue(events []E) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed || w.lagged:
		return
	case len(w.queue) >= w.h.watchQueueMax():
		w.queue, w.lagged = [][]E{{w.lagEvent}}, true
	default:
		if plant.On("watch-drops-event") && len(events) > 2 {
			events = events[:len(events)-1]
		}
		w.queue = append(w.queue, events)
	}
	w.wake.Set()
	w.wake = w.h.rt.NewEvent(w.name)
}

// end queues a last event (fault or closed) and ends the subscription once
// it is delivered. It runs on the line.
func (w *Watch[V, E]) end(e E) {
	w.mu.Lock()
	if !w.closed {
		w.queue = append(w.queue, []E{e})
		w.closed = true
		w.wake.Set()
	}
	w.mu.Unlock()
}

// captureView reads a conversation's view on the line.
func (h *Harness) captureView(ctx context.Context, w *WatchHandle) (*ConversationView, error) {
	store := h.Store()
	got, err := store.GetConversations(ctx, []storage.ID{w.conv})
	if err != nil {
		return nil, err
	}
	rec, ok := got[w.conv]
	if !ok {
		return nil, fmt.Errorf("%w: conversation %d", ErrNotFound, w.conv)
	}
	v := &ConversationView{Conversation: rec, Tail: w.tail, ReadAt: store.LastSeq(),
		Entries: []*storage.Entry{}, Context: []storage.ID{}, Tasks: []*storage.Task{}, Inbox: []storage.Element{},
		Values: map[string]json.RawMessage{}, Previews: map[storage.ID]any{}, Faulted: h.d.phase == phaseFaulted || plant.On("capture-says-faulted")}
	if w.tail > 0 {
		p, err := store.ScanEntries(ctx, storage.EntryQuery{ConversationID: w.conv,
			Cursor: storage.Cursor{Before: v.ReadAt + 1, Limit: min(w.tail, storage.PageLimitMax)}})
		if err != nil {
			return nil, err
		}
		v.Entries = append(v.Entries, p.Items...) // a backward page is in transcript order
	}
	c, err := h.currentContext(ctx, store, w.conv)
	if err != nil {
		return nil, err
	}
	v.Context = c.IDs()
	for _, id := range sortedIDs(h.d.byConv[w.conv]) {
		t := h.d.live[id].task
		v.Tasks = append(v.Tasks, cloneTask(t))
		if !h.published[id] {
			continue // its first flush, a base, brings it
		}
		p, err := h.previewOf(ctx, t)
		if err != nil {
			return nil, err
		}
		if p != nil {
			if err := h.current(ctx, id, p); err != nil {
				return nil, err
			}
			v.Previews[id] = p.tr.Published() // what the flushes delivered; the producer may be mid-window
			if plant.On("watch-capture-unflushed-preview") {
				v.Previews[id] = p.tr.State()
			}
			h.assertDurablePreview(ctx, id, p, v.Previews[id], "captured preview")
		}
	}
	if inbox := h.opts.Watched.Inbox; inbox.Namespace != "" {
		inbox.Scope.ID = w.conv
		elems, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
			return store.ReadList(ctx, inbox, storage.ListQuery{Cursor: c})
		})
		if err != nil {
			return nil, err
		}
		v.Inbox = append(v.Inbox, elems...)
	}
	if err := w.readValues(ctx, store, v.Values); err != nil {
		return nil, err
	}
	return v, nil
}

// readValues reads the watched values that exist into out, by key.
func (w *Watch[V, E]) readValues(ctx context.Context, store storage.Storage, out map[string]json.RawMessage) error {
	for key, a := range w.values {
		ver, ok, err := store.GetValue(ctx, a, 0)
		if err != nil {
			return err
		}
		if ok {
			out[key] = ver.Value
		}
	}
	return nil
}

// valueChange is a watched value a batch set or deleted.
type valueChange struct {
	key     string
	value   json.RawMessage // nil when deleted
	deleted bool
}

// valueChanges lists the batch's writes to the watched values, in order.
func (w *Watch[V, E]) valueChanges(writes []storage.Write) []valueChange {
	var out []valueChange
	for _, vw := range writes {
		for key, a := range w.values {
			if a.Ref() != vw.Addr.Ref() {
				continue
			}
			c := valueChange{key: key, deleted: vw.Type == storage.WriteValueDelete}
			if !c.deleted {
				c.value = vw.Value
			}
			out = append(out, c)
		}
	}
	return out
}

// isClosed reports whether the watch was unsubscribed or ended.
func (w *Watch[V, E]) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// watchEvents derives each watched conversation's events from a main batch
// and queues them. It runs on the line before the driver applies the batch,
// so the live map still holds every task's previous record.
func (h *Harness) watchEvents(ctx context.Context, batch storage.CommitBatch, r storage.Range) {
	h.pruneWatchers()
	if len(h.watchers) == 0 {
		return
	}
	type convEvents struct {
		events  []ConversationEvent
		inbox   []InboxOp
		context bool
		values  []storage.Write
	}
	per := map[storage.ID]*convEvents{}
	of := func(conv storage.ID) *convEvents {
		if _, watched := h.watchers[conv]; !watched {
			return nil
		}
		ce := per[conv]
		if ce == nil {
			ce = &convEvents{}
			per[conv] = ce
		}
		return ce
	}
	tasks := map[storage.ID]*storage.Task{} // as this batch leaves them
	current := func(id storage.ID) *storage.Task {
		if t := tasks[id]; t != nil && !plant.On("watch-previous-skips-batch") {
			return t
		}
		if lt := h.d.live[id]; lt != nil {
			return lt.task
		}
		return nil
	}
	appended := map[storage.ID]int{} // inbox element → index of its append op
	inbox := h.opts.Watched.Inbox
	for i := range batch.Writes {
		w := &batch.Writes[i]
		seq := r.First + storage.ID(i)
		switch w.Type {
		case storage.WriteEntry:
			if ce := of(w.Entry.ConversationID); ce != nil {
				ce.events = append(ce.events, ConversationEvent{Type: EventEntry, Entry: w.Entry})
				ce.context = ce.context || w.Entry.IsHead() || len(w.Entry.Edits) > 0
			}
		case storage.WriteTask:
			t := cloneTask(w.Task)
			tasks[t.ID] = t
			if ce := of(t.ConversationID); ce != nil {
				ce.events = append(ce.events, ConversationEvent{Type: EventTaskStart, Task: t})
			}
		case storage.WritePatch, storage.WriteSettle:
			prev := current(w.ID)
			if prev == nil {
				continue
			}
			next := applyTaskWrite(prev, w)
			tasks[w.ID] = next
			if ce := of(next.ConversationID); ce != nil {
				if w.Type == storage.WriteSettle {
					ce.events = append(ce.events, ConversationEvent{Type: EventTaskEnd, Task: next})
				} else {
					if plant.On("watch-previous-is-next") {
						prev = next
					}
					ce.events = append(ce.events, ConversationEvent{Type: EventTaskUpdate, Task: next, Previous: prev})
				}
			}
		case storage.WriteValueSet, storage.WriteValueDelete, storage.WriteListAppend, storage.WriteListRemove, storage.WriteListClear:
			a := w.Addr
			if a.Scope.Kind != storage.ScopeConversation {
				continue
			}
			ce := of(a.Scope.ID)
			if ce == nil {
				continue
			}
			if inbox.Namespace != "" && a.Namespace == inbox.Namespace && a.Key == inbox.Key {
				switch w.Type {
				case storage.WriteListAppend:
					appended[seq] = len(ce.inbox)
					ce.inbox = append(ce.inbox, InboxOp{Type: "append", Item: &storage.Element{ID: seq, Value: w.Value}})
				case storage.WriteListRemove:
					if j, ok := appended[w.Element]; ok {
						ce.inbox[j].Type = "" // appended and removed in one commit: nothing to tell
					} else {
						ce.inbox = append(ce.inbox, InboxOp{Type: "remove", ID: w.Element})
					}
				case storage.WriteListClear:
					ce.inbox = append(ce.inbox, InboxOp{Type: "clear"})
				}
				continue
			}
			if w.Type == storage.WriteValueSet || w.Type == storage.WriteValueDelete {
				ce.values = append(ce.values, *w)
			}
		}
	}
	for conv, ce := range per {
		var inbox []InboxOp
		for _, op := range ce.inbox {
			if op.Type != "" {
				inbox = append(inbox, op)
			}
		}
		common := ce.events
		if len(inbox) > 0 {
			common = append(common, ConversationEvent{Type: EventInbox, Inbox: inbox})
		}
		if ce.context {
			c, err := h.currentContext(ctx, h.Store(), conv)
			if err == nil {
				common = append(common, ConversationEvent{Type: EventContext, IDs: c.IDs()})
			}
		}
		for _, w := range h.watchers[conv] {
			events := slices.Clone(common)
			for _, c := range w.valueChanges(ce.values) {
				events = append(events, ConversationEvent{Type: EventValue, Addr: c.key, Value: c.value, Deleted: c.deleted && !plant.On("watch-delete-sends-value")})
			}
			for i := range events {
				events[i].ReadAt = r.Last
			}
			w.enqueue(events)
		}
	}
}

// watchOutput queues a task's preview flush to the watchers of its
// conversation. It runs on the line.
func (h *Harness) watchOutput(task storage.ID, ops []delta.Op, readAt storage.ID) {
	lt := h.d.live[task]
	if lt == nil {
		return
	}
	for _, w := range h.watchers[lt.task.ConversationID] {
		w.enqueue([]ConversationEvent{{Type: EventTaskOutput, TaskID: task, Ops: ops, ReadAt: readAt}})
	}
}

// endWatchers ends every watch with a last event. It runs on the line.
func (h *Harness) endWatchers(e ConversationEvent, se SessionEvent) {
	for conv, ws := range h.watchers {
		for _, w := range ws {
			w.end(e)
		}
		delete(h.watchers, conv)
	}
	for _, w := range h.sessionWatchers {
		w.end(se)
	}
	h.setSessionWatchers(nil)
}

// pruneWatchers forgets unsubscribed watches.
func (h *Harness) pruneWatchers() {
	for conv, ws := range h.watchers {
		ws = slices.DeleteFunc(ws, (*WatchHandle).isClosed)
		if len(ws) == 0 {
			delete(h.watchers, conv)
		} else {
			h.watchers[conv] = ws
		}
	}
}
