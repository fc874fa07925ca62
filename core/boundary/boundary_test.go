package boundary_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// Payloads built from the fields each provider documents (the reference's
// constructed examples): ids and paths are placeholders.

const (
	P  = "4d417de0-0000-4000-8000-000000000001"
	N  = "9b7e6a52-2c1d-4f7e-9a1b-3c4d5e6f7a8b"
	N2 = "019e8440-5132-7813-a319-576b3c0c806a"
)

func claude(event, field, value, id string) string {
	return fmt.Sprintf(`{"session_id":%q,"transcript_path":"/home/u/.claude/projects/-home-u-proj/%s.jsonl","cwd":"/home/u/proj","hook_event_name":%q,%q:%q}`, id, id, event, field, value)
}

func codex(source, id string) string {
	return fmt.Sprintf(`{"session_id":%q,"transcript_path":null,"cwd":"/home/u/proj","hook_event_name":"SessionStart","model":"gpt-5","permission_mode":"default","source":%q}`, id, source)
}

func gemini(event, field, value, id string) string {
	return fmt.Sprintf(`{"session_id":%q,"transcript_path":"","cwd":"/home/u/proj","hook_event_name":%q,"timestamp":"2026-08-21T16:20:00.000Z",%q:%q}`, id, event, field, value)
}

type delivery struct {
	payload    string
	forkedFrom string // what a Codex host read from the rollout, if anything
}

// run classifies a sequence of deliveries from an empty state, returning
// the kinds and the final state.
func run(t *testing.T, p boundary.Provider, pol boundary.Policy, ds []delivery) ([]boundary.Kind, []boundary.Boundary, boundary.State) {
	t.Helper()
	var st boundary.State
	var kinds []boundary.Kind
	var bs []boundary.Boundary
	for _, d := range ds {
		ev, err := boundary.Parse(p, []byte(d.payload))
		if err != nil {
			t.Fatalf("parse %s: %v", d.payload, err)
		}
		ev.ForkedFrom = d.forkedFrom
		var b boundary.Boundary
		b, st, err = boundary.Classify(st, ev, pol)
		if err != nil {
			t.Fatal(err)
		}
		kinds, bs = append(kinds, b.Kind), append(bs, b)
	}
	return kinds, bs, st
}

func d(payloads ...string) []delivery {
	out := make([]delivery, len(payloads))
	for i, p := range payloads {
		out[i] = delivery{payload: p}
	}
	return out
}

