package boundary

import (
	"fmt"
	"slices"

	"github.com/pico-go/pico/internal/plant"
)

// State is what an adapter remembers of one launch between deliveries: the
// provider session the logical session is bound to, and a SessionEnd(clear)
// still waiting for its start. The caller keeps it (the host in a private
// run directory) and passes it back; it is JSON.
type State struct {
	Bound  string `json:"bound,omitempty"`
	Ending string `json:"ending,omitempty"`
}

// Policy holds the adapter decisions the reference leaves open.
type Policy struct {
	// StartupWithNewIDIsClear makes a startup that carries an id other than
	// the bound one a reset: Codex's /new (the seed's rule), and the
	// Claude VS Code extension's reported startup after /clear. Without it
	// such a startup rebinds, as a new launch does.
	StartupWithNewIDIsClear bool
}

// DefaultPolicy is the policy of a provider's adapter: Codex infers /new;
// the others report their clears.
func DefaultPolicy(p Provider) Policy {
	return Policy{StartupWithNewIDIsClear: p == Codex}
}

// Boundary is what an event means: its Kind, the provider session it
// leads to and the one it leaves, and whether the kind was inferred by the
// adapter rather than reported (Reason says how).
type Boundary struct {
	Kind      Kind     `json:"kind"`
	Provider  Provider `json:"provider"`
	SessionID string   `json:"sessionId"`
	Previous  string   `json:"previous,omitempty"`
	Source    string   `json:"source,omitempty"`
	Inferred  bool     `json:"inferred,omitempty"`
	Reason    string   `json:"reason,omitempty"`
}

// Changes reports whether the boundary starts a new logical session.
func (b Boundary) Changes() bool { return b.Kind == Clear }

// Classify reads ev against the launch's state st under pol and returns
// the boundary and the state after it. It never fails on an event Parse
// accepted; ev from elsewhere is checked again.
func Classify(st State, ev Event, pol Policy) (Boundary, State, error) {
	allowed, ok := sources[ev.Provider][ev.Name]
	if !ok || ev.SessionID == "" || !slices.Contains(allowed, ev.Source) {
		return Boundary{}, st, &PayloadError{Provider: ev.Provider, Reason: fmt.Sprintf("event %s/%s of session %q is not one Parse accepts", ev.Name, ev.Source, ev.SessionID)}
	}
	b := Boundary{Kind: None, Provider: ev.Provider, SessionID: ev.SessionID, Source: ev.Source}
	if st.Bound != ev.SessionID || plant.On("classify-previous-is-self") {
		b.Previous = st.Bound
	}
	bind := func(k Kind) (Boundary, State, error) {
		b.Kind = k
		return b, State{Bound: ev.SessionID}, nil
	}
	switch ev.Name {
	case EventSessionEnd:
		if ev.Source == "clear" {
			st.Ending = ev.SessionID // the start with the new id completes it
		}
		b.Reason = "a session's end changes nothing by itself"
		return b, st, nil
	case EventPreCompact, EventPostCompact, EventPreCompress:
		if st.Bound != "" && ev.SessionID != st.Bound && !plant.On("classify-compact-ignores-new-id") {
			// Gemini's in-session /resume switches the id and fires
			// nothing: the first event of the new id rebinds.
			b.Inferred, b.Reason = true, "the provider session changed without a lifecycle event"
			return bind(Resume)
		}
		b.Kind = Compact
		if st.Bound == "" {
			st.Bound = ev.SessionID
		}
		return b, st, nil
	}
	// A SessionStart.
	switch src := ev.Source; {
	case src == "clear", src == "new":
		if ev.SessionID == st.Bound && !plant.On("classify-repeated-clear-clears") {
			b.Reason = "a repeated delivery of the clear already taken"
			return b, st, nil
		}
		if src == "new" {
			b.Inferred, b.Reason = true, "Copilot reports a new session as source new"
		}
		return bind(Clear)
	case src == "compact":
		b.Kind = Compact
		if st.Bound == "" {
			st.Bound = ev.SessionID
		}
		return b, st, nil
	case src == "ui-only":
		b.Kind = UIOnly
		return b, st, nil
	case src == "resume":
		return bind(Resume)
	case src == "fork":
		return bind(Fork)
	}
	// A startup.
	switch {
	case st.Bound == "":
		return bind(Startup)
	case ev.SessionID == st.Bound:
		b.Reason = "a repeated delivery of the bound startup"
		return b, st, nil
	case ev.ForkedFrom != "":
		b.Inferred, b.Reason = true, "a startup forked from "+ev.ForkedFrom
		return bind(Fork)
	case pol.StartupWithNewIDIsClear && !plant.On("classify-codex-new-rebinds"):
		b.Inferred = true
		b.Reason = "a later startup with a new session id is a reset (Codex /new; a Codex /fork looks the same unless the host supplies ForkedFrom)"
		return bind(Clear)
	}
	b.Reason = "a startup with a new session id rebinds"
	return bind(Startup)
}
