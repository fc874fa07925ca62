package core

import (
	"fmt"

	"github.com/pico-go/pico/storage"
)

// ValueTx is a typed view of one value inside a transaction.
type ValueTx[T any] struct {
	tx   *Tx
	addr storage.Address
}

// TxValue binds a typed value address to a transaction.
func TxValue[T any](tx *Tx, v storage.Value[T]) ValueTx[T] { return ValueTx[T]{tx, v.Address} }

// Get reads the committed value (at = 0 for current).
func (v ValueTx[T]) Get(at storage.ID) (T, bool, error) {
	var x T
	ver, ok, err := v.tx.GetValue(v.addr, at)
	if err != nil || !ok {
		return x, false, err
	}
	if x, err = Unmarshal[T](ver.Value); err != nil {
		return x, false, fmt.Errorf("core: value %s: %w", v.addr, err)
	}
	return x, true, nil
}

// Set writes the value.
func (v ValueTx[T]) Set(x T) { v.tx.SetValue(v.addr, x) }

// Delete deletes the value.
func (v ValueTx[T]) Delete() { v.tx.DeleteValue(v.addr) }

// ListTx is a typed view of one list inside a transaction.
type ListTx[T any] struct {
	tx   *Tx
	addr storage.Address
}

// TxList binds a typed list address to a transaction.
func TxList[T any](tx *Tx, l storage.List[T]) ListTx[T] { return ListTx[T]{tx, l.Address} }

// Elem is a decoded list element.
type Elem[T any] struct {
	ID    storage.ID `json:"id"`
	Value T          `json:"value"`
}

// Append appends x and returns its element id.
func (l ListTx[T]) Append(x T) storage.ID { return l.tx.Append(l.addr, x) }

// Remove hides one element.
func (l ListTx[T]) Remove(id storage.ID) { l.tx.Remove(l.addr, id) }

// Clear hides every element.
func (l ListTx[T]) Clear() { l.tx.Clear(l.addr) }

// Read reads a page of the committed list.
func (l ListTx[T]) Read(q storage.ListQuery) ([]Elem[T], storage.ID, error) {
	p, err := l.tx.ReadList(l.addr, q)
	if err != nil {
		return nil, 0, err
	}
	return decodeElems[T](l.addr, p)
}

// All reads the whole committed list in element order.
func (l ListTx[T]) All() ([]Elem[T], error) {
	return readAll[T](l.addr, func(q storage.ListQuery) (storage.Page[storage.Element], error) { return l.tx.ReadList(l.addr, q) })
}

// readAll reads every page of a list through read and decodes it.
func readAll[T any](addr storage.Address, read func(q storage.ListQuery) (storage.Page[storage.Element], error)) ([]Elem[T], error) {
	elems, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return read(storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	out, _, err := decodeElems[T](addr, storage.Page[storage.Element]{Items: elems})
	return out, err
}

func decodeElems[T any](addr storage.Address, p storage.Page[storage.Element]) ([]Elem[T], storage.ID, error) {
	out := make([]Elem[T], len(p.Items))
	for i, e := range p.Items {
		out[i].ID = e.ID
		var err error
		if out[i].Value, err = Unmarshal[T](e.Value); err != nil {
			return nil, 0, fmt.Errorf("core: list %s element %d: %w", addr, e.ID, err)
		}
	}
	return out, p.Next, nil
}
