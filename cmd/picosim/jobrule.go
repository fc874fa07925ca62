package main

import (
	"encoding/json"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleJobEnd: a job ends as the method that ends it says (§8.6): its abort
// settles it killed, a recover (of a run it may not repeat) lost, and only
// an execute or a recover that ran it again settles it exited; the notice
// of its end that the same commit appends names the status it ends with.
const ruleJobEnd oracleRule = "a-job-ends-as-its-method"

// jobEnded holds w, a settlement of a job at seq in batch b, to the rule.
func (o *oracle) jobEnded(inv core.Invocation, byTask bool, w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.JobKindName {
		return nil
	}
	if byTask && inv.Task == w.ID {
		var want string
		switch {
		case inv.Method == core.MethodAbort:
			want = agent.JobKilled
		case w.Status == agent.JobKilled:
			want = "ended by its abort"
		case w.Status == agent.JobLost && inv.Method != core.MethodRecover:
			want = "lost only by a recover"
		}
		if want != "" && want != w.Status {
			return o.fail(broke(ruleJobEnd, "%s settled job %d %s at %d; want %s", by, w.ID, w.Status, seq, want))
		}
	}
	for _, x := range b.Writes {
		var d agent.JobNoticeData
		if x.Type != storage.WriteEntry || x.Entry == nil || x.Entry.Kind != core.NoticeKind.Kind() || json.Unmarshal(x.Entry.Data, &d) != nil || d.Job != w.ID {
			continue
		}
		if d.Status != w.Status {
			return o.fail(broke(ruleJobEnd, "%s settled job %d %s at %d with a notice %d in its commit saying %s", by, w.ID, w.Status, seq, x.Entry.ID, d.Status))
		}
	}
	return nil
}
