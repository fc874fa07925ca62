package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// Conversation is a handle on one conversation. It holds no state of its
// own beyond the id: every read and write goes to storage or the line.
type Conversation struct {
	h  *Harness
	ID storage.ID
}

// Harness is the session the handle belongs to.
func (c *Conversation) Harness() *Harness { return c.h }

// Snapshot reads the conversation record.
func (c *Conversation) Snapshot(ctx context.Context) (storage.Conversation, error) {
	got, err := c.h.Store().GetConversations(ctx, []storage.ID{c.ID})
	if err != nil {
		return storage.Conversation{}, err
	}
	rec, ok := got[c.ID]
	if !ok {
		return storage.Conversation{}, fmt.Errorf("%w: conversation %d", ErrNotFound, c.ID)
	}
	if plant.On("snapshot-drops-parent") {
		rec.Parent = nil
	}
	return rec, nil
}

// ConversationTx is a Tx with the conversation bound: entries, tasks and
// unbound conversation addresses go to it.
type ConversationTx struct {
	*Tx
	ID storage.ID
}

// Entry appends an entry to the bound conversation.
func (tx *ConversationTx) Entry(kind storage.Kinder, d EntryDraft) storage.ID {
	return tx.Tx.Entry(kind, tx.ID, d)
}

// Task creates a task in the bound conversation.
func (tx *ConversationTx) Task(kind storage.Kinder, spec TaskSpec) storage.ID {
	spec.ConversationID = tx.ID
	return tx.Tx.Task(kind, spec)
}

// Bind binds an unbound conversation address to this conversation.
func (tx *ConversationTx) Bind(a storage.Address) storage.Address {
	if a.Scope.Kind == storage.ScopeConversation && a.Scope.ID == 0 {
		a.Scope.ID = tx.ID
	}
	if plant.On("conv-tx-binds-session") && a.Scope.Kind == storage.ScopeSession {
		a.Scope = storage.Scope{Kind: storage.ScopeConversation, ID: tx.ID}
	}
	return a
}

// SetValue sets a value; an unbound conversation address binds to this conversation.
func (tx *ConversationTx) SetValue(a storage.Address, v any) { tx.Tx.SetValue(tx.Bind(a), v) }

// DeleteValue deletes a value.
func (tx *ConversationTx) DeleteValue(a storage.Address) { tx.Tx.DeleteValue(tx.Bind(a)) }

// Append appends to a list.
func (tx *ConversationTx) Append(a storage.Address, v any) storage.ID {
	return tx.Tx.Append(tx.Bind(a), v)
}

// Remove removes a list element.
func (tx *ConversationTx) Remove(a storage.Address, id storage.ID) {
	if plant.On("conv-tx-remove-unbound") {
		tx.Tx.Remove(a, id)
		return
	}
	tx.Tx.Remove(tx.Bind(a), id)
}

// Clear clears a list.
func (tx *ConversationTx) Clear(a storage.Address) { tx.Tx.Clear(tx.Bind(a)) }

// GetValue reads committed state.
func (tx *ConversationTx) GetValue(a storage.Address, at storage.ID) (storage.Version, bool, error) {
	return tx.Tx.GetValue(tx.Bind(a), at)
}

// ReadList reads a committed list.
func (tx *ConversationTx) ReadList(a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	return tx.Tx.ReadList(tx.Bind(a), q)
}

// Commit runs plan as one commit with this conversation bound.
func (c *Conversation) Commit(ctx context.Context, plan func(tx *ConversationTx) error) (storage.Range, error) {
	return c.h.commit(ctx, func(tx *Tx) error { return plan(&ConversationTx{Tx: tx, ID: c.ID}) })
}

// Drive attaches this conversation (and everything its tasks own) and waits
// until it has no live foreground task ("idle") or the session closes.
// Cancelling ctx removes only this wait.
func (c *Conversation) Drive(ctx context.Context) (DriveResult, error) {
	return c.h.drive(ctx, c.ID, false)
}

// Abort marks, in one commit, the conversation's foreground set: its live
// foreground tasks and, through live foreground owners, those of the
// conversations they own (§6.3). Options.ConversationAbort runs in the same
// commit with the conversations the set touches (the agent cancels their
// queued steer and followUp input there).
func (c *Conversation) Abort(ctx context.Context) error {
	_, err := c.h.commit(ctx, func(tx *Tx) error {
		convs := tx.MarkForeground(c.ID)
		if then := c.h.opts.ConversationAbort; then != nil {
			return then(tx, convs)
		}
		return nil
	})
	return err
}

