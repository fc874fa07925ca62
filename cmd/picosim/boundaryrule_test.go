package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/storage"
)

// boundaryBatches are a session's provider boundaries as their commits
// write them: a startup binding the root (1), a clear to a new
// conversation (3, its provider_boundary entry 4), and a fork of it at
// that entry (8); each batch starts at the sequence it is keyed by.
func boundaryBatches() map[storage.ID]storage.CommitBatch {
	set := func(addr storage.Address, v any) storage.Write {
		raw, _ := json.Marshal(v)
		return storage.Write{Type: storage.WriteValueSet, Addr: &addr, Value: raw}
	}
	bind := func(key string, b boundary.Binding) storage.Write {
		return set(boundary.BindingValue.WithKey(key).Address, b)
	}
	data, _ := json.Marshal(boundary.BoundaryData{Schema: 1, Provider: boundary.Claude, Source: "clear", Previous: 1, SessionID: "t2"})
	return map[storage.ID]storage.CommitBatch{
		2: {Writes: []storage.Write{bind("claude/t1", boundary.Binding{Conversation: 1, Kind: boundary.Startup})}},
		3: {Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 3}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 3, Kind: boundary.EntryKind.Kind(), Data: data}},
			set(boundary.StoppedValue.In(1).Address, boundary.Stopped{Reason: boundary.ReasonProviderClear, Successor: 3, Provider: boundary.Claude, SessionID: "t2"}),
			set(boundary.CurrentValue.Address, storage.ID(3)),
			bind("claude/t2", boundary.Binding{Conversation: 3, Kind: boundary.Clear, Entry: 4, Previous: 1}),
		}},
		8: {Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 8, Parent: &storage.ParentRef{ConversationID: 3, At: 4}}},
			set(boundary.CurrentValue.Address, storage.ID(8)),
			bind("claude/t3", boundary.Binding{Conversation: 8, Kind: boundary.Fork, Previous: 3}),
		}},
	}
}