// The reference's §6 fixture table, scenario by scenario.
func TestFixtureScenarios(t *testing.T) {
	start := func(p boundary.Provider, id string) string {
		switch p {
		case boundary.Codex:
			return codex("startup", id)
		case boundary.Gemini:
			return gemini("SessionStart", "source", "startup", id)
		}
		return claude("SessionStart", "source", "startup", id)
	}
	for _, tc := range []struct {
		name     string
		provider boundary.Provider
		policy   *boundary.Policy // nil: the provider's default
		events   []delivery
		want     []boundary.Kind
		bound    string
	}{
		{"C1 startup binds", boundary.Claude, nil, d(claude("SessionStart", "source", "startup", P)), []boundary.Kind{boundary.Startup}, P},
		{"C2 clear is one boundary and a repeat is a no-op", boundary.Claude, nil,
			d(start(boundary.Claude, P), claude("SessionEnd", "reason", "clear", P), claude("SessionStart", "source", "clear", N), claude("SessionStart", "source", "clear", N)),
			[]boundary.Kind{boundary.Startup, boundary.None, boundary.Clear, boundary.None}, N},
		{"C3 compact is no boundary", boundary.Claude, nil, d(start(boundary.Claude, P), claude("SessionStart", "source", "compact", P)),
			[]boundary.Kind{boundary.Startup, boundary.Compact}, P},
		{"C4 resume rebinds without a clear", boundary.Claude, nil,
			d(start(boundary.Claude, P), claude("SessionEnd", "reason", "resume", P), claude("SessionStart", "source", "resume", N)),
			[]boundary.Kind{boundary.Startup, boundary.None, boundary.Resume}, N},
		{"C5 fork is not a clear", boundary.Claude, nil, d(start(boundary.Claude, P), claude("SessionStart", "source", "fork", N)),
			[]boundary.Kind{boundary.Startup, boundary.Fork}, N},
		{"C6 a fork before 2.1.214 arrives as resume", boundary.Claude, nil, d(start(boundary.Claude, P), claude("SessionStart", "source", "resume", N)),
			[]boundary.Kind{boundary.Startup, boundary.Resume}, N},
		{"C7 VS Code startup after clear: rebind by default", boundary.Claude, nil, d(start(boundary.Claude, P), claude("SessionStart", "source", "startup", N)),
			[]boundary.Kind{boundary.Startup, boundary.Startup}, N},
		{"C7 VS Code startup after clear: a reset under the policy", boundary.Claude, &boundary.Policy{StartupWithNewIDIsClear: true},
			d(start(boundary.Claude, P), claude("SessionStart", "source", "startup", N)), []boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"X1 startup at the first prompt", boundary.Codex, nil, d(codex("startup", P)), []boundary.Kind{boundary.Startup}, P},
		{"X2 clear", boundary.Codex, nil, d(codex("startup", P), codex("clear", N)), []boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"X3 /new is a normalized clear", boundary.Codex, nil, d(codex("startup", P), codex("startup", N)), []boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"X4 /fork yields clear by the seed rule", boundary.Codex, nil, d(codex("startup", P), codex("startup", N)), []boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"X4 /fork with the rollout's forked_from_id is a fork", boundary.Codex, nil,
			[]delivery{{payload: codex("startup", P)}, {payload: codex("startup", N), forkedFrom: P}}, []boundary.Kind{boundary.Startup, boundary.Fork}, N},
		{"X5 two compact starts in one turn", boundary.Codex, nil, d(codex("startup", P), codex("compact", P), codex("compact", P)),
			[]boundary.Kind{boundary.Startup, boundary.Compact, boundary.Compact}, P},
		{"X6 clear, clear, prompt: one clear", boundary.Codex, nil, d(codex("startup", P), codex("clear", N2)), []boundary.Kind{boundary.Startup, boundary.Clear}, N2},
		{"X7 Ctrl+L fires nothing", boundary.Codex, nil, d(codex("startup", P)), []boundary.Kind{boundary.Startup}, P},
		{"G1 startup", boundary.Gemini, nil, d(gemini("SessionStart", "source", "startup", P)), []boundary.Kind{boundary.Startup}, P},
		{"G2 SessionEnd(clear) then SessionStart(clear): one boundary", boundary.Gemini, nil,
			d(start(boundary.Gemini, P), gemini("SessionEnd", "reason", "clear", P), gemini("SessionStart", "source", "clear", N)),
			[]boundary.Kind{boundary.Startup, boundary.None, boundary.Clear}, N},
		{"G2 SessionStart(clear) alone also counts", boundary.Gemini, nil, d(start(boundary.Gemini, P), gemini("SessionStart", "source", "clear", N)),
			[]boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"G3 PreCompress is an observational compact", boundary.Gemini, nil, d(start(boundary.Gemini, P), gemini("PreCompress", "trigger", "auto", P)),
			[]boundary.Kind{boundary.Startup, boundary.Compact}, P},
		{"G4 a silent /resume: the new id rebinds as an inferred resume", boundary.Gemini, nil, d(start(boundary.Gemini, P), gemini("PreCompress", "trigger", "manual", N)),
			[]boundary.Kind{boundary.Startup, boundary.Resume}, N},
		{"G5 Ctrl+L fires nothing", boundary.Gemini, nil, d(start(boundary.Gemini, P)), []boundary.Kind{boundary.Startup}, P},
		{"O1 Copilot new is a normalized clear", boundary.Copilot, nil,
			d(`{"sessionId":"`+P+`","timestamp":1787000000000,"cwd":"/home/u/proj","source":"startup"}`, `{"sessionId":"`+N+`","timestamp":1787000000001,"cwd":"/home/u/proj","source":"new"}`),
			[]boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"O2 generic clear by thread_id", boundary.Generic, nil, d(`{"source":"startup","thread_id":"`+P+`"}`, `{"source":"clear","thread_id":"`+N+`"}`),
			[]boundary.Kind{boundary.Startup, boundary.Clear}, N},
		{"O2 generic clear by conversation_id", boundary.Generic, nil, d(`{"source":"clear","conversation_id":"` + N + `"}`), []boundary.Kind{boundary.Clear}, N},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := boundary.DefaultPolicy(tc.provider)
			if tc.policy != nil {
				pol = *tc.policy
			}
			kinds, bs, st := run(t, tc.provider, pol, tc.events)
			if diff := cmp.Diff(tc.want, kinds); diff != "" {
				t.Fatalf("kinds (-want +got):\n%s", diff)
			}
			if st.Bound != tc.bound {
				t.Fatalf("bound to %q; want %q", st.Bound, tc.bound)
			}
			clears := 0
			for i, b := range bs {
				if b.Changes() {
					clears++
					// A clear names the session it leaves, unless it is
					// the first event the launch saw.
					if b.SessionID == b.Previous || i > 0 && b.Previous == "" {
						t.Fatalf("a clear %+v does not name the session it leaves", b)
					}
				}
			}
			if want := strings.Count(fmt.Sprint(tc.want), string(boundary.Clear)); clears != want {
				t.Fatalf("%d boundaries change the session; want %d", clears, want)
			}
			endToEnd(t, bs)
		})
	}
}

