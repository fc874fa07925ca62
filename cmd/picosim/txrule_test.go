package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// The verdict on a host commit follows the rules of a batch: the kernel's
// first, in write order, then the store's over the batch as it grows.
func TestAHostCommitIsJudgedByTheBatchRules(t *testing.T) {
	conv := func(ns string, rewind bool) storage.Address {
		return storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation, ID: 1}, Namespace: ns, Rewind: rewind}
	}
	session := storage.Address{Scope: storage.SessionScope(), Namespace: "g"}
	r, l, sl := conv("r", true), conv("l", true), conv("sl", false)
	set := func(a storage.Address) storage.Write {
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(`1`)}
	}
	appended := func(a storage.Address) storage.Write {
		return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: json.RawMessage(`1`)}
	}
	// Committed: conversation 1; r a rewindable value (seq 2); l a
	// rewindable list of elements 3 and 4, 3 removed (seq 5).
	model, ok := modelOf([]storage.CommitBatch{{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		set(r), appended(l), appended(l), {Type: storage.WriteListRemove, Addr: &l, Element: 3},
	}}}, 5)
	if !ok {
		t.Fatal("the model does not account for the batches")
	}
	did := func(typ storage.WriteType, a storage.Address, element storage.ID) txDid {
		return txDid{typ: typ, addr: a, element: element, appended: element}
	}
	note := txDid{typ: storage.WriteEntry}
	sticky := r
	sticky.Rewind = false
	rewindSession := session
	rewindSession.Rewind = true
	for _, tc := range []struct {
		name string
		did  []txDid
		rule core.Rule
		bad  int
	}{
		{"writes the rules allow", []txDid{did(storage.WriteValueSet, r, 0), did(storage.WriteListRemove, l, 4), did(storage.WriteListAppend, l, 9), did(storage.WriteListRemove, l, 9), did(storage.WriteValueSet, session, 0)}, "", -1},
		{"a sticky write after a note", []txDid{note, did(storage.WriteListAppend, sl, 7)}, "", -1},
		{"a rewindable write after a note", []txDid{did(storage.WriteValueSet, r, 0), note, did(storage.WriteListClear, l, 0)}, core.RuleStateAfterEntry, 2},
		{"the kernel's rule before an earlier bad write of the store's", []txDid{did(storage.WriteValueSet, sticky, 0), note, did(storage.WriteValueSet, r, 0)}, core.RuleStateAfterEntry, 2},
		{"rewindable session state", []txDid{did(storage.WriteValueSet, session, 0), did(storage.WriteValueSet, rewindSession, 0)}, core.RuleBadAddress, 1},
		{"the other policy of a stored state", []txDid{did(storage.WriteValueSet, sticky, 0)}, core.RuleStorage, 0},
		{"the other policy of a state the commit made", []txDid{did(storage.WriteListAppend, sl, 7), did(storage.WriteListClear, conv("sl", true), 0)}, core.RuleStorage, 1},
		{"a list verb on a value", []txDid{did(storage.WriteListAppend, r, 7)}, core.RuleStorage, 0},
		{"an element removed before it", []txDid{did(storage.WriteListRemove, l, 3)}, core.RuleStorage, 0},
		{"an element removed twice", []txDid{did(storage.WriteListRemove, l, 4), did(storage.WriteListRemove, l, 4)}, core.RuleStorage, 1},
		{"an element removed after a clear", []txDid{did(storage.WriteListClear, l, 0), did(storage.WriteListRemove, l, 4)}, core.RuleStorage, 1},
		{"an element appended after a clear", []txDid{did(storage.WriteListClear, l, 0), did(storage.WriteListAppend, l, 8), did(storage.WriteListRemove, l, 8)}, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, bad, why := txVerdict(model, tc.did)
			if rule != tc.rule || bad != tc.bad {
				t.Fatalf("verdict %q at write %d (%s); want %q at %d", rule, bad, why, tc.rule, tc.bad)
			}
		})
	}
}

