// Package boundary turns the lifecycle hook events of agent CLIs (Claude
// Code, OpenAI Codex, Gemini CLI, GitHub Copilot CLI, or any harness that
// sends the generic shape) into the typed boundary vocabulary of DESIGN
// §11: startup, resume, compact, clear, ui-only and fork. It is pure: it
// parses payloads and classifies them against the adapter state the caller
// keeps, and does no I/O; Apply then carries a boundary out on a session.
//
// The package has two halves. The pure one: a payload becomes an Event with Parse, which refuses anything it does not
// know with a *PayloadError naming the provider and the field; an unknown
// or malformed payload is never a boundary. Classify reads an Event with
// the State of its launch and a Policy, and returns the Boundary and the
// next State. Only a Clear is a new logical session; startup, resume and
// fork bind or rebind the provider session, compact and None change
// nothing.
//
// Provider quirks it handles (shared/reference/provider-hooks.md):
//
//   - Codex reports /new as a startup with a new thread id, and fires
//     SessionStart lazily, at the first prompt of the new thread: the Codex
//     policy treats a later startup with another id as a clear (the seed's
//     rule). Codex's /fork looks exactly like /new; a host that can read
//     the rollout's forked_from_id sets Event.ForkedFrom, which makes it a
//     fork. Without it, a Codex /fork is classified as a clear, as the seed
//     rule says, and the Boundary says the classification was inferred.
//   - Gemini sends SessionEnd(clear) with the old id, then SessionStart(clear)
//     with the new one: one boundary, and SessionStart(clear) alone also
//     counts. Its in-session /resume fires nothing; an event that later
//     carries another id rebinds as an inferred resume.
//   - Claude before 2.1.214 reports a fork as a resume (it is one, here);
//     its VS Code extension was reported to send startup after /clear,
//     which the StartupWithNewIDIsClear policy decides.
//   - A repeated delivery (the same clear twice; two compact starts in one
//     Codex turn) changes nothing the second time.
//
// # Files
//
//   - boundary.go: the vocabulary (Kind, Provider, Event, Boundary), Parse and PayloadError.
//   - classify.go: State, Policy, DefaultPolicy and Classify.
//   - socket.go: the lifecycle socket a host serves (a private directory,
//     a per-launch token, the adapter states beside it) for the hook
//     command, cmd/pico-hook. Its actors, clock, lock and events are the
//     harness's runtime's; the socket is an OS one, so it serves under the
//     real runtime only.
//   - transition.go: Apply, the other half: a classified boundary as one
//     commit on the session's line (the old conversation stopped and its
//     foreground marked, the new one with its provider_boundary entry made
//     current, the binding that makes repeats no-ops), and Current.
//
// Tests: boundary_test.go (the fixture scenarios C1–C7, X1–X7, G1–G5, O1–O2
// of the reference's §6, each from payloads built of the documented
// fields; malformed and unknown payloads; state round trips),
// transition_test.go (a clear in one commit and its repeat, racing
// deliveries, resume, compact, fork, bad boundaries) under the simulator.
package boundary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Kind is what a lifecycle event means for the logical session.
type Kind string

const (
	// Startup binds the launch's logical session to its first provider
	// session (or rebinds it at a new launch).
	Startup Kind = "startup"
	// Resume keeps the logical session with a replacement provider session.
	Resume Kind = "resume"
	// Compact is the same session with a smaller context: nothing changes.
	Compact Kind = "compact"
	// Clear is a typed (or adapter-normalized) reset: a new logical session.
	Clear Kind = "clear"
	// UIOnly is a repaint with no new provider conversation: nothing changes.
	UIOnly Kind = "ui-only"
	// Fork is branch semantics: a new provider session forked from the
	// bound one, not a clear.
	Fork Kind = "fork"
	// None is an event that changes nothing by itself: a SessionEnd, a
	// repeated delivery, an event of the bound session.
	None Kind = "none"
)

// Provider names an agent CLI, and so its adapter.
type Provider string

const (
	Claude  Provider = "claude"
	Codex   Provider = "codex"
	Gemini  Provider = "gemini"
	Copilot Provider = "copilot"
	// Generic is any harness that sends {"source": …} with one of
	// session_id, thread_id or conversation_id.
	Generic Provider = "generic"
)

// Providers are the adapters Parse knows, in a stable order.
var Providers = []Provider{Claude, Codex, Gemini, Copilot, Generic}

// Event names as the providers send them.
const (
	EventSessionStart = "SessionStart"
	EventSessionEnd   = "SessionEnd"
	EventPreCompact   = "PreCompact"
	EventPostCompact  = "PostCompact"
	EventPreCompress  = "PreCompress"
)

