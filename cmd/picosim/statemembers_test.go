package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// A member named twice at a state's top level is found, wherever it
// stands; one named in two nested objects, or once, is not.
func TestMemberTwiceFindsARepeatedMember(t *testing.T) {
	for raw, want := range map[string]string{
		`{"attempt":0,"attempt":1}`:                   "attempt",
		`{"a":{"x":1},"b":[1,{"a":2}],"c":"a","a":3}`: "a",
		`{"a":{"x":1,"y":{"x":2}},"x":[{"x":1}]}`:     "",
		`{}`:    "",
		`[1,1]`: "",
		``:      "",
	} {
		got, twice := memberTwice(json.RawMessage(raw))
		if got != want || twice != (want != "") {
			t.Errorf("memberTwice(%s) = %q, %v; want %q", raw, got, twice, want)
		}
	}
}

// A task created, patched or settled with a member twice breaks the rule.
func TestTheStateRuleRefusesAMemberTwice(t *testing.T) {
	twice := json.RawMessage(`{"attempt":0,"status":"x","attempt":1}`)
	for name, w := range map[string]storage.Write{
		"created": {Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "k", Status: "pending", Role: storage.RoleStart, State: twice}},
		"patched": {Type: storage.WritePatch, ID: 2, State: twice},
		"settled": {Type: storage.WriteSettle, ID: 2, Status: "done", State: twice},
	} {
		o := newOracle()
		o.kinds[2], o.convs[2] = "k", 1
		var oe *oracleError
		err := o.commit(core.Invocation{}, false, storage.Range{First: 1, Last: 1}, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}})
		if !errors.As(err, &oe) || oe.Rule != ruleStateMembers {
			t.Errorf("a state %s with a member twice: %v; want a %s violation", name, err, ruleStateMembers)
		}
	}
}
