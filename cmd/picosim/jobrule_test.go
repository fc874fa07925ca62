package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// A job's settlement is held to the method that makes it and to the notice
// its commit appends; a settlement by another task is held to the notice
// alone.
func TestAJobEndsAsItsMethodSays(t *testing.T) {
	settle := func(status string, notice string) storage.CommitBatch {
		b := storage.CommitBatch{Kind: storage.BatchMain}
		if notice != "" {
			data, _ := json.Marshal(agent.JobNoticeData{Job: 7, Cmd: "serve", Status: notice})
			b.Writes = append(b.Writes, storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 11, ConversationID: 1, Kind: core.NoticeKind.Kind(), Data: data}})
		}
		b.Writes = append(b.Writes, storage.Write{Type: storage.WriteSettle, ID: 7, Status: status, Role: storage.RoleTerminal})
		return b
	}
	own := func(m core.Method) core.Invocation { return core.Invocation{Task: 7, ConversationID: 1, Method: m} }
	cases := []struct {
		name   string
		inv    core.Invocation
		byTask bool
		b      storage.CommitBatch
		broken bool
	}{
		{name: "an execute exits", inv: own(core.MethodExecute), byTask: true, b: settle(agent.JobExited, "")},
		{name: "a recover that ran again exits", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobExited, agent.JobExited)},
		{name: "a recover loses the run", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobLost, agent.JobLost)},
		{name: "an abort kills", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobKilled, agent.JobKilled)},
		{name: "a recover that kills", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobKilled, ""), broken: true},
		{name: "an abort that loses", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobLost, ""), broken: true},
		{name: "an abort that exits", inv: own(core.MethodAbort), byTask: true, b: settle(agent.JobExited, ""), broken: true},
		{name: "an execute that loses", inv: own(core.MethodExecute), byTask: true, b: settle(agent.JobLost, ""), broken: true},
		{name: "a notice of another end", inv: own(core.MethodRecover), byTask: true, b: settle(agent.JobLost, agent.JobExited), broken: true},
		{name: "another task's settlement with its notice", inv: core.Invocation{Task: 9, Method: core.MethodExecute}, byTask: true, b: settle(agent.JobKilled, agent.JobKilled)},
		{name: "another task's settlement with a wrong notice", inv: core.Invocation{Task: 9, Method: core.MethodExecute}, byTask: true, b: settle(agent.JobKilled, agent.JobLost), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[7] = agent.JobKindName
			w := tc.b.Writes[len(tc.b.Writes)-1]
			holdsOrBreaks(t, o.jobEnded(tc.inv, tc.byTask, w, tc.b, "a test", 12), ruleJobEnd, tc.broken)
		})
	}
}

// holdsOrBreaks fails t unless err is nil, or with broken a violation of
// rule.
func holdsOrBreaks(t *testing.T, err error, rule oracleRule, broken bool) {
	t.Helper()
	var oe *oracleError
	switch {
	case broken && (!errors.As(err, &oe) || oe.Rule != rule):
		t.Fatalf("got %v; want the rule %s broken", err, rule)
	case !broken && err != nil:
		t.Fatalf("got %v; want it to hold", err)
	}
}