// The seed's rule makes a Codex /fork a clear, and the boundary says the
// kind was inferred, so an audit can tell it from a typed clear.
func TestInferredKindsSaySo(t *testing.T) {
	_, bs, _ := run(t, boundary.Codex, boundary.DefaultPolicy(boundary.Codex), d(codex("startup", P), codex("startup", N), codex("clear", N2)))
	if !bs[1].Inferred || bs[1].Reason == "" || bs[2].Inferred {
		t.Fatalf("boundaries %+v; want the /new inferred and the typed clear not", bs)
	}
}

// An unknown or malformed payload is a PayloadError naming the field, and
// never a boundary.
func TestBadPayloadsAreTypedErrorsNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		provider boundary.Provider
		payload  string
		field    string
	}{
		{boundary.Claude, `not json`, ""},
		{boundary.Claude, `[1,2]`, ""},
		{boundary.Claude, `{"hook_event_name":"SessionStart","source":"clear"} trailing`, ""},
		{boundary.Claude, `{"hook_event_name":"SessionStart","source":"clear"}`, "session_id"},
		{boundary.Claude, `{"session_id":"","hook_event_name":"SessionStart","source":"clear"}`, "session_id"},
		{boundary.Claude, `{"session_id":"x","source":"clear"}`, "hook_event_name"},
		{boundary.Claude, `{"session_id":"x","hook_event_name":"PreToolUse"}`, "hook_event_name"},
		{boundary.Claude, `{"session_id":"x","hook_event_name":"SessionStart","source":"reboot"}`, "source"},
		{boundary.Claude, `{"session_id":7,"hook_event_name":"SessionStart","source":"clear"}`, "session_id"},
		{boundary.Codex, `{"session_id":"x","hook_event_name":"SessionStart","source":"fork"}`, "source"},
		{boundary.Gemini, `{"session_id":"x","hook_event_name":"PreCompress","trigger":"sometimes"}`, "trigger"},
		{boundary.Gemini, `{"session_id":"x","hook_event_name":"SessionEnd","reason":"crash"}`, "reason"},
		{boundary.Copilot, `{"sessionId":"x","source":"clear"}`, "source"},
		{boundary.Generic, `{"source":"clear"}`, "session_id"},
		{"amp", `{"session_id":"x"}`, ""},
	} {
		_, err := boundary.Parse(tc.provider, []byte(tc.payload))
		var pe *boundary.PayloadError
		if !errors.As(err, &pe) || pe.Field != tc.field || pe.Provider != tc.provider {
			t.Errorf("Parse(%s, %s) = %v; want a PayloadError on field %q", tc.provider, tc.payload, err, tc.field)
		}
	}
	// The message names the provider, and the field when there is one.
	for _, tc := range []struct {
		err  *boundary.PayloadError
		want string
	}{
		{&boundary.PayloadError{Provider: boundary.Gemini, Reason: "not JSON"}, "boundary: gemini payload: not JSON"},
		{&boundary.PayloadError{Provider: boundary.Claude, Field: "source", Reason: `"reboot" is no source`}, `boundary: claude payload: source: "reboot" is no source`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q; want %q", got, tc.want)
		}
	}
	if _, _, err := boundary.Classify(boundary.State{}, boundary.Event{Provider: boundary.Claude, Name: "SessionStart", Source: "reboot", SessionID: "x"}, boundary.Policy{}); err == nil {
		t.Error("Classify accepted an event Parse would refuse")
	}
}