// CheckDrive reports the error a Drive of this conversation from ctx would
// return because the calling task would wait for itself (a *SelfWaitError),
// without driving or attaching anything; a ctx without a task identity is
// never rejected. A verb that commits before it drives (the agent's
// Prompt) checks first, so nothing is accepted that could not be waited on.
func (c *Conversation) CheckDrive(ctx context.Context) error {
	inv := invocationOf(ctx)
	if inv == nil || plant.On("check-drive-never-refuses") {
		return nil
	}
	return c.h.line.Read(ctx, func(context.Context) error { return c.h.d.checkDrive(inv, c.ID) })
}

// ForkStart, as Fork's point, forks at the start of the transcript: the
// fork inherits no entry and no rewindable state, only its provenance.
const ForkStart storage.ID = 0

// ForkOptions configures Fork.
type ForkOptions struct {
	// Abort marks the source's foreground set in the same commit that
	// creates the fork ("go back to that point").
	Abort bool
	// Values are conversation values (unbound addresses, or bound to the
	// source) whose current value in the source is written into the fork
	// when it is created: how sticky state, which forks do not inherit,
	// is carried over, or a rewindable value is taken as it is now rather
	// than as of the fork point. A value the source does not have is
	// skipped.
	Values []storage.Address
}

// Fork creates a conversation whose transcript is this one's through entry
// at (ForkStart: nothing of it), shared by reference, with the rewindable
// state in force there and the values opts carries over.
func (c *Conversation) Fork(ctx context.Context, at storage.ID, opts ForkOptions) (*Conversation, error) {
	for _, a := range opts.Values {
		if a.Scope.Kind != storage.ScopeConversation || (a.Scope.ID != 0 && a.Scope.ID != c.ID) {
			return nil, fmt.Errorf("core: fork of conversation %d: %s is not one of its values", c.ID, a)
		}
	}
	var id storage.ID
	_, err := c.h.commit(ctx, func(tx *Tx) error {
		id = tx.Fork(c.ID, at)
		for _, a := range opts.Values {
			a.Scope.ID = c.ID
			now := storage.ID(0)
			if plant.On("fork-carry-at-fork-point") && a.Rewind {
				now = at
			}
			v, ok, err := tx.GetValue(a, now)
			if err != nil {
				return err
			}
			if ok && !(plant.On("fork-carry-skips-sticky") && !a.Rewind) {
				a.Scope.ID = id
				tx.SetValue(a, v.Value)
			}
		}
		if opts.Abort {
			tx.MarkForeground(c.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Conversation{h: c.h, ID: id}, nil
}

// Config is the typed view of the values a task kind declares (§5.2), bound
// to one conversation.
type Config struct {
	c    *Conversation
	kind TaskKind
}

// Config returns the config handle of a kind, as registered now.
func (c *Conversation) Config(kind storage.Kinder) (Config, error) {
	k, ok := c.h.kinds.Task(kind.Kind())
	if !ok {
		return Config{}, fmt.Errorf("core: task kind %q is not registered", kind.Kind())
	}
	return Config{c: c, kind: k}, nil
}

func (cfg Config) declared() map[string]storage.Address {
	if d, ok := cfg.kind.(ConfigDeclarer); ok {
		return d.Config()
	}
	return nil
}

// Get reads every declared value, by name; absent values are omitted.
func (cfg Config) Get(ctx context.Context) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	names := make([]string, 0)
	for name := range cfg.declared() {
		names = append(names, name)
	}
	slices.Sort(names)
	err := cfg.c.h.line.Read(ctx, func(ctx context.Context) error {
		for _, name := range names {
			a := cfg.declared()[name]
			a.Scope.ID = cfg.c.ID
			v, ok, err := cfg.c.h.Store().GetValue(ctx, a, 0)
			if err != nil {
				return err
			}
			if ok {
				out[name] = v.Value
				if plant.On("config-get-first-only") {
					return nil
				}
			}
		}
		return nil
	})
	return out, err
}

// Set writes some declared values in one commit. An unknown name rejects.
func (cfg Config) Set(ctx context.Context, values map[string]any) error {
	decl := cfg.declared()
	names := make([]string, 0, len(values))
	for name := range values {
		if _, ok := decl[name]; !ok {
			return fmt.Errorf("core: kind %q declares no config value %q", cfg.kind.Kind(), name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	_, err := cfg.c.Commit(ctx, func(tx *ConversationTx) error {
		for _, name := range names {
			tx.SetValue(decl[name], values[name])
		}
		return nil
	})
	return err
}

// Hooks returns the registry of hook handlers scoped to this conversation.
func (c *Conversation) Hooks() ScopedHooks { return ScopedHooks{h: c.h, conv: c.ID} }
