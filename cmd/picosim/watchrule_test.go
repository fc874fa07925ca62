package main

import (
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// A watch's task_update events are held to the task as the watch last
// showed it: its capture, then each event of the task; a resnapshot starts
// again from the new capture. Each broken event is caught, naming the rule,
// and the unbroken sequence passes.
func TestTaskUpdateCarriesThePreviousTask(t *testing.T) {
	task := func(id storage.ID, status string) *storage.Task {
		return &storage.Task{ID: id, ConversationID: 1, Kind: "tool", Status: status, Role: "inflight"}
	}
	update := func(prev, next *storage.Task) core.ConversationEvent {
		return core.ConversationEvent{Type: core.EventTaskUpdate, Task: next, Previous: prev, ReadAt: 9}
	}
	capture := &core.ConversationView{Tasks: []*storage.Task{task(2, "pending")}}
	recapture := &core.ConversationView{Tasks: []*storage.Task{task(2, "waiting")}}
	cases := []struct {
		name   string
		events []core.ConversationEvent
		resnap bool // the watch resnapshots after the first event
		broken bool
	}{
		{name: "from the capture, then from each event", events: []core.ConversationEvent{
			update(task(2, "pending"), task(2, "running")),
			update(task(2, "running"), task(2, "waiting")),
			{Type: core.EventTaskStart, Task: task(3, "pending")},
			update(task(3, "pending"), task(3, "running")),
			{Type: core.EventTaskEnd, Task: task(3, "done")},
		}},
		{name: "from a new capture after a resnapshot", resnap: true, events: []core.ConversationEvent{
			update(task(2, "pending"), task(2, "running")),
			update(task(2, "waiting"), task(2, "running")),
		}},
		{name: "a task unknown to the watch is not judged", events: []core.ConversationEvent{
			update(task(7, "pending"), task(7, "running")),
		}},
		{name: "the updated task as its previous", broken: true, events: []core.ConversationEvent{
			update(task(2, "running"), task(2, "running")),
		}},
		{name: "the capture's task after an update", broken: true, events: []core.ConversationEvent{
			update(task(2, "pending"), task(2, "running")),
			update(task(2, "pending"), task(2, "waiting")),
		}},
		{name: "no previous task", broken: true, events: []core.ConversationEvent{
			update(nil, task(2, "running")),
		}},
		{name: "another task as previous", broken: true, events: []core.ConversationEvent{
			{Type: core.EventTaskStart, Task: task(3, "pending")},
			update(task(3, "pending"), task(2, "running")),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{oracle: newOracle()}
			trail := &taskTrail{e: e, what: "watch 0"}
			trail.reset(capture)
			for i, ev := range tc.events {
				trail.event(ev)
				if i == 0 && tc.resnap {
					trail.reset(recapture)
				}
			}
			var oe *oracleError
			switch err := e.oracle.first; {
			case tc.broken && (!errors.As(err, &oe) || oe.Rule != ruleWatchPrevious):
				t.Fatalf("got %v; want a %s failure", err, ruleWatchPrevious)
			case !tc.broken && err != nil:
				t.Fatalf("got %v; want none", err)
			}
		})
	}
}