// A payload is read up to a mebibyte, that one included (a hook may pad
// what it sends); one byte more is refused before it is decoded.
func TestAPayloadIsBoundedAtAMebibyte(t *testing.T) {
	const max = 1 << 20
	event := `{"session_id":"x","hook_event_name":"SessionStart","source":"clear"}`
	padded := func(n int) []byte { return []byte(event + strings.Repeat(" ", n-len(event))) }
	if e, err := boundary.Parse(boundary.Claude, padded(max)); err != nil || e.SessionID != "x" {
		t.Fatalf("a payload of exactly %d bytes: %+v, %v; want it read", max, e, err)
	}
	_, err := boundary.Parse(boundary.Claude, padded(max+1))
	var pe *boundary.PayloadError
	if !errors.As(err, &pe) || pe.Field != "" || !strings.Contains(pe.Reason, "1048577 bytes") {
		t.Fatalf("a payload of %d bytes: %v; want a PayloadError naming its size", max+1, err)
	}
}

// The state is JSON, so a host can keep it between deliveries, and a
// SessionEnd(clear) waiting for its start survives the round trip.
func TestStateRoundTrips(t *testing.T) {
	_, _, st := run(t, boundary.Gemini, boundary.Policy{}, d(gemini("SessionStart", "source", "startup", P), gemini("SessionEnd", "reason", "clear", P)))
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back boundary.State
	if err := json.Unmarshal(raw, &back); err != nil || back != st || back.Ending != P {
		t.Fatalf("state %s read back as %+v (%v)", raw, back, err)
	}
}

// endToEnd applies a scenario's boundaries to a session and checks what
// it holds: a conversation per clear and per fork besides the root, a
// provider_boundary entry per clear, every bound provider session bound,
// and the conversation of the last binding current.
func endToEnd(t *testing.T, bs []boundary.Boundary) {
	t.Helper()
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), CheckInvariants: true}))
		wantConvs, wantEntries := 1, 0
		var last boundary.Transition
		for _, b := range bs {
			tr := must(boundary.Apply(ctx, h, b))
			if tr.Changed {
				last = tr
				switch b.Kind {
				case boundary.Clear:
					wantConvs, wantEntries = wantConvs+1, wantEntries+1
				case boundary.Fork:
					wantConvs++
				}
			}
		}
		convs := must(storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
			return h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
		}))
		entries := 0
		for _, c := range convs {
			entries += len(must(h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: boundary.EntryKind.Kind()})).Items)
		}
		if len(convs) != wantConvs || entries != wantEntries {
			t.Fatalf("%d conversations, %d provider_boundary entries; want %d and %d", len(convs), entries, wantConvs, wantEntries)
		}
		for _, b := range bs {
			if b.Kind == boundary.Compact || b.Kind == boundary.None || b.Kind == boundary.UIOnly {
				continue
			}
			if _, ok := must2(h.Store().GetValue(ctx, boundary.BindingValue.WithKey(string(b.Provider)+"/"+b.SessionID).Address, 0)); !ok {
				t.Fatalf("provider session %s is not bound", b.SessionID)
			}
		}
		if last.Changed {
			if cur := must(boundary.Current(ctx, h)); cur != last.Binding.Conversation {
				t.Fatalf("current %d; want the last binding's %d", cur, last.Binding.Conversation)
			}
		}
		must(0, h.Close(ctx))
	})
}