// Event is one lifecycle hook delivery, parsed.
type Event struct {
	Provider Provider `json:"provider"`
	// Name is the hook event (SessionStart, SessionEnd, PreCompact,
	// PostCompact, PreCompress); Copilot's camelCase sessionStart is
	// SessionStart here.
	Name string `json:"name"`
	// Source is the SessionStart source, the SessionEnd reason or the
	// compaction trigger, as sent.
	Source         string `json:"source,omitempty"`
	SessionID      string `json:"sessionId"`
	TranscriptPath string `json:"transcriptPath,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
	// ForkedFrom, for Codex, is the thread a new thread was forked from,
	// which the payload does not carry: a host that reads it from the
	// rollout's session meta sets it, and the startup is then a fork.
	ForkedFrom string          `json:"forkedFrom,omitempty"`
	Raw        json.RawMessage `json:"raw"`
}

// PayloadError is a payload Parse refuses: malformed, or naming an event or
// a value the provider's adapter does not know. It is never a boundary.
type PayloadError struct {
	Provider Provider
	Field    string // the offending field, or "" for the payload as a whole
	Reason   string
}

func (e *PayloadError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("boundary: %s payload: %s", e.Provider, e.Reason)
	}
	return fmt.Sprintf("boundary: %s payload: %s: %s", e.Provider, e.Field, e.Reason)
}

// payloadMax bounds a payload: a lifecycle event is a few hundred bytes.
const payloadMax = 1 << 20

// sources are the values each provider's events take, by event name (the
// source, reason or trigger field).
var sources = map[Provider]map[string][]string{
	Claude: {
		EventSessionStart: {"startup", "resume", "clear", "compact", "fork"},
		EventSessionEnd:   {"clear", "resume", "logout", "prompt_input_exit", "other", "bypass_permissions_disabled"},
		EventPreCompact:   {"manual", "auto"},
		EventPostCompact:  {"manual", "auto"},
	},
	Codex: {
		EventSessionStart: {"startup", "resume", "clear", "compact"},
		EventSessionEnd:   {"other", "clear", "exit", "logout", "prompt_input_exit"},
		EventPreCompact:   {"manual", "auto"},
		EventPostCompact:  {"manual", "auto"},
	},
	Gemini: {
		EventSessionStart: {"startup", "resume", "clear"},
		EventSessionEnd:   {"exit", "clear", "logout", "prompt_input_exit", "other"},
		EventPreCompress:  {"manual", "auto"},
	},
	Copilot: {EventSessionStart: {"startup", "resume", "new"}},
	Generic: {EventSessionStart: {"startup", "resume", "clear", "compact", "fork", "ui-only"}},
}

// sourceField is the field that carries an event's source, reason or
// trigger.
func sourceField(name string) string {
	switch name {
	case EventSessionEnd:
		return "reason"
	case EventPreCompact, EventPostCompact, EventPreCompress:
		return "trigger"
	}
	return "source"
}

// Parse reads one hook payload of provider p.
func Parse(p Provider, payload []byte) (Event, error) {
	bad := func(field, format string, args ...any) (Event, error) {
		return Event{}, &PayloadError{Provider: p, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	known := sources[p]
	switch {
	case known == nil:
		return bad("", "unknown provider (want one of %s)", providerList())
	case len(payload) > payloadMax:
		return bad("", "%d bytes, more than a lifecycle event's %d", len(payload), payloadMax)
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return bad("", "not a JSON object")
	}
	if dec.More() {
		return bad("", "trailing data after the JSON object")
	}
	str := func(name string) (string, bool, error) {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", true, &PayloadError{Provider: p, Field: name, Reason: "not a string"}
		}
		return s, true, nil
	}
	ev := Event{Provider: p, Raw: append(json.RawMessage(nil), payload...)}
	var err error
	if ev.Name, err = eventName(p, str); err != nil {
		return Event{}, err
	}
	allowed, ok := known[ev.Name]
	if !ok {
		return bad("hook_event_name", "%q is not a lifecycle event of %s", ev.Name, p)
	}
	field := sourceField(ev.Name)
	if ev.Source, _, err = str(field); err != nil {
		return Event{}, err
	}
	if !slices.Contains(allowed, ev.Source) {
		return bad(field, "%q: want one of %s", ev.Source, strings.Join(allowed, ", "))
	}
	if ev.SessionID, err = sessionID(p, str); err != nil {
		return Event{}, err
	}
	if ev.TranscriptPath, _, err = str("transcript_path"); err != nil {
		return Event{}, err
	}
	if ev.Cwd, _, err = str("cwd"); err != nil {
		return Event{}, err
	}
	return ev, nil
}

func providerList() string {
	names := make([]string, len(Providers))
	for i, p := range Providers {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// eventName is the payload's event: hook_event_name, except for Copilot's
// camelCase shape, which has none (it is always sessionStart), and the
// generic shape, where it may be absent (a start).
func eventName(p Provider, str func(string) (string, bool, error)) (string, error) {
	name, ok, err := str("hook_event_name")
	switch {
	case err != nil:
		return "", err
	case !ok && (p == Copilot || p == Generic):
		return EventSessionStart, nil
	case !ok:
		return "", &PayloadError{Provider: p, Field: "hook_event_name", Reason: "missing"}
	case name == "sessionStart" && p == Copilot:
		return EventSessionStart, nil
	}
	return name, nil
}

// sessionID is the provider session the payload names: session_id, or
// Copilot's sessionId, or for the generic shape the first of session_id,
// thread_id and conversation_id.
func sessionID(p Provider, str func(string) (string, bool, error)) (string, error) {
	names := []string{"session_id"}
	switch p {
	case Copilot:
		names = []string{"sessionId", "session_id"}
	case Generic:
		names = []string{"session_id", "thread_id", "conversation_id"}
	}
	for _, n := range names {
		id, ok, err := str(n)
		if err != nil {
			return "", err
		}
		if ok && strings.TrimSpace(id) != "" {
			return id, nil
		}
	}
	return "", &PayloadError{Provider: p, Field: names[0], Reason: "missing or empty (want " + strings.Join(names, ", ") + ")"}
}
