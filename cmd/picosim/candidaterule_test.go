package main

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// A collapse recovered with its candidate durable must publish it: its
// recover may neither go back to retry_wait nor settle interrupted; with
// no candidate, or by another method, it may.
func TestARecoveredCollapsePublishesItsCandidate(t *testing.T) {
	addr := agent.CollapseCandidateAddress
	addr.Scope.ID = 5
	scratch := func(typ storage.WriteType) storage.CommitBatch {
		w := storage.Write{Type: typ, Addr: &addr}
		if typ == storage.WriteValueSet {
			w.Value = json.RawMessage(`{"summary":"s"}`)
		}
		return storage.CommitBatch{Kind: storage.BatchScratch, Task: 5, Writes: []storage.Write{w}}
	}
	main := func(w storage.Write) storage.CommitBatch {
		return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}}
	}
	retry := main(storage.Write{Type: storage.WritePatch, ID: 5, Status: "retry_wait", Role: storage.RoleStart})
	interrupted := main(storage.Write{Type: storage.WriteSettle, ID: 5, Status: agent.CollapseInterrupted, Role: storage.RoleTerminal})
	published := main(storage.Write{Type: storage.WriteSettle, ID: 5, Status: "done", Role: storage.RoleTerminal})
	recover := core.Invocation{Task: 5, Method: core.MethodRecover}
	for _, tc := range []struct {
		name    string
		batches []storage.CommitBatch
		inv     core.Invocation
		broken  bool
	}{
		{"published", []storage.CommitBatch{scratch(storage.WriteValueSet), published}, recover, false},
		{"sent back to retry_wait", []storage.CommitBatch{scratch(storage.WriteValueSet), retry}, recover, true},
		{"settled interrupted", []storage.CommitBatch{scratch(storage.WriteValueSet), interrupted}, recover, true},
		{"no candidate", []storage.CommitBatch{retry}, recover, false},
		{"a candidate deleted", []storage.CommitBatch{scratch(storage.WriteValueSet), scratch(storage.WriteValueDelete), retry}, recover, false},
		{"by its execute", []storage.CommitBatch{scratch(storage.WriteValueSet), retry}, core.Invocation{Task: 5, Method: core.MethodExecute}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[5] = agent.CollapseKindName
			var err error
			for i, b := range tc.batches {
				if err = o.candidateSeen(tc.inv, true, b, "a test", storage.Range{First: storage.ID(10 + i), Last: storage.ID(10 + i)}); err != nil {
					break
				}
			}
			holdsOrBreaks(t, err, ruleCandidate, tc.broken)
		})
	}
}

// A host verb that returns no error returns the task its commit made: of
// its kind, in its conversation.
func TestAHostVerbReturnsWhatItMade(t *testing.T) {
	o := newOracle()
	o.kinds[4], o.convs[4] = agent.CollapseKindName, 1
	o.kinds[6], o.convs[6] = agent.JobKindName, 1
	for _, tc := range []struct {
		name   string
		kind   string
		conv   storage.ID
		id     storage.ID
		broken bool
	}{
		{"its collapse", agent.CollapseKindName, 1, 4, false},
		{"its job", agent.JobKindName, 1, 6, false},
		{"no task", agent.CollapseKindName, 1, 0, true},
		{"a task of another kind", agent.CollapseKindName, 1, 6, true},
		{"a task of another conversation", agent.CollapseKindName, 2, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, o.hostMade("a verb", tc.kind, tc.conv, tc.id), ruleHostMade, tc.broken)
		})
	}
}

// A watch lags only past its bound: a lag after no more commits than the
// bound since its view was read breaks the rule; one after more holds.
func TestAWatchLagsOnlyPastItsBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queue  int
		made   storage.ID
		broken bool
	}{
		{"the default bound, not reached", 0, 1024, true},
		{"the default bound, passed", 0, 1025, false},
		{"a drawn bound, not reached", 3, 3, true},
		{"a drawn bound, passed", 3, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, lagChecked("a watch", 10, 10+tc.made, tc.queue), ruleWatchLag, tc.broken)
		})
	}
}
