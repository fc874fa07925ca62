package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// abortSession is a session the oracle has followed: conversation 1 with
// a generation (2), a call (3) that owns conversation 4 where a
// generation (5) works, a background job (6) of conversation 1, and
// queued input: steer 7 of 1, followUp 8 of 4, write 9 of 1, nextRun 10 of
// 4, followUp 11 of conversation 12, which no task of the set touches.
func abortSession(t *testing.T) *oracle {
	t.Helper()
	o := newOracle()
	conv := func(id, owner storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: id, Owner: owner}}
	}
	task := func(id, conv storage.ID, kind string, background bool) storage.Write {
		return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: conv, Kind: kind, Status: "planned", Background: background}}
	}
	input := func(conv storage.ID, mode agent.InputMode) storage.Write {
		a := agent.InboxList.In(conv).Address
		raw, _ := json.Marshal(agent.InboxItem{Mode: mode})
		return storage.Write{Type: storage.WriteListAppend, Addr: &a, Value: raw}
	}
	history := []storage.CommitBatch{
		main1(conv(1, 0)),
		main1(task(2, 1, agent.GenerationKindName, false), task(3, 1, agent.ToolKindName, false)),
		main1(conv(4, 3)),
		main1(task(5, 4, agent.GenerationKindName, false), task(6, 1, agent.JobKindName, true)),
		main1(input(1, agent.ModeSteer), input(4, agent.ModeFollowUp), input(1, agent.ModeWrite), input(4, agent.ModeNextRun), input(12, agent.ModeFollowUp)),
	}
	for _, b := range history {
		r := storage.Range{First: o.last + 1, Last: o.last + storage.ID(len(b.Writes))}
		if err := o.commit(core.Invocation{}, false, r, b); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func markWrite(id storage.ID) storage.Write {
	return storage.Write{Type: storage.WritePatch, ID: id, Abort: true}
}

func cancelWrites(conv, input storage.ID) []storage.Write {
	a := agent.InboxList.In(conv).Address
	return []storage.Write{{Type: storage.WriteListRemove, Addr: &a, Element: input}, resultWrite(conv, input, agent.InputCancelled)}
}

// abortBy judges batch b as a host's abort a of o's session.
func abortBy(o *oracle, a hostAbort, b storage.CommitBatch) error {
	set := o.foregroundSet(a)
	r := storage.Range{First: o.last + 1, Last: o.last + storage.ID(len(b.Writes))}
	if err := o.commit(core.Invocation{}, false, r, b); err != nil {
		return err
	}
	return o.aborted(set, b, r, "a host")
}

func TestOracleAbortMarksItsForegroundSet(t *testing.T) {
	whole := func() []storage.Write {
		ws := []storage.Write{markWrite(2), markWrite(3), markWrite(5)}
		ws = append(ws, cancelWrites(1, 7)...)
		return append(ws, cancelWrites(4, 8)...)
	}
	set := abortSession(t).foregroundSet(hostAbort{conv: 1, cancels: true})
	if want := []storage.ID{2, 3, 5}; !slices.Equal(set.tasks, want) {
		t.Fatalf("the set's tasks = %v; want %v (the background job is not in it)", set.tasks, want)
	}
	if want := []storage.ID{7, 8}; !slices.Equal(set.inputs, want) {
		t.Fatalf("the set's inputs = %v; want %v (steer and followUp of the conversations it touches)", set.inputs, want)
	}
	if err := abortBy(abortSession(t), hostAbort{conv: 1, cancels: true}, main1(whole()...)); err != nil {
		t.Fatalf("the whole abort: %v", err)
	}
	// A fork's abort marks the same tasks and cancels nothing.
	if err := abortBy(abortSession(t), hostAbort{conv: 1}, main1(markWrite(2), markWrite(3), markWrite(5))); err != nil {
		t.Fatalf("a fork's abort: %v", err)
	}
	// Tasks marked before the abort need no mark of it.
	o := abortSession(t)
	if err := o.commit(core.Invocation{}, false, storage.Range{First: o.last + 1, Last: o.last + 1}, main1(markWrite(5))); err != nil {
		t.Fatal(err)
	}
	if err := abortBy(o, hostAbort{conv: 1}, main1(markWrite(2), markWrite(3))); err != nil {
		t.Fatalf("with the child's task marked already: %v", err)
	}

	without := func(drop int) []storage.Write { ws := whole(); return append(ws[:drop:drop], ws[drop+1:]...) }
	broken := map[string]storage.CommitBatch{
		"the child's task unmarked":      main1(without(2)...),
		"the followUp left queued":       main1(whole()[:5]...),
		"the background job marked":      main1(append(whole(), markWrite(6))...),
		"a write taken out of the inbox": main1(append(whole(), cancelWrites(1, 9)...)...),
		"another conversation's input":   main1(append(whole(), cancelWrites(12, 11)...)...),
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			wantRule(t, abortBy(abortSession(t), hostAbort{conv: 1, cancels: true}, b), ruleConversationAbort)
		})
	}
}

func TestOracleToolAbortMarksItsChildren(t *testing.T) {
	inv := core.Invocation{Task: 3, ConversationID: 1, Method: core.MethodAbort}
	settle := storage.Write{Type: storage.WriteSettle, ID: 3, Status: "aborted"}
	judge := func(ws ...storage.Write) error {
		o := abortSession(t)
		return o.commit(inv, true, storage.Range{First: o.last + 1, Last: o.last + storage.ID(len(ws))}, main1(ws...))
	}
	if err := judge(settle, markWrite(5)); err != nil {
		t.Fatalf("the call's abort that marks its child's task: %v", err)
	}
	wantRule(t, judge(settle), ruleToolAbortChildren)
	// Another task's abort, or a call's settlement by its execute, is not
	// judged by the rule.
	o := abortSession(t)
	if err := o.commit(core.Invocation{Task: 3, ConversationID: 1, Method: core.MethodExecute}, true, storage.Range{First: o.last + 1, Last: o.last + 1}, main1(storage.Write{Type: storage.WriteSettle, ID: 3, Status: "done"})); err != nil {
		t.Fatalf("a call settled by its execute: %v", err)
	}
}

// Half the child-abort programs (every childAbortSeeds-th seed from 3)
// queue steer or followUp input in the root's newest child before they
// abort; no other program names a child in an input line.
func TestChildAbortsQueueInputInTheChild(t *testing.T) {
	with := 0
	for seed := uint64(1); seed <= 400; seed++ {
		p := drawProgram(seed)
		n := 0
		for _, l := range p.lines {
			if len(l.args) > 0 && l.args[0] == "c0/child" && (l.op == "steer" || l.op == "followup") {
				n++
			}
		}
		if n > 0 && seed%childAbortSeeds != 3 {
			t.Fatalf("seed %d, no child-abort program, queues %d inputs in a child:\n%s", seed, n, p)
		}
		if n > 0 {
			with++
		}
	}
	if perSeeds := 400 / childAbortSeeds; with < perSeeds/4 || with > perSeeds*3/4 {
		t.Fatalf("%d of %d child-abort programs queue input in the child; want about half", with, 400/childAbortSeeds)
	}
}

// AbortTask that returned no error has its task marked, by its own commit
// or an earlier one.
func TestAbortTaskMarksIt(t *testing.T) {
	o := newOracle()
	o.kinds[3], o.convs[3] = "generation", 1
	holdsOrBreaks(t, o.taskAborted(3), ruleTaskAbort, true)
	o.marked[3] = true
	holdsOrBreaks(t, o.taskAborted(3), ruleTaskAbort, false)
}
