package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// A listener that falls behind gets a fault, resnapshots from inside the
// listener without deadlock, and the watch goes on from the new view.
func TestLaggingWatchFaultsThenResnapshotsFromInsideTheListener(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		c := h.Root()
		faults, resnapped := 0, 0
		slow := true
		r := simtest.StartWatch(t, ctx, h, c.ID, func(r *simtest.Watched, e core.ConversationEvent) {
			if e.Type == core.EventFault {
				faults++
				must(r.W.Resnapshot(ctx))
				resnapped++
				slow = false
				return
			}
			if slow {
				must(0, s.Runtime().Sleep(ctx, time.Hour)) // a listener stuck behind
			}
		})
		for i := range 1100 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"i": i}})
				return nil
			}))
		}
		must(0, s.Runtime().Sleep(ctx, 2*time.Hour))
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"after": "resnapshot"}})
			return nil
		}))
		simtest.CaughtUp(ctx, s, r, h.Store().LastSeq())
		if faults != 1 || resnapped != 1 {
			t.Fatalf("faults %d, resnapshots %d; want one of each", faults, resnapped)
		}
		fresh := must(h.Watch(ctx, c.ID, core.WatchOptions{Tail: 1000}))
		simtest.ViewsEqual(t, "view after resnapshot and more events", fresh.View(), r.W.View())
		must(0, h.Close(ctx))
	})
}

func TestAPanickingListenerIsReportedAndUnsubscribedWithoutHarmingOthers(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		var reports []error
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), Report: func(err error) { reports = append(reports, err) }}))
		c := h.Root()
		bad := simtest.StartWatch(t, ctx, h, c.ID, func(*simtest.Watched, core.ConversationEvent) { panic("renderer bug") })
		good := simtest.StartWatch(t, ctx, h, c.ID, nil)
		for i := range 3 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"i": i}})
				return nil
			}))
		}
		simtest.CaughtUp(ctx, s, good, h.Store().LastSeq())
		if n := simtest.CountType(good.Events, core.EventEntry); n != 3 {
			t.Fatalf("the healthy watch got %d entry events; want 3", n)
		}
		if len(bad.Events) != 1 || len(reports) != 1 {
			t.Fatalf("panicking watch got %d events, %d reports; want one event, then unsubscribed and reported", len(bad.Events), len(reports))
		}
		must(0, h.Close(ctx))
	})
}

// Closing the harness ends every watch with a closed event.
func TestCloseEndsWatchesWithClosed(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		r := simtest.StartWatch(t, ctx, h, h.Root().ID, nil)
		must(0, h.Close(ctx))
		for i := 0; i < 100 && len(r.Events) == 0; i++ {
			must(0, s.Runtime().Sleep(ctx, 0))
		}
		if len(r.Events) != 1 || r.Events[0].Type != core.EventClosed {
			t.Fatalf("events = %+v; want one closed", r.Events)
		}
		if _, err := h.Watch(ctx, h.Root().ID, core.WatchOptions{}); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("watch after close = %v; want ErrClosed", err)
		}
	})
}

func TestConversationEventsHaveTheReferenceJSONShapes(t *testing.T) {
	cases := []struct {
		event core.ConversationEvent
		want  string
	}{
		{core.ConversationEvent{Type: core.EventTaskOutput, TaskID: 7, Ops: []delta.Op{delta.Append(delta.Path{"content", 0, "text"}, "hi")}},
			`{"ops":[["a",["content",0,"text"],"hi"]],"task":7,"type":"task_output"}`},
		{core.ConversationEvent{Type: core.EventInbox, Inbox: []core.InboxOp{{Type: "remove", ID: 9}}},
			`{"ops":[{"type":"remove","id":9}],"type":"inbox"}`},
		{core.ConversationEvent{Type: core.EventValue, Addr: "a", Value: json.RawMessage(`null`)}, `{"addr":"a","type":"value","value":null}`},
		{core.ConversationEvent{Type: core.EventValue, Addr: "a", Deleted: true}, `{"addr":"a","type":"value"}`},
		{core.ConversationEvent{Type: core.EventContext, IDs: []storage.ID{3, 5}, ReadAt: 6}, `{"ids":[3,5],"readAt":6,"type":"context"}`},
		{core.ConversationEvent{Type: core.EventFault, Error: "boom"}, `{"error":"boom","type":"fault"}`},
		{core.ConversationEvent{Type: core.EventClosed}, `{"type":"closed"}`},
	}
	for _, tc := range cases {
		got := string(must(json.Marshal(tc.event)))
		if got != tc.want {
			t.Errorf("%s: got %s; want %s", tc.event.Type, got, tc.want)
			continue
		}
		var back core.ConversationEvent
		must(0, json.Unmarshal([]byte(got), &back))
		if diff := cmp.Diff(tc.event, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", tc.event.Type, diff)
		}
	}
	var e core.ConversationEvent
	if err := json.Unmarshal([]byte(`{"type":"nope"}`), &e); err == nil {
		t.Error("an unknown event type decoded")
	}
}

