package boundary

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// The transition (DESIGN §11): a classified boundary becomes at most one
// commit on the session's line. The state it keeps:
var (
	// CurrentValue is pi.session.current: the conversation a host uses
	// when a request names none.
	CurrentValue = storage.SessionValue[storage.ID]("pi.session.current")
	// BindingValue, keyed provider/session id, is the conversation a
	// provider session is bound to. It is what makes a repeated delivery,
	// or two racing ones, a no-op: the commit that binds checks it on the
	// line.
	BindingValue = storage.SessionValue[Binding]("pi.session.binding")
	// StoppedValue marks a conversation a clear ended, and why.
	StoppedValue = storage.ConversationValue[Stopped]("pi.session.stopped", storage.Sticky)
)

// ReasonProviderClear is why a clear stops the old conversation.
const ReasonProviderClear = "PROVIDER_SESSION_CLEAR"

// Binding is where a provider session is bound, and how it got there.
type Binding struct {
	Conversation storage.ID `json:"conversation"`
	Kind         Kind       `json:"kind"`
	// Entry is the provider_boundary entry a clear wrote (0 otherwise).
	Entry storage.ID `json:"entry,omitempty"`
	// Previous is the conversation a clear or fork left.
	Previous storage.ID `json:"previous,omitempty"`
}

// Stopped is the mark on a conversation a clear ended.
type Stopped struct {
	Reason    string     `json:"reason"`
	Successor storage.ID `json:"successor"`
	Provider  Provider   `json:"provider"`
	SessionID string     `json:"sessionId"`
}

// BoundaryData is a provider_boundary entry's data, schema version 1: the
// first entry of the conversation a clear starts, data only, never model
// context.
type BoundaryData struct {
	Schema    int        `json:"schema"`
	Provider  Provider   `json:"provider"`
	Source    string     `json:"source"`
	Previous  storage.ID `json:"previous"`
	SessionID string     `json:"sessionId"`
	Inferred  bool       `json:"inferred,omitempty"`
}

// EntryKind is the provider_boundary entry kind, typed: the kernel
// registers it among its built-in kinds (core.ProviderBoundaryKind).
var EntryKind = storage.DefineEntryKind[BoundaryData](core.ProviderBoundaryKind.Kind())

// Transition is what Apply did: the binding the provider session has now,
// and whether this delivery changed anything.
type Transition struct {
	Boundary Boundary `json:"boundary"`
	Binding  Binding  `json:"binding"`
	// Changed is false for a delivery that found its binding already in
	// place (a repeat) and for a boundary that changes nothing (compact,
	// ui-only, none).
	Changed bool `json:"changed"`
}

func bindingAddr(p Provider, sessionID string) storage.Value[Binding] {
	return BindingValue.WithKey(string(p) + "/" + sessionID)
}

// CurrentGoneError is what Apply returns for a boundary that would bind a
// provider session when the current conversation (pi.session.current, or
// the root) was deleted: no transition starts from a conversation that is
// gone, so nothing is written until the host makes another one current.
// A delivery for a provider session bound already still returns its
// binding.
type CurrentGoneError struct {
	Conversation storage.ID
}

func (e *CurrentGoneError) Error() string {
	return fmt.Sprintf("boundary: the current conversation %d (%s) was deleted", e.Conversation, CurrentValue.Namespace)
}

// Unwrap makes the error core.ErrNotFound as well.
func (e *CurrentGoneError) Unwrap() error { return core.ErrNotFound }

// Current reads pi.session.current; the root when it was never set. It
// may name a conversation deleted since (see CurrentGoneError).
func Current(ctx context.Context, h *core.Harness) (storage.ID, error) {
	v, ok, err := h.Store().GetValue(ctx, CurrentValue.Address, 0)
	if err != nil || !ok {
		return h.Root().ID, err
	}
	var id storage.ID
	if err := json.Unmarshal(v.Value, &id); err != nil {
		return 0, fmt.Errorf("boundary: %s: %w", CurrentValue.Address, err)
	}
	return id, nil
}