// A program's host commits run under the rule: values, a list filled past
// a batch's small maps and removed from, an element removed twice, a
// note before rewindable state, the other policy; each lands or is
// refused as the rule says, and the refusals are in the trace.
func TestHostCommitsRunUnderTheRule(t *testing.T) {
	text := `picosim program 1
swarm tail=2 shell=false queue=0 retry=0 chunk=0
respond text "fine"
tx c0 set:host.r:rewind:1 add:host.rl:rewind:1 set:host.s:sticky:{"n":1}
accept c0 look
drive c0
fork c0 -1
tx c-1 clr:host.rl:rewind fill:host.rl:rewind:20 rm:host.rl:rewind:0 rm:host.rl:rewind:-1 set:host.r:rewind:2
tx c0 rm:host.rl:rewind:0 rerm:host.rl:rewind
tx c0 note set:host.r:rewind:3
tx session add:host.gl:sticky:1 set:host.g:rewind:1
tx c0 set:host.s:rewind:2
tx session add:host.gl:sticky:2 rm:host.gl:sticky:0 set:host.g/k1:sticky:[1,2]
drive c0
`
	_, _, data := runProgramFile(t, text, 5)
	var refused []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"refused"`) && strings.Contains(line, `"action":"tx `) {
			refused = append(refused, line)
		}
	}
	for i, want := range []string{"(storage-structure)", "(rewindable-state-after-entry)", "(bad-address)", "(storage-structure)"} {
		if i >= len(refused) || !strings.Contains(refused[i], want) {
			t.Fatalf("refusal %d: want one by %s; the trace's tx refusals:\n%s", i+1, want, strings.Join(refused, "\n"))
		}
	}
	if len(refused) != 4 {
		t.Fatalf("%d tx refusals; want 4:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// Programs of every hostTxSeeds-th seed from 2 make commits of their own,
// which parse back; no other program does.
func TestHostTxsAreDrawnForTheirSeeds(t *testing.T) {
	fills := 0
	for _, l := range drawnForSeeds(t, "tx", 200, func(seed uint64) bool { return seed%hostTxSeeds == 2 }) {
		for _, w := range l.args[1:] {
			if strings.HasPrefix(w, "fill:") && atoi(w[strings.LastIndex(w, ":")+1:]) > 16 {
				fills++
			}
		}
	}
	if fills == 0 {
		t.Fatal("no drawn commit fills a list past a batch's small maps")
	}
}

// The committed batch must be, write for write, what the host made: its
// addresses bound, its values, its removes' elements, and each Append's
// id its own sequence.
func TestAHostCommitIsWhatItWrote(t *testing.T) {
	a := storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation, ID: 1}, Namespace: "l", Rewind: true}
	other := a
	other.Scope.ID = 2
	prior := []storage.CommitBatch{{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}}
	batch := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteListAppend, Addr: &a, Value: json.RawMessage(`{"i":1}`)},
		{Type: storage.WriteListRemove, Addr: &a, Element: 2},
	}}
	log := &mirrorLog{batches: append(prior, batch), last: 3}
	rng := storage.Range{First: 2, Last: 3}
	made := []txDid{{typ: storage.WriteListAppend, addr: a, value: json.RawMessage(`{ "i": 1 }`), appended: 2}, {typ: storage.WriteListRemove, addr: a, element: 2}}
	for _, tc := range []struct {
		name   string
		change func(d []txDid)
		broken bool
	}{
		{"as made", func([]txDid) {}, false},
		{"another value", func(d []txDid) { d[0].value = json.RawMessage(`{"i":2}`) }, true},
		{"another conversation", func(d []txDid) { d[1].addr = other }, true},
		{"another element", func(d []txDid) { d[1].element = 5 }, true},
		{"an Append numbered otherwise", func(d []txDid) { d[0].appended = 3 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := append([]txDid(nil), made...)
			tc.change(d)
			err := holdTxBatch(log, prior, rng, 1, d, func(format string, args ...any) error { return broke(ruleHostTx, format, args...) })
			holdsOrBreaks(t, err, ruleHostTx, tc.broken)
		})
	}
	// A write more than the batch holds.
	err := holdTxBatch(log, prior, rng, 1, append(append([]txDid(nil), made...), made[1]), func(format string, args ...any) error { return broke(ruleHostTx, format, args...) })
	holdsOrBreaks(t, err, ruleHostTx, true)
}
