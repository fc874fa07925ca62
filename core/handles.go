package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// StateScope is where a value or list handle reads and writes: the harness
// (session state, and conversation addresses already bound to their
// conversation) or a conversation handle, which binds an unbound
// conversation address to itself. *Harness and *Conversation, and the
// agent's handles that embed them, are state scopes.
type StateScope interface {
	stateScope() (*Harness, storage.ID)
}

func (h *Harness) stateScope() (*Harness, storage.ID)      { return h, 0 }
func (c *Conversation) stateScope() (*Harness, storage.ID) { return c.h, c.ID }

// bindIn binds an unbound conversation address to the scope's conversation.
func bindIn(s StateScope, a storage.Address) (*Harness, storage.Address) {
	h, conv := s.stateScope()
	if a.Scope.Kind == storage.ScopeConversation && a.Scope.ID == 0 {
		a.Scope.ID = conv
	}
	return h, a
}

// ValueHandle reads and writes one value outside a commit (§9.1): each
// read is one point read of committed state, each write one commit.
type ValueHandle[T any] struct {
	h    *Harness
	addr storage.Address
}

// ValueOf is the handle of a typed value in a scope.
func ValueOf[T any](s StateScope, v storage.Value[T]) ValueHandle[T] {
	h, a := bindIn(s, v.Address)
	return ValueHandle[T]{h: h, addr: a}
}

// Value is the handle of the value at addr, as raw JSON.
func (h *Harness) Value(addr storage.Address) ValueHandle[json.RawMessage] {
	return ValueOf(h, storage.Value[json.RawMessage]{Address: addr})
}

// Value is the handle of the value at addr in this conversation, as raw
// JSON; an unbound conversation address is this conversation's.
func (c *Conversation) Value(addr storage.Address) ValueHandle[json.RawMessage] {
	return ValueOf(c, storage.Value[json.RawMessage]{Address: addr})
}

// Address is where the handle reads and writes.
func (v ValueHandle[T]) Address() storage.Address { return v.addr }

// Get reads the current value.
func (v ValueHandle[T]) Get(ctx context.Context) (T, bool, error) { return v.At(ctx, 0) }

// At reads a rewindable conversation value as of entry at (0: current).
func (v ValueHandle[T]) At(ctx context.Context, at storage.ID) (T, bool, error) {
	var x T
	if err := v.addr.Validate(); err != nil {
		return x, false, err
	}
	if plant.On("value-handle-at-now") {
		at = 0
	}
	ver, ok, err := v.h.Store().GetValue(ctx, v.addr, at)
	if err != nil || !ok {
		return x, false, err
	}
	if err := json.Unmarshal(ver.Value, &x); err != nil {
		return x, false, fmt.Errorf("core: value %s: %w", v.addr, err)
	}
	return x, true, nil
}

// Set writes the value in one commit.
func (v ValueHandle[T]) Set(ctx context.Context, x T) error {
	_, err := v.h.commit(ctx, func(tx *Tx) error { tx.SetValue(v.addr, x); return nil })
	return err
}

// Delete deletes the value in one commit.
func (v ValueHandle[T]) Delete(ctx context.Context) error {
	_, err := v.h.commit(ctx, func(tx *Tx) error { tx.DeleteValue(v.addr); return nil })
	return err
}

// ListHandle reads and writes one list outside a commit.
type ListHandle[T any] struct {
	h    *Harness
	addr storage.Address
}

// ListOf is the handle of a typed list in a scope.
func ListOf[T any](s StateScope, l storage.List[T]) ListHandle[T] {
	h, a := bindIn(s, l.Address)
	return ListHandle[T]{h: h, addr: a}
}

// List is the handle of the list at addr, its elements as raw JSON.
func (h *Harness) List(addr storage.Address) ListHandle[json.RawMessage] {
	return ListOf(h, storage.List[json.RawMessage]{Address: addr})
}

// List is the handle of the list at addr in this conversation; an unbound
// conversation address is this conversation's.
func (c *Conversation) List(addr storage.Address) ListHandle[json.RawMessage] {
	return ListOf(c, storage.List[json.RawMessage]{Address: addr})
}

// Address is where the handle reads and writes.
func (l ListHandle[T]) Address() storage.Address { return l.addr }

// Read reads a page of the committed list; the returned id continues it.
func (l ListHandle[T]) Read(ctx context.Context, q storage.ListQuery) ([]Elem[T], storage.ID, error) {
	if err := l.addr.Validate(); err != nil {
		return nil, 0, err
	}
	if plant.On("list-handle-read-ignores-at") {
		q.At = 0
	}
	p, err := l.h.Store().ReadList(ctx, l.addr, q)
	if err != nil {
		return nil, 0, err
	}
	return decodeElems[T](l.addr, p)
}

// All reads the whole committed list in element order.
func (l ListHandle[T]) All(ctx context.Context) ([]Elem[T], error) {
	if err := l.addr.Validate(); err != nil {
		return nil, err
	}
	return readAll[T](l.addr, func(q storage.ListQuery) (storage.Page[storage.Element], error) {
		return l.h.Store().ReadList(ctx, l.addr, q)
	})
}

// Append appends x in one commit and returns its element id.
func (l ListHandle[T]) Append(ctx context.Context, x T) (storage.ID, error) {
	var id storage.ID
	_, err := l.h.commit(ctx, func(tx *Tx) error { id = tx.Append(l.addr, x); return nil })
	return id, err
}

// Remove hides one element in one commit.
func (l ListHandle[T]) Remove(ctx context.Context, id storage.ID) error {
	_, err := l.h.commit(ctx, func(tx *Tx) error { tx.Remove(l.addr, id); return nil })
	return err
}

// Clear hides every element in one commit.
func (l ListHandle[T]) Clear(ctx context.Context) error {
	_, err := l.h.commit(ctx, func(tx *Tx) error { tx.Clear(l.addr); return nil })
	return err
}
