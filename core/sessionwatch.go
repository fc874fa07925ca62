package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// SessionView is what is not one conversation's (§9.4): the conversations,
// session values (the registered usage totals among them), faulted and
// readAt.
type SessionView struct {
	Conversations []storage.Conversation     `json:"conversations"`
	Values        map[string]json.RawMessage `json:"values"`
	Faulted       bool                       `json:"faulted"`
	ReadAt        storage.ID                 `json:"readAt"`
}

// Session event types.
const (
	SessionEventConversation = "conversation"
	SessionEventValue        = "value"
	SessionEventUsage        = "usage"
	SessionEventReport       = "report"
	SessionEventFault        = "fault"
	SessionEventClosed       = "closed"
)

// SessionEvent is one change to a session view; Type selects the fields.
type SessionEvent struct {
	Type string `json:"type"`
	// conversation: the record and "created" or "deleted".
	Conversation *storage.Conversation `json:"conversation,omitempty"`
	Change       string                `json:"change,omitempty"`
	// value: the canonical address, the value, or Deleted.
	Addr    string          `json:"addr,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Deleted bool            `json:"deleted,omitempty"`
	// usage: the row appended to the registered usage list and, under
	// Addr, the registered totals value as the row's batch left it (absent
	// when the session has none yet). The kernel keeps both as JSON; the
	// agent package decodes them (agent.UsageOf).
	Row    json.RawMessage `json:"row,omitempty"`
	Totals json.RawMessage `json:"totals,omitempty"`
	// report and fault: what failed, and where when known.
	Task   storage.ID `json:"task,omitempty"`
	Kind   string     `json:"kind,omitempty"`
	Method string     `json:"method,omitempty"`
	Error  string     `json:"error,omitempty"`
	ReadAt storage.ID `json:"readAt,omitempty"`
}

// ApplySessionEvent folds one event into a session view; it needs no kinds.
func ApplySessionEvent(v *SessionView, e SessionEvent) error {
	switch e.Type {
	case SessionEventConversation:
		if e.Conversation == nil {
			return fmt.Errorf("core: conversation event without a conversation")
		}
		i, found := slices.BinarySearchFunc(v.Conversations, e.Conversation.ID, func(c storage.Conversation, id storage.ID) int { return cmpID(c.ID, id) })
		switch {
		case e.Change == "deleted" && found:
			v.Conversations = slices.Delete(v.Conversations, i, i+1)
		case e.Change == "created" && !found:
			v.Conversations = slices.Insert(v.Conversations, i, *e.Conversation)
		}
	case SessionEventValue, SessionEventUsage:
		if v.Values == nil {
			v.Values = map[string]json.RawMessage{}
		}
		switch {
		case e.Type == SessionEventUsage && e.Totals != nil:
			v.Values[e.Addr] = e.Totals
		case e.Type == SessionEventUsage:
		case e.Type == SessionEventValue && e.Deleted:
			delete(v.Values, e.Addr)
		case e.Type == SessionEventValue:
			v.Values[e.Addr] = e.Value
		}
	case SessionEventFault:
		v.Faulted = true
	case SessionEventReport, SessionEventClosed:
	default:
		return fmt.Errorf("core: unknown session event %q", e.Type)
	}
	if e.ReadAt > v.ReadAt {
		v.ReadAt = e.ReadAt
	}
	return nil
}

// SessionWatchHandle is a session watch.
type SessionWatchHandle = Watch[SessionView, SessionEvent]

// WatchSession captures the session view and subscribes to its events in
// one step on the line. values are session addresses to watch besides the
// registered usage totals (Options.Watched).
func (h *Harness) WatchSession(ctx context.Context, values ...storage.Address) (*SessionWatchHandle, error) {
	w := newWatch(h, "watch:session", 0, ApplySessionEvent, SessionEvent{Type: SessionEventFault, Error: ErrWatchLagging.Error()})
	if totals := h.opts.Watched.UsageTotals; totals.Namespace != "" {
		w.watch(totals)
	}
	for _, a := range values {
		w.watch(a)
	}
	w.capture = func(ctx context.Context) (*SessionView, error) { return h.captureSession(ctx, w) }
	err := h.line.Do(ctx, func() (func(), error) {
		if h.d.closingOrClosed() {
			return nil, ErrClosed
		}
		v, err := w.capture(ctx)
		if err != nil {
			return nil, err
		}
		w.view = v
		h.setSessionWatchers(append(h.sessionWatchers, w))
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (h *Harness) captureSession(ctx context.Context, w *SessionWatchHandle) (*SessionView, error) {
	store := h.Store()
	v := &SessionView{Conversations: []storage.Conversation{}, Values: map[string]json.RawMessage{},
		Faulted: h.d.phase == phaseFaulted, ReadAt: store.LastSeq()}
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	v.Conversations = append(v.Conversations, convs...)
	if err := w.readValues(ctx, store, v.Values); err != nil {
		return nil, err
	}
	return v, nil
}

// sessionEvents derives the session watchers' events from a main batch. It
// runs on the line after the batch is persisted.
func (h *Harness) sessionEvents(ctx context.Context, batch storage.CommitBatch, r storage.Range) {
	h.setSessionWatchers(slices.DeleteFunc(h.sessionWatchers, (*SessionWatchHandle).isClosed))
	if len(h.sessionWatchers) == 0 {
		return
	}
	var common []SessionEvent
	var values []storage.Write
	usage := h.opts.Watched
	totalsKey := usage.UsageTotals.String()
	var totals json.RawMessage
	totalsRead := false
	for i := range batch.Writes {
		w := &batch.Writes[i]
		switch {
		case w.Type == storage.WriteCreateConversation:
			c := *w.Conversation
			common = append(common, SessionEvent{Type: SessionEventConversation, Conversation: &c, Change: "created"})
		case w.Type == storage.WriteDeleteConversation:
			common = append(common, SessionEvent{Type: SessionEventConversation, Conversation: &storage.Conversation{ID: w.ID}, Change: "deleted"})
		case w.Addr == nil || w.Addr.Scope.Kind != storage.ScopeSession:
		case usage.UsageRows.Namespace != "" && w.Type == storage.WriteListAppend && w.Addr.Ref() == usage.UsageRows.Ref():
			if !totalsRead {
				v, ok, err := h.Store().GetValue(ctx, usage.UsageTotals, 0)
				if err != nil {
					continue
				}
				if ok {
					totals = v.Value
				}
				totalsRead = true
			}
			common = append(common, SessionEvent{Type: SessionEventUsage, Row: w.Value, Addr: totalsKey, Totals: totals})
		case (w.Type == storage.WriteValueSet || w.Type == storage.WriteValueDelete) && !plant.On("session-watch-drops-values"):
			values = append(values, *w)
		}
	}
	for _, w := range h.sessionWatchers {
		events := slices.Clone(common)
		for _, c := range w.valueChanges(values) {
			if c.key != totalsKey || usage.UsageRows.Namespace == "" || plant.On("session-totals-as-value") { // usage events carry the totals
				events = append(events, SessionEvent{Type: SessionEventValue, Addr: c.key, Value: c.value, Deleted: c.deleted})
			}
		}
		for i := range events {
			events[i].ReadAt = r.Last
		}
		w.enqueue(events)
	}
}

// reportToWatchers tells session watchers about a reported error.
func (h *Harness) reportToWatchers(err error) {
	e := SessionEvent{Type: SessionEventReport, Error: err.Error()}
	var fe *FaultError
	var he *HookError
	switch {
	case errors.As(err, &fe):
		e.Task, e.Kind, e.Method = fe.Task, fe.Kind, fe.Method
	case errors.As(err, &he):
		e.Task, e.Kind, e.Method = he.Task, he.Kind, he.Point
	}
	h.watchMu.Lock()
	ws := h.sessionWatchersCopy
	h.watchMu.Unlock()
	for _, w := range ws {
		w.enqueue([]SessionEvent{e})
	}
}

// setSessionWatchers replaces the session watchers, on the line, and the
// copy that reports (which happen off the line) read.
func (h *Harness) setSessionWatchers(ws []*SessionWatchHandle) {
	h.sessionWatchers = ws
	h.watchMu.Lock()
	h.sessionWatchersCopy = slices.Clone(ws)
	h.watchMu.Unlock()
}