// A client's fold is all or nothing: an event whose second inbox op is bad
// leaves the view as it was, the first op included.
func TestApplyEventLeavesTheViewUnchangedWhenAnOpIsBad(t *testing.T) {
	item := func(id storage.ID) *storage.Element { return &storage.Element{ID: id, Value: json.RawMessage(`"q"`)} }
	v := &core.ConversationView{Inbox: []storage.Element{*item(1)}, ReadAt: 4}
	bad := []core.ConversationEvent{
		{Type: core.EventInbox, ReadAt: 9, Inbox: []core.InboxOp{{Type: "append", Item: item(2)}, {Type: "rename"}}},
		{Type: core.EventInbox, ReadAt: 9, Inbox: []core.InboxOp{{Type: "remove", ID: 1}, {Type: "append"}}},
	}
	for _, e := range bad {
		if err := core.ApplyEvent(v, e); err == nil {
			t.Fatalf("%+v applied; want an error", e.Inbox)
		}
		if len(v.Inbox) != 1 || v.Inbox[0].ID != 1 || v.ReadAt != 4 {
			t.Fatalf("after a rejected event the view is %+v; want it unchanged", v)
		}
	}
	must(0, core.ApplyEvent(v, core.ConversationEvent{Type: core.EventInbox, ReadAt: 9, Inbox: []core.InboxOp{{Type: "append", Item: item(2)}, {Type: "remove", ID: 1}}}))
	if len(v.Inbox) != 1 || v.Inbox[0].ID != 2 || v.ReadAt != 9 {
		t.Fatalf("after a good event the view is %+v; want element 2 at 9", v)
	}
}

// A second Start is an error, not a panic, and the first listener keeps
// the events (issue 23).
func TestASecondStartOfAWatchIsRefused(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := open(t, ctx, s, nil)
		r := simtest.StartWatch(t, ctx, h, h.Root().ID, nil)
		second := 0
		if err := r.W.Start(ctx, func(core.ConversationEvent) { second++ }); !errors.Is(err, core.ErrWatchStarted) {
			t.Fatalf("second Start = %v; want ErrWatchStarted", err)
		}
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"n": 1}})
			return nil
		}))
		simtest.CaughtUp(ctx, s, r, h.Store().LastSeq())
		if len(r.Events) == 0 || second != 0 {
			t.Fatalf("first listener got %d events, second %d; want the first alone", len(r.Events), second)
		}
		must(0, h.Close(ctx))
	})
}

// Options.WatchQueueMax bounds a watch's queue: a listener stuck behind
// gets its lag fault once that many commits are queued, not 1024.
func TestWatchQueueMaxBoundsTheQueue(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), WatchQueueMax: 3, CheckInvariants: true}))
		c := h.Root()
		faults, stuck := 0, true
		simtest.StartWatch(t, ctx, h, c.ID, func(r *simtest.Watched, e core.ConversationEvent) {
			if e.Type == core.EventFault {
				faults++
				return
			}
			if stuck {
				stuck = false
				must(0, s.Runtime().Sleep(ctx, time.Hour))
			}
		})
		for i := range 6 {
			must(c.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]int{"i": i}})
				return nil
			}))
		}
		must(0, s.Runtime().Sleep(ctx, 2*time.Hour))
		if faults != 1 {
			t.Fatalf("lag faults = %d after 6 commits past a stuck listener with a queue of 3; want 1", faults)
		}
		must(0, h.Close(ctx))
	})
}