// The transition rule passes a startup, a clear and a fork that write what
// their kinds say, and breaks on each way one of them can go wrong: a
// clear that leaves the old conversation current or names another as
// previous, a fork at the start instead of the newest entry, a second
// binding of a provider session, a current conversation set by no
// boundary.
func TestTheTransitionRuleHoldsEachKindToItsWrites(t *testing.T) {
	run := func(mutate func(map[storage.ID]storage.CommitBatch)) error {
		o := newOracle()
		o.created = []storage.ID{1}
		batches := boundaryBatches()
		if mutate != nil {
			mutate(batches)
		}
		for _, first := range slices.Sorted(maps.Keys(batches)) {
			b := batches[first]
			if err := o.transition(b, "a host", storage.Range{First: first, Last: first + storage.ID(len(b.Writes)) - 1}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(nil); err != nil {
		t.Fatalf("the boundaries as Apply writes them: %v", err)
	}
	without := func(first storage.ID, ns string) func(map[storage.ID]storage.CommitBatch) {
		return func(bs map[storage.ID]storage.CommitBatch) {
			b := bs[first]
			b.Writes = slices.DeleteFunc(slices.Clone(b.Writes), func(w storage.Write) bool { return w.Addr != nil && w.Addr.Namespace == ns })
			bs[first] = b
		}
	}
	for name, mutate := range map[string]func(map[storage.ID]storage.CommitBatch){
		"a clear that keeps the current": without(3, boundary.CurrentValue.Namespace),
		"a clear that stops nothing":     without(3, boundary.StoppedValue.Namespace),
		"a clear naming another previous": func(bs map[storage.ID]storage.CommitBatch) {
			b := bs[3]
			b.Writes = slices.Clone(b.Writes)
			raw, _ := json.Marshal(boundary.Binding{Conversation: 3, Kind: boundary.Clear, Entry: 4, Previous: 2})
			b.Writes[4].Value = raw
			bs[3] = b
		},
		"a fork at the start": func(bs map[storage.ID]storage.CommitBatch) {
			b := bs[8]
			b.Writes = slices.Clone(b.Writes)
			b.Writes[0].Conversation = &storage.Conversation{ID: 8, Parent: &storage.ParentRef{ConversationID: 3, At: 0}}
			bs[8] = b
		},
		"a second binding": func(bs map[storage.ID]storage.CommitBatch) {
			bs[20] = bs[2]
		},
		"a current set by no boundary": func(bs map[storage.ID]storage.CommitBatch) {
			b := bs[8]
			bs[20] = storage.CommitBatch{Writes: b.Writes[1:2]}
		},
	} {
		err := run(mutate)
		var oe *oracleError
		if !errors.As(err, &oe) || oe.Rule != ruleTransition {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleTransition)
		}
	}
}

// The rule reads each provider's events as its hooks document them: the
// quirks of Codex (a later startup with a new id is its /new), Gemini (a
// clear's end before its start; a compression under a new id is the
// silent /resume), Copilot (new is a clear) and the repeats that change
// nothing.
func TestTheRuleReadsEachProvidersEvents(t *testing.T) {
	type step struct {
		p             boundary.Provider
		event, source string
		id            string
		want          boundary.Kind
	}
	for name, steps := range map[string][]step{
		"codex /new": {
			{boundary.Codex, boundary.EventSessionStart, "startup", "a", boundary.Startup},
			{boundary.Codex, boundary.EventSessionStart, "startup", "a", boundary.None},
			{boundary.Codex, boundary.EventSessionStart, "startup", "b", boundary.Clear},
			{boundary.Codex, boundary.EventPreCompact, "auto", "b", boundary.Compact},
		},
		"gemini /clear and /resume": {
			{boundary.Gemini, boundary.EventSessionStart, "startup", "a", boundary.Startup},
			{boundary.Gemini, boundary.EventSessionEnd, "clear", "a", boundary.None},
			{boundary.Gemini, boundary.EventSessionStart, "clear", "b", boundary.Clear},
			{boundary.Gemini, boundary.EventSessionStart, "clear", "b", boundary.None},
			{boundary.Gemini, boundary.EventPreCompress, "auto", "c", boundary.Resume},
		},
		"claude startup, fork, compact, a new launch": {
			{boundary.Claude, boundary.EventPostCompact, "auto", "a", boundary.Compact},
			{boundary.Claude, boundary.EventSessionStart, "startup", "a", boundary.None},
			{boundary.Claude, boundary.EventSessionStart, "fork", "b", boundary.Fork},
			{boundary.Claude, boundary.EventSessionStart, "compact", "c", boundary.Compact},
			{boundary.Claude, boundary.EventSessionStart, "startup", "d", boundary.Startup},
		},
		"copilot and generic": {
			{boundary.Copilot, boundary.EventSessionStart, "new", "a", boundary.Clear},
			{boundary.Generic, boundary.EventSessionStart, "ui-only", "a", boundary.UIOnly},
		},
	} {
		models := map[boundary.Provider]adapterModel{}
		for i, s := range steps {
			got, next := meaning(models[s.p], s.p, s.event, s.source, s.id)
			if got != s.want {
				t.Errorf("%s, step %d (%s %s %s of %s): %s; want %s", name, i, s.p, s.event, s.source, s.id, got, s.want)
			}
			models[s.p] = next
		}
	}
}

// A program delivering Gemini's and Codex's events, every quirk among
// them, runs clean: what Classify and Apply make of them is what the rule
// reads, and the session's conversations follow.
func TestProviderEventsRunByTheRule(t *testing.T) {
	p, err := parseProgram(programMagic + `
swarm tail=1 shell=false
respond text "one"
respond text "two"
boundary startup g1 gemini
accept c0 "hello"
drive c0
boundary clear g1 gemini:end
boundary clear g2 gemini:start
boundary clear g2 gemini
boundary auto g3 gemini:precompress
boundary startup x1 codex
boundary startup x2 codex:start
accept c-1 "again"
drive c-1
`)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := findScenario("generated")
	res, err := runScenario(context.Background(), runSpec{sc: sc, seed: 3, backend: "memory", strategy: "random", program: p}, nil)
	if err != nil || !res.OK {
		t.Fatalf("run: %v %s", err, res.Error)
	}
}

// A delivery's boundary names the provider session the launch was bound
// to as the one before it, and none when that is its own.
func TestABoundaryNamesTheSessionBeforeIt(t *testing.T) {
	cases := []struct {
		name, bound, id, previous string
		broken                    bool
	}{
		{name: "a first startup", id: "s1"},
		{name: "a new session", bound: "s1", id: "s2", previous: "s1"},
		{name: "a repeat", bound: "s1", id: "s1"},
		{name: "a repeat naming itself", bound: "s1", id: "s1", previous: "s1", broken: true},
		{name: "a new session naming none", bound: "s1", id: "s2", broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			tr := boundary.Transition{Boundary: boundary.Boundary{Kind: boundary.None, Provider: boundary.Claude, SessionID: tc.id, Previous: tc.previous}}
			o.classified(tr, boundary.None, false, tc.bound, "boundary startup "+tc.id)
			holdsOrBreaks(t, o.first, ruleClassify, tc.broken)
		})
	}
}

// A boundary that binds from a current conversation the host deleted
// breaks the transition rule; its refusal is held to naming that
// conversation, which must be current and deleted, for a provider session
// not bound already. Any other error passes through as the host's refusal.
func TestABoundaryFromADeletedConversationIsRefused(t *testing.T) {
	o := newOracle()
	o.created = []storage.ID{1}
	o.transcripts.deleted = map[storage.ID]bool{1: true}
	b := boundaryBatches()[2]
	err := o.transition(b, "a host", storage.Range{First: 2, Last: 2})
	var oe *oracleError
	if !errors.As(err, &oe) || oe.Rule != ruleTransition {
		t.Fatalf("a startup binding the deleted root: %v; want a %s violation", err, ruleTransition)
	}

	gone := &boundary.CurrentGoneError{Conversation: 1}
	for name, c := range map[string]struct {
		err      error
		deleted  map[storage.ID]bool
		wasBound bool
		broken   bool
	}{
		"the deleted current":         {gone, map[storage.ID]bool{1: true}, false, false},
		"a current not deleted":       {gone, map[storage.ID]bool{}, false, true},
		"another conversation":        {&boundary.CurrentGoneError{Conversation: 7}, map[storage.ID]bool{1: true, 7: true}, false, true},
		"a repeat of a bound session": {gone, map[storage.ID]bool{1: true}, true, true},
		"a payload refused":           {&boundary.PayloadError{Provider: boundary.Claude, Field: "kind"}, map[storage.ID]bool{}, false, false},
	} {
		o := newOracle()
		o.created = []storage.ID{1}
		o.transcripts.deleted = c.deleted
		err := o.currentGone(c.err, c.wasBound, "boundary startup thread-4")
		if broken := errors.As(err, &oe) && oe.Rule == ruleTransition; broken != c.broken || !c.broken && err != c.err {
			t.Errorf("%s: %v; want broken %v", name, err, c.broken)
		}
	}
}
