package storage

import (
	"encoding/json"
	"fmt"
)

// EntryKind names an entry kind and witnesses the type of its data. It is
// only a name: no code registered on a kind runs while reading, so context
// derivation is identical with a kind unregistered.
type EntryKind[D any] struct{ name string }

// DefineEntryKind returns the entry kind called name with data type D.
func DefineEntryKind[D any](name string) EntryKind[D] { return EntryKind[D]{name: name} }

// Kind is the stored kind string.
func (k EntryKind[D]) Kind() string { return k.name }

// Is reports whether e is of this kind.
func (k EntryKind[D]) Is(e *Entry) bool { return e != nil && e.Kind == k.name }

// Data decodes e's data as D. It fails for an entry of another kind; an entry
// without data decodes to the zero D.
func (k EntryKind[D]) Data(e *Entry) (D, error) {
	var d D
	if !k.Is(e) {
		return d, fmt.Errorf("storage: entry is not of kind %q", k.name)
	}
	if len(e.Data) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return d, fmt.Errorf("storage: entry %d (%s) data: %w", e.ID, k.name, err)
	}
	return d, nil
}

// Kinder is any entry or task kind: something with a stored kind string.
type Kinder interface{ Kind() string }
