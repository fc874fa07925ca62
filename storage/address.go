package storage

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ScopeKind says which lifetime a piece of state has.
type ScopeKind uint8

const (
	ScopeSession      ScopeKind = iota + 1 // one current value for the session
	ScopeConversation                      // rewindable or sticky, per address
	ScopeScratch                           // one live execution of a task
)

func (k ScopeKind) String() string {
	switch k {
	case ScopeSession:
		return "session"
	case ScopeConversation:
		return "conversation"
	case ScopeScratch:
		return "scratch"
	}
	return "scope(" + strconv.Itoa(int(k)) + ")"
}

// Scope is where a piece of state lives. ID is the conversation id for
// conversation scope and the task id for scratch scope; session scope has
// none. JSON: {"session":true}, {"conversation":7} or {"scratch":12}.
type Scope struct {
	Kind ScopeKind
	ID   ID
}

// SessionScope is the session scope.
func SessionScope() Scope { return Scope{Kind: ScopeSession} }

// ConversationScope is the scope of one conversation.
func ConversationScope(id ID) Scope { return Scope{Kind: ScopeConversation, ID: id} }

// ScratchScope is the scratch scope of one task.
func ScratchScope(task ID) Scope { return Scope{Kind: ScopeScratch, ID: task} }

func (s Scope) String() string {
	if s.Kind == ScopeSession {
		return "session"
	}
	return s.Kind.String() + ":" + s.ID.String()
}

// MarshalJSON writes the one-member object form of the scope.
func (s Scope) MarshalJSON() ([]byte, error) {
	switch s.Kind {
	case ScopeSession:
		return []byte(`{"session":true}`), nil
	case ScopeConversation, ScopeScratch:
		return []byte(`{"` + s.Kind.String() + `":` + s.ID.String() + `}`), nil
	}
	return nil, fmt.Errorf("storage: cannot encode %v", s)
}

// UnmarshalJSON reads the one-member object form of a scope.
func (s *Scope) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("storage: scope: %w", err)
	}
	if len(m) != 1 {
		return fmt.Errorf("storage: scope must have exactly one member, got %s", data)
	}
	for k, v := range m {
		switch k {
		case "session":
			if string(v) != "true" {
				return fmt.Errorf("storage: scope: session must be true, got %s", v)
			}
			*s = SessionScope()
		case "conversation", "scratch":
			var id ID
			if err := json.Unmarshal(v, &id); err != nil || id <= 0 {
				return fmt.Errorf("storage: scope: %s must be a positive id, got %s", k, v)
			}
			if k == "conversation" {
				*s = ConversationScope(id)
			} else {
				*s = ScratchScope(id)
			}
		default:
			return fmt.Errorf("storage: scope: unknown member %q", k)
		}
	}
	return nil
}

// Address names one value or list: its scope, namespace, optional key and
// rewind policy. Only conversation addresses may be rewindable; the identity
// of the state is (scope, namespace, key), and its policy never changes.
type Address struct {
	Scope     Scope  `json:"scope"`
	Namespace string `json:"namespace"`
	Key       string `json:"key,omitempty"`
	Rewind    bool   `json:"rewind,omitempty"`
}

// String is the canonical string form of the address, used as a map key on
// the wire and in views: scope, then namespace, then key, separated by '/'
// with the namespace and key quoted so any string round-trips.
func (a Address) String() string {
	var b strings.Builder
	b.WriteString(a.Scope.String())
	b.WriteByte('/')
	b.WriteString(strconv.Quote(a.Namespace))
	if a.Key != "" {
		b.WriteByte('/')
		b.WriteString(strconv.Quote(a.Key))
	}
	if a.Rewind {
		b.WriteString("/rewind")
	}
	return b.String()
}

// StateKey identifies the stored state an address denotes, regardless of
// its rewind policy.
func (a Address) StateKey() string {
	a.Rewind = false
	return a.String()
}

// StateRef is the comparable identity of the stored state an address
// denotes, StateKey's without building a string: the map key of a store or
// a checker.
type StateRef struct {
	Scope     Scope
	Namespace string
	Key       string
}

// Ref returns the identity of the stored state a denotes.
func (a Address) Ref() StateRef { return StateRef{Scope: a.Scope, Namespace: a.Namespace, Key: a.Key} }

// Historical reports whether the address supports reads at a position.
func (a Address) Historical() bool { return a.Scope.Kind == ScopeConversation && a.Rewind }

// Validate checks the address's own shape.
func (a Address) Validate() error {
	switch a.Scope.Kind {
	case ScopeSession:
		if a.Scope.ID != 0 {
			return &AddressError{Addr: a, Reason: "session scope carries no id"}
		}
	case ScopeConversation, ScopeScratch:
		if a.Scope.ID <= 0 {
			return &AddressError{Addr: a, Reason: a.Scope.Kind.String() + " scope is not bound to an id"}
		}
	default:
		return &AddressError{Addr: a, Reason: "unknown scope"}
	}
	if a.Namespace == "" {
		return &AddressError{Addr: a, Reason: "empty namespace"}
	}
	if a.Rewind && a.Scope.Kind != ScopeConversation {
		return &AddressError{Addr: a, Reason: "only conversation state can be rewindable"}
	}
	return nil
}

// Policy is the rewind policy of a conversation address.
type Policy bool

const (
	Sticky Policy = false // one current value; forks do not inherit it
	Rewind Policy = true  // history readable at any entry; forks inherit it
)

// Value is a typed value address. T is the payload type; the address itself
// is untyped data.
type Value[T any] struct{ Address }

// List is a typed list address. T is the element payload type.
type List[T any] struct{ Address }

// SessionValue is a value in session scope.
func SessionValue[T any](namespace string) Value[T] {
	return Value[T]{Address{Scope: SessionScope(), Namespace: namespace}}
}

// SessionList is a list in session scope.
func SessionList[T any](namespace string) List[T] {
	return List[T]{Address{Scope: SessionScope(), Namespace: namespace}}
}

// ConversationValue is a value in conversation scope, not yet bound to a
// conversation; a conversation handle or In binds it.
func ConversationValue[T any](namespace string, policy Policy) Value[T] {
	return Value[T]{Address{Scope: Scope{Kind: ScopeConversation}, Namespace: namespace, Rewind: bool(policy)}}
}

// ConversationList is a list in conversation scope, not yet bound.
func ConversationList[T any](namespace string, policy Policy) List[T] {
	return List[T]{Address{Scope: Scope{Kind: ScopeConversation}, Namespace: namespace, Rewind: bool(policy)}}
}

// ScratchValue is a value in a task's scratch scope, not yet bound.
func ScratchValue[T any](namespace string) Value[T] {
	return Value[T]{Address{Scope: Scope{Kind: ScopeScratch}, Namespace: namespace}}
}

// ScratchList is a list in a task's scratch scope, not yet bound.
func ScratchList[T any](namespace string) List[T] {
	return List[T]{Address{Scope: Scope{Kind: ScopeScratch}, Namespace: namespace}}
}

// In binds a conversation or scratch address to a conversation or task id.
func (v Value[T]) In(id ID) Value[T] { v.Scope.ID = id; return v }

// WithKey returns the address with its key set.
func (v Value[T]) WithKey(key string) Value[T] { v.Key = key; return v }

// In binds a conversation or scratch address to a conversation or task id.
func (l List[T]) In(id ID) List[T] { l.Scope.ID = id; return l }

// WithKey returns the address with its key set.
func (l List[T]) WithKey(key string) List[T] { l.Key = key; return l }