// Apply carries out a boundary in one commit on the line:
//
//   - clear: the current conversation is marked stopped
//     (PROVIDER_SESSION_CLEAR) and its foreground work gets abort marks; a
//     new independent conversation is created, its first entry the
//     provider_boundary entry; it becomes current; the provider session is
//     bound to it;
//   - startup and resume: the provider session is bound to the current
//     conversation (no new conversation);
//   - fork: a fork of the current conversation at its last entry (at its
//     start when it has none) is created, bound to the new provider
//     session and made current;
//   - compact, ui-only, none: nothing.
//
// A provider session already bound commits nothing and returns the binding
// it has, so a repeated delivery, and either of two racing ones, changes
// nothing the second time. Nothing is ever deleted. A current conversation
// the host deleted is a *CurrentGoneError, and nothing is written.
func Apply(ctx context.Context, h *core.Harness, b Boundary) (Transition, error) {
	tr := Transition{Boundary: b}
	switch b.Kind {
	case Compact, UIOnly, None:
		return tr, nil
	case Startup, Resume, Clear, Fork:
	default:
		return tr, &PayloadError{Provider: b.Provider, Field: "kind", Reason: fmt.Sprintf("unknown boundary kind %q", b.Kind)}
	}
	if b.SessionID == "" {
		return tr, &PayloadError{Provider: b.Provider, Field: "sessionId", Reason: "a boundary without a provider session"}
	}
	_, err := h.Commit(ctx, func(tx *core.Tx) error {
		tr.Changed = false
		addr := bindingAddr(b.Provider, b.SessionID)
		if was, bound, err := core.TxValue(tx, addr).Get(0); err != nil || bound && !plant.On("boundary-repeat-rebinds") {
			tr.Binding = was
			return err
		}
		cur, err := currentIn(tx, h)
		if err != nil {
			return err
		}
		if got, err := h.Store().GetConversations(ctx, []storage.ID{cur}); err != nil {
			return err
		} else if _, ok := got[cur]; !ok && !plant.On("boundary-from-deleted-current") {
			return &CurrentGoneError{Conversation: cur}
		}
		bind := Binding{Conversation: cur, Kind: b.Kind}
		switch b.Kind {
		case Clear:
			next := tx.CreateConversation(core.ConversationSpec{})
			tx.MarkForeground(cur)
			core.TxValue(tx, StoppedValue.In(cur)).Set(Stopped{Reason: ReasonProviderClear, Successor: next, Provider: b.Provider, SessionID: b.SessionID})
			bind.Entry = tx.Entry(EntryKind, next, core.EntryDraft{Data: BoundaryData{Schema: 1, Provider: b.Provider, Source: b.Source,
				Previous: cur, SessionID: b.SessionID, Inferred: b.Inferred}})
			bind.Conversation, bind.Previous = next, cur
			if !plant.On("boundary-clear-keeps-current") {
				core.TxValue(tx, CurrentValue).Set(next)
			}
		case Fork:
			at, err := lastEntry(tx, cur) // core.ForkStart for an empty one
			if err != nil {
				return err
			}
			if plant.On("boundary-fork-at-start") {
				at = core.ForkStart
			}
			fork := tx.Fork(cur, at)
			bind.Conversation, bind.Previous = fork, cur
			core.TxValue(tx, CurrentValue).Set(fork)
		}
		core.TxValue(tx, addr).Set(bind)
		tr.Binding, tr.Changed = bind, true
		return tx.Err()
	})
	return tr, err
}

// currentIn is pi.session.current as committed, read on the line.
func currentIn(tx *core.Tx, h *core.Harness) (storage.ID, error) {
	cur, ok, err := core.TxValue(tx, CurrentValue).Get(0)
	if err != nil || ok {
		return cur, err
	}
	return h.Root().ID, nil
}

// lastEntry is conv's newest entry (0 for none), read on the line.
func lastEntry(tx *core.Tx, conv storage.ID) (storage.ID, error) {
	page, err := tx.Entries(conv, storage.Cursor{Before: storage.ID(1) << 62, Limit: 1})
	if err != nil || len(page.Items) == 0 {
		return 0, err
	}
	return page.Items[len(page.Items)-1].ID, nil
}
