package storagetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// queryTests are the rows of the reference's query table (§7.2), one test
// per caller, then the rules every scan shares.
var queryTests = []test{
	{"DriverOpenReadsTheLiveTaskSeedAndNamedOwners", testDriverOpen},
	{"ShutdownReadsTheCurrentLiveTaskIndex", testShutdown},
	{"ContextReadsTheNewestHeadThenTheRangeFromItsBoundary", testContext},
	{"PostToolsReadsToolTasksByID", testPostTools},
	{"UIReadsATranscriptPageBeforeOrAfterAnID", testUIPages},
	{"ValidationReadsNamedRecordsAndFullEntries", testValidation},
	{"ForkReadsTranscriptAndRewindableHistoryThroughTheEntry", testForkRow},
	{"StateConsumerReadsLatestVersionsAndBoundedListRanges", testStateConsumer},
	{"ReopenReadsLiveTasksAndTheConversationsTheyNeed", testReopen},
	{"EntryFiltersApplyBeforeTheLimit", testEntryFilters},
	{"TaskFiltersApplyBeforeTheLimit", testTaskFilters},
	{"AHeadIsFoundWithoutAKind", testHeadWithoutKind},
	{"EntryKindsIsTheSetOfKindStringsWritten", testEntryKinds},
	{"LiveScansSkipTerminalTasksWhileGetTasksReturnsThem", testLiveScans},
	{"ScanConversationsPagesConversationsInIDOrder", testScanConversations},
	{"LimitsOutsideOneToPageLimitMaxAreBadQueries", testBadLimits},
	{"HistoricalReadsOfStateWithoutHistoryFail", testHistoricalReads},
}

// taskWorld is a session with live and terminal tasks in three
// conversations, one of them owned by a task that has since settled.
type taskWorld struct {
	a, b, child        ID
	start, inflight    ID // live in a and b
	owner, settled     ID // terminal; owner created child
	childGen           ID // live in child
	liveAll, liveByIDs []ID
}

func newTaskWorld(s *store) *taskWorld {
	s.t.Helper()
	w := &taskWorld{}
	x := s.tx()
	w.a = x.conversation()
	w.b = x.conversation()
	w.start = x.task(w.a, "generation")
	w.inflight = x.task(w.b, "tool")
	w.owner = x.task(w.a, "tool")
	w.settled = x.task(w.b, "job")
	x.commit()
	x = s.tx()
	x.patch(w.inflight, "running", storage.RoleInflight)
	w.child = x.ownedConversation(w.owner)
	w.childGen = x.task(w.child, "generation")
	x.settle(w.owner, "done")
	x.settle(w.settled, "failed")
	x.commit()
	return w
}

func testDriverOpen(t *testing.T, open Opener) {
	s := newStore(t, open)
	w := newTaskWorld(s)

	for _, tc := range []struct {
		name  string
		convs []ID
		want  []ID
	}{
		{"session", nil, []ID{w.start, w.inflight, w.childGen}},
		{"a", []ID{w.a}, []ID{w.start}},
		{"b", []ID{w.b}, []ID{w.inflight}},
		{"child and a", []ID{w.child, w.a}, []ID{w.start, w.childGen}},
		{"all three", []ID{w.b, w.a, w.child}, []ID{w.start, w.inflight, w.childGen}},
	} {
		p := s.scanTasks(storage.TaskQuery{Cursor: all, ConversationIDs: tc.convs, Live: storage.Bool(true)})
		if got := taskIDs(p.Items); !cmp.Equal(got, tc.want) {
			t.Errorf("live tasks of %s = %v; want %v", tc.name, got, tc.want)
		}
	}
	// A role alone, a role within live or terminal tasks, and a role the
	// live filter excludes.
	for _, tc := range []struct {
		name string
		q    storage.TaskQuery
		want []ID
	}{
		{"start", storage.TaskQuery{Role: storage.RoleStart}, []ID{w.start, w.childGen}},
		{"inflight in b", storage.TaskQuery{Role: storage.RoleInflight, ConversationIDs: []ID{w.b}}, []ID{w.inflight}},
		{"live start", storage.TaskQuery{Role: storage.RoleStart, Live: storage.Bool(true)}, []ID{w.start, w.childGen}},
		{"terminal start", storage.TaskQuery{Role: storage.RoleStart, Live: storage.Bool(false)}, []ID{}},
		{"live terminal", storage.TaskQuery{Role: storage.RoleTerminal, Live: storage.Bool(true)}, []ID{}},
		{"terminal", storage.TaskQuery{Role: storage.RoleTerminal, ConversationIDs: []ID{w.a}}, []ID{w.owner}},
	} {
		tc.q.Cursor = all
		if got := taskIDs(s.scanTasks(tc.q).Items); !cmp.Equal(got, tc.want, cmpopts.EquateEmpty()) {
			t.Errorf("tasks of role %s = %v; want %v", tc.name, got, tc.want)
		}
	}
	live := s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(true)}).Items
	want := &storage.Task{ID: w.inflight, ConversationID: w.b, Kind: "tool", Status: "running", Role: storage.RoleInflight}
	if diff := cmp.Diff(want, live[1], cmpOpts...); diff != "" {
		t.Errorf("the live seed carries the current record (-want +got):\n%s", diff)
	}

	// Attach resolves the owner of each conversation it needs by name, even
	// when the owner has settled.
	owner := s.getConversations(w.child)[w.child].Owner
	got := s.getTasks(owner)[owner]
	wantOwner := &storage.Task{ID: w.owner, ConversationID: w.a, Kind: "tool", Status: "done",
		Role: storage.RoleTerminal, State: js("done")}
	if diff := cmp.Diff(wantOwner, got, cmpOpts...); diff != "" {
		t.Errorf("named terminal owner (-want +got):\n%s", diff)
	}
}

func testShutdown(t *testing.T, open Opener) {
	s := newStore(t, open)
	w := newTaskWorld(s)

	q := storage.TaskQuery{Cursor: storage.Cursor{Limit: 2}, Live: storage.Bool(true)}
	p := s.scanTasks(q)
	if got, want := taskIDs(p.Items), []ID{w.start, w.inflight}; !cmp.Equal(got, want) || p.Next != w.inflight {
		t.Errorf("first page = %v next %d; want %v next %d", got, p.Next, want, w.inflight)
	}
	q.After = p.Next
	p = s.scanTasks(q)
	if got, want := taskIDs(p.Items), []ID{w.childGen}; !cmp.Equal(got, want) || p.Next != 0 {
		t.Errorf("second page = %v next %d; want %v next 0", got, p.Next, want)
	}

	x := s.tx()
	x.settle(w.inflight, "done")
	added := x.task(w.b, "job")
	x.commit()
	got := taskIDs(s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(true)}).Items)
	if want := []ID{w.start, w.childGen, added}; !cmp.Equal(got, want) {
		t.Errorf("live index after a settle and a new task = %v; want %v", got, want)
	}
}

// testContext is the compaction example of reference §2.3, then a reset.
func testContext(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.padTo(10).entry(c, "user")
	x.padTo(20).entry(c, "assistant")
	x.padTo(30).entry(c, "user")
	x.padTo(40).entry(c, "assistant")
	x.padTo(50).entryWith(storage.Entry{ConversationID: c, Kind: "summary", Head: 30,
		Model: []ai.Message{ai.UserText("summary of 10 and 20", 0)}})
	x.commit()

	rangeOf := func(target ID) []ID {
		t.Helper()
		from := ID(0)
		if h := s.newestHead(c, target); h != 0 {
			got := s.getEntries(h)[h]
			from = got.Head
		}
		return entryIDs(s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: c, From: from, Through: target}).Items)
	}
	if got := s.newestHead(c, 0); got != 50 {
		t.Errorf("newest head now = %d; want 50", got)
	}
	if got, want := rangeOf(50), []ID{30, 40, 50}; !cmp.Equal(got, want) {
		t.Errorf("context range at 50 = %v; want %v", got, want)
	}
	if got, want := rangeOf(45), []ID{10, 20, 30, 40}; !cmp.Equal(got, want) {
		t.Errorf("context range at 45 (before the summary) = %v; want %v", got, want)
	}

	x = s.tx()
	x.padTo(60).head(c, "reset", 60)
	x.padTo(70).entry(c, "user")
	x.commit()
	for _, tc := range []struct {
		target, head ID
		want         []ID
	}{
		{0, 60, []ID{60, 70}},
		{70, 60, []ID{60, 70}},
		{60, 60, []ID{60}},
		{59, 50, []ID{30, 40, 50}},
		{50, 50, []ID{30, 40, 50}},
		{49, 0, []ID{10, 20, 30, 40}},
	} {
		if got := s.newestHead(c, tc.target); got != tc.head {
			t.Errorf("newest head at %d = %d; want %d", tc.target, got, tc.head)
		}
		through := tc.target
		if through == 0 {
			through = s.LastSeq()
		}
		if got := rangeOf(through); !cmp.Equal(got, tc.want) {
			t.Errorf("context range at %d = %v; want %v", tc.target, got, tc.want)
		}
	}
}

func (s *store) getEntries(ids ...ID) map[ID]*storage.Entry {
	s.t.Helper()
	m, err := s.GetEntries(s.ctx, ids)
	if err != nil {
		s.t.Fatalf("GetEntries(%v): %v", ids, err)
	}
	return m
}

func testPostTools(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	gen := x.task(c, "generation")
	tools := []ID{
		x.taskWith(storage.Task{ConversationID: c, Kind: "tool", Status: "pending", Role: storage.RoleStart, State: js("call-1")}),
		x.taskWith(storage.Task{ConversationID: c, Kind: "tool", Status: "pending", Role: storage.RoleStart, State: js("call-2")}),
	}
	sibling := x.task(c, "tool")
	x.commit()
	x = s.tx()
	x.settle(gen, "done")
	x.settle(tools[0], "done")
	x.commit()

	got := s.getTasks(append(tools, 999)...)
	if len(got) != 2 {
		t.Fatalf("GetTasks(%v, 999) returned %d tasks; want the 2 that exist", tools, len(got))
	}
	for _, id := range tools {
		if got[id] == nil || got[id].ID != id {
			t.Errorf("tool task %d = %+v; want it, terminal or not", id, got[id])
		}
	}
	if _, ok := got[sibling]; ok {
		t.Errorf("GetTasks returned the unnamed sibling %d", sibling)
	}
	if got[tools[0]].Role != storage.RoleTerminal || s.decode(got[tools[1]].State) != "call-2" {
		t.Errorf("tool records = %+v, %+v; want the first settled and the second carrying its state", got[tools[0]], got[tools[1]])
	}
}

func testUIPages(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	other := x.conversation()
	var e []ID // e[1]..e[10]; ids are not consecutive
	e = append(e, 0)
	for range 10 {
		e = append(e, x.entry(c, "user"))
		x.entry(other, "user")
	}
	x.commit()

	for _, tc := range []struct {
		name     string
		cursor   storage.Cursor
		want     []ID
		wantNext ID
	}{
		{"first page", storage.Cursor{Limit: 3}, e[1:4], e[3]},
		{"after an id", storage.Cursor{After: e[3], Limit: 3}, e[4:7], e[6]},
		{"last full page", storage.Cursor{After: e[6], Limit: 3}, e[7:10], e[9]},
		{"last partial page", storage.Cursor{After: e[9], Limit: 3}, e[10:11], 0},
		{"a page that ends exactly at the end", storage.Cursor{After: e[7], Limit: 3}, e[8:11], 0},
		{"after the end", storage.Cursor{After: e[10], Limit: 3}, nil, 0},
		{"before an id", storage.Cursor{Before: e[8], Limit: 3}, e[5:8], e[5]},
		{"before the next cursor", storage.Cursor{Before: e[5], Limit: 3}, e[2:5], e[2]},
		{"before, reaching the start", storage.Cursor{Before: e[2], Limit: 3}, e[1:2], 0},
		{"before, ending exactly at the start", storage.Cursor{Before: e[4], Limit: 3}, e[1:4], 0},
		{"before the start", storage.Cursor{Before: e[1], Limit: 3}, nil, 0},
		{"before the end", storage.Cursor{Before: s.LastSeq() + 1, Limit: 2}, e[9:11], e[9]},
		{"between two ids", storage.Cursor{After: e[2], Before: e[6], Limit: 10}, e[3:6], 0},
		{"between two ids, limited, reads forward", storage.Cursor{After: e[2], Before: e[6], Limit: 2}, e[3:5], e[4]},
	} {
		p := s.scanEntries(storage.EntryQuery{Cursor: tc.cursor, ConversationID: c})
		if got := entryIDs(p.Items); !cmp.Equal(got, tc.want, cmpOpts...) || p.Next != tc.wantNext {
			t.Errorf("%s (%+v): page = %v next %d; want %v next %d", tc.name, tc.cursor, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testValidation(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	a := x.conversation()
	first := x.entry(a, "user")
	task := x.taskWith(storage.Task{ConversationID: a, Kind: "tool", Status: "pending", Role: storage.RoleStart,
		State: js("args"), Background: true})
	owned := x.ownedConversation(task)
	fork := x.fork(a, first)
	gone := x.conversation()
	x.commit()
	x = s.tx()
	x.deleteConversation(gone)
	x.add(storage.Write{Type: storage.WritePatch, ID: task, Status: "running", Role: storage.RoleInflight,
		State: js("running"), Abort: true, Owns: []ID{owned}})
	later := x.taskWith(storage.Task{ConversationID: a, Kind: "job", Status: "pending", Role: storage.RoleStart, After: []ID{task}})
	result := storage.Entry{ConversationID: a, Kind: "tool_result", ByTaskID: task, Key: "call-1",
		Data: js(map[string]string{"output": "ok"}), Model: []ai.Message{ai.UserText("ok", 7)},
		Edits: []storage.ContextEdit{{Target: first, Action: storage.EditReplace, Messages: []ai.Message{ai.UserText("short", 0)}}}}
	result.ID = x.entryWith(result)
	summary := storage.Entry{ConversationID: fork, Kind: "summary", Head: first, Data: js(map[string]ID{"summarizedThrough": first})}
	summary.ID = x.entryWith(summary)
	x.commit()

	gotConvs := s.getConversations(a, owned, fork, gone, 999)
	wantConvs := map[ID]storage.Conversation{
		a:     {ID: a},
		owned: {ID: owned, Owner: task},
		fork:  {ID: fork, Parent: &storage.ParentRef{ConversationID: a, At: first}},
	}
	if diff := cmp.Diff(wantConvs, gotConvs, cmpOpts...); diff != "" {
		t.Errorf("GetConversations: named records, never deleted or missing ones (-want +got):\n%s", diff)
	}

	gotTasks := s.getTasks(task, later, first)
	wantTasks := map[ID]*storage.Task{
		task: {ID: task, ConversationID: a, Kind: "tool", Status: "running", Role: storage.RoleInflight,
			State: js("running"), Background: true, Owns: []ID{owned}, Abort: true},
		later: {ID: later, ConversationID: a, Kind: "job", Status: "pending", Role: storage.RoleStart, After: []ID{task}},
	}
	if diff := cmp.Diff(wantTasks, gotTasks, cmpOpts...); diff != "" {
		t.Errorf("GetTasks: named task records only (-want +got):\n%s", diff)
	}

	gotEntries := s.getEntries(result.ID, summary.ID, first, task, 999)
	wantEntries := map[ID]*storage.Entry{
		first:      {ID: first, ConversationID: a, Kind: "user"},
		result.ID:  &result,
		summary.ID: &summary,
	}
	if diff := cmp.Diff(wantEntries, gotEntries, cmpOpts...); diff != "" {
		t.Errorf("GetEntries: full entries from any conversation (-want +got):\n%s", diff)
	}
	scanned := s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: a, Kind: "tool_result"}).Items
	if diff := cmp.Diff([]*storage.Entry{&result}, scanned, cmpOpts...); diff != "" {
		t.Errorf("ScanEntries returns full entries (-want +got):\n%s", diff)
	}
	head, _, err := s.NewestHead(s.ctx, fork, 0)
	if err != nil {
		t.Fatalf("NewestHead: %v", err)
	}
	if diff := cmp.Diff(&summary, head, cmpOpts...); diff != "" {
		t.Errorf("NewestHead returns the full entry (-want +got):\n%s", diff)
	}
}

// testForkRow is reference §3.2's example: state written before an entry
// in its commit belongs to a fork at that entry; state committed later
// doesn't.
func testForkRow(t *testing.T, open Opener) {
	s := newStore(t, open)
	plan := storage.ConversationValue[bool]("plugin.plan", storage.Rewind)
	model := storage.ConversationValue[string]("pi.model", storage.Rewind)
	x := s.tx()
	c := x.conversation()
	x.entry(c, "user")
	x.set(model.In(c).Address, "claude-sonnet")
	tool := x.task(c, "tool")
	x.commit()
	x = s.tx()
	x.padTo(300).set(plan.In(c).Address, true)
	result := x.entry(c, "tool_result")
	x.settle(tool, "done")
	x.commit()
	x = s.tx()
	x.set(model.In(c).Address, "claude-opus-5")
	x.commit()
	x = s.tx()
	b := x.fork(c, result)
	x.commit()

	if result != 301 {
		t.Fatalf("tool result numbered %d; want 301", result)
	}
	if got := s.transcript(b); !cmp.Equal(got, s.transcript(c)) {
		t.Errorf("transcript(fork at the last entry) = %v; want the source's %v", got, s.transcript(c))
	}
	if v, ok := s.version(plan.In(b).Address, 0); !ok || string(v.Value) != "true" || v.Seq != 300 {
		t.Errorf("plan in the fork = %s (seq %d, %v); want true written at 300", v.Value, v.Seq, ok)
	}
	if got := s.str(model.In(b).Address, 0); got != "claude-sonnet" {
		t.Errorf("model in the fork = %q; want the one in force at 301, %q", got, "claude-sonnet")
	}
	if got := s.str(model.In(c).Address, 0); got != "claude-opus-5" {
		t.Errorf("model in the source = %q; want %q", got, "claude-opus-5")
	}
}

func testStateConsumer(t *testing.T, open Opener) {
	s := newStore(t, open)
	settings := storage.ConversationValue[string]("test.settings", storage.Rewind)
	frames := storage.ConversationList[string]("test.moves", storage.Rewind)
	x := s.tx()
	c := x.conversation()
	for _, key := range []string{"theme", "font", "zoom", "", "accent"} {
		x.set(settings.In(c).WithKey(key).Address, key+"-1")
	}
	x.set(settings.In(c).WithKey("font").Address, "font-2")
	x.del(settings.In(c).WithKey("zoom").Address)
	m := frames.In(c).Address
	el := []ID{x.push(m, "m1"), x.push(m, "m2"), x.push(m, "m3")}
	mark := x.entry(c, "user")
	el = append(el, x.push(m, "m4"), x.push(m, "m5"))
	fontAt := x.set(settings.In(c).WithKey("font").Address, "font-3")
	x.commit()

	v, ok := s.version(settings.In(c).WithKey("font").Address, 0)
	if !ok || s.decode(v.Value) != "font-3" || v.Seq != fontAt {
		t.Errorf("current font = %s at %d (%v); want \"font-3\" at %d", v.Value, v.Seq, ok, fontAt)
	}
	if got := s.str(settings.In(c).WithKey("font").Address, mark); got != "font-2" {
		t.Errorf("font at %d = %q; want %q", mark, got, "font-2")
	}

	// A bounded list range, now and as of an entry.
	for _, tc := range []struct {
		name     string
		q        storage.ListQuery
		want     []ID
		wantNext ID
	}{
		{"first two", storage.ListQuery{Cursor: storage.Cursor{Limit: 2}}, el[0:2], el[1]},
		{"after the second", storage.ListQuery{Cursor: storage.Cursor{After: el[1], Limit: 2}}, el[2:4], el[3]},
		{"the last two", storage.ListQuery{Cursor: storage.Cursor{Before: el[4] + 1, Limit: 2}}, el[3:5], el[3]},
		{"before the fourth", storage.ListQuery{Cursor: storage.Cursor{Before: el[3], Limit: 5}}, el[0:3], 0},
		{"as of the entry", storage.ListQuery{Cursor: storage.Cursor{Limit: 2}, At: mark}, el[0:2], el[1]},
		{"as of the entry, after the second", storage.ListQuery{Cursor: storage.Cursor{After: el[1], Limit: 2}, At: mark}, el[2:3], 0},
	} {
		p := s.readList(m, tc.q)
		var got []ID
		for _, e := range p.Items {
			got = append(got, e.ID)
		}
		if !cmp.Equal(got, tc.want) || p.Next != tc.wantNext {
			t.Errorf("%s: elements %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}

	// Current values of a namespace, by key, continuing after the last key.
	q := storage.ValueQuery{Scope: storage.ConversationScope(c), Namespace: "test.settings", Limit: 2}
	var keys []string
	for range 10 {
		p := s.scanValues(q)
		for _, kv := range p.Items {
			keys = append(keys, kv.Key)
			if want := s.str(settings.In(c).WithKey(kv.Key).Address, 0); s.decode(kv.Version.Value) != want {
				t.Errorf("ScanValues %q = %s; want GetValue's %q", kv.Key, kv.Version.Value, want)
			}
		}
		if p.Next == 0 {
			break
		}
		if len(p.Items) != q.Limit {
			t.Fatalf("a page with Next set has %d items; want the limit %d", len(p.Items), q.Limit)
		}
		q.After = p.Items[len(p.Items)-1].Key
	}
	if want := []string{"accent", "font", "theme"}; !cmp.Equal(keys, want) {
		t.Errorf("ScanValues keys = %q; want %q (sorted; deleted and keyless values absent)", keys, want)
	}
}

func testReopen(t *testing.T, open Opener) {
	s := newStore(t, open)
	w := newTaskWorld(s)
	x := s.tx()
	for range 5 { // history reopen must not need
		done := x.task(w.a, "job")
		x.settle(done, "done")
	}
	x.commit()

	live := s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(true)}).Items
	var convIDs []ID
	for _, task := range live {
		convIDs = append(convIDs, task.ConversationID)
	}
	convs := s.getConversations(convIDs...)
	if len(convs) != 3 || convs[w.child].Owner != w.owner {
		t.Fatalf("conversations of the live tasks = %+v; want a, b and child (owned by %d)", convs, w.owner)
	}
	owners := s.getTasks(convs[w.child].Owner)
	if got := owners[w.owner]; got == nil || got.Live() {
		t.Errorf("owner of child = %+v; want the terminal record of task %d", got, w.owner)
	}
}

func testEntryFilters(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	u1 := x.entry(c, "user")
	a1 := x.entry(c, "assistant")
	r1 := x.entryWith(storage.Entry{ConversationID: c, Kind: "tool_result", Key: "call-1"})
	r2 := x.entryWith(storage.Entry{ConversationID: c, Kind: "tool_result", Key: "call-2"})
	n1 := x.entryWith(storage.Entry{ConversationID: c, Kind: "notice", Key: "call-1"})
	u2 := x.entry(c, "user")
	a2 := x.entry(c, "assistant")
	r3 := x.entryWith(storage.Entry{ConversationID: c, Kind: "tool_result", Key: "call-3"})
	r4 := x.entryWith(storage.Entry{ConversationID: c, Kind: "tool_result", Key: "call-1"})
	fork := x.fork(c, r3)
	f1 := x.entryWith(storage.Entry{ConversationID: fork, Kind: "tool_result", Key: "call-1"})
	x.commit()

	for _, tc := range []struct {
		name     string
		q        storage.EntryQuery
		want     []ID
		wantNext ID
	}{
		{"kind", storage.EntryQuery{ConversationID: c, Kind: "tool_result", Cursor: storage.Cursor{Limit: 2}}, []ID{r1, r2}, r2},
		{"kind, continued", storage.EntryQuery{ConversationID: c, Kind: "tool_result", Cursor: storage.Cursor{After: r2, Limit: 2}}, []ID{r3, r4}, 0},
		{"kind, backward", storage.EntryQuery{ConversationID: c, Kind: "user", Cursor: storage.Cursor{Before: r4, Limit: 1}}, []ID{u2}, u2},
		{"kind, backward, continued", storage.EntryQuery{ConversationID: c, Kind: "user", Cursor: storage.Cursor{Before: u2, Limit: 1}}, []ID{u1}, 0},
		{"key of any kind", storage.EntryQuery{ConversationID: c, Key: "call-1", Cursor: storage.Cursor{Limit: 2}}, []ID{r1, n1}, n1},
		{"kind and key", storage.EntryQuery{ConversationID: c, Kind: "tool_result", Key: "call-1", Cursor: storage.Cursor{Limit: 2}}, []ID{r1, r4}, 0},
		{"kind within a range", storage.EntryQuery{ConversationID: c, Kind: "assistant", From: a1 + 1, Through: r4, Cursor: storage.Cursor{Limit: 5}}, []ID{a2}, 0},
		{"a kind nothing has", storage.EntryQuery{ConversationID: c, Kind: "summary", Cursor: storage.Cursor{Limit: 5}}, nil, 0},
		{"kind and key in a fork", storage.EntryQuery{ConversationID: fork, Kind: "tool_result", Key: "call-1", Cursor: storage.Cursor{Limit: 5}}, []ID{r1, f1}, 0},
	} {
		p := s.scanEntries(tc.q)
		if got := entryIDs(p.Items); !cmp.Equal(got, tc.want, cmpOpts...) || p.Next != tc.wantNext {
			t.Errorf("%s: page = %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testTaskFilters(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	g1 := x.task(c, "generation")
	t1 := x.task(c, "tool")
	g2 := x.task(c, "generation")
	t2 := x.task(c, "tool")
	j1 := x.task(c, "job")
	t3 := x.task(c, "tool")
	x.commit()
	x = s.tx()
	x.patch(t2, "running", storage.RoleInflight)
	x.patch(j1, "running", storage.RoleInflight)
	x.markAbort(t3)
	x.markAbort(j1)
	x.settle(g1, "done")
	x.settle(t1, "done")
	x.commit()

	for _, tc := range []struct {
		name     string
		q        storage.TaskQuery
		want     []ID
		wantNext ID
	}{
		{"role inflight", storage.TaskQuery{Role: storage.RoleInflight, Cursor: storage.Cursor{Limit: 1}}, []ID{t2}, t2},
		{"role start", storage.TaskQuery{Role: storage.RoleStart, Cursor: storage.Cursor{Limit: 5}}, []ID{g2, t3}, 0},
		{"role terminal", storage.TaskQuery{Role: storage.RoleTerminal, Cursor: storage.Cursor{Limit: 5}}, []ID{g1, t1}, 0},
		{"kind", storage.TaskQuery{Kind: "tool", Cursor: storage.Cursor{Limit: 2}}, []ID{t1, t2}, t2},
		{"kind, live", storage.TaskQuery{Kind: "tool", Live: storage.Bool(true), Cursor: storage.Cursor{Limit: 2}}, []ID{t2, t3}, 0},
		{"kind, terminal", storage.TaskQuery{Kind: "generation", Live: storage.Bool(false), Cursor: storage.Cursor{Limit: 2}}, []ID{g1}, 0},
		{"abort", storage.TaskQuery{Abort: storage.Bool(true), Cursor: storage.Cursor{Limit: 1}}, []ID{j1}, j1},
		{"abort, continued", storage.TaskQuery{Abort: storage.Bool(true), Cursor: storage.Cursor{After: j1, Limit: 1}}, []ID{t3}, 0},
		{"not aborted, live", storage.TaskQuery{Abort: storage.Bool(false), Live: storage.Bool(true), Cursor: storage.Cursor{Limit: 5}}, []ID{g2, t2}, 0},
		{"kind, backward", storage.TaskQuery{Kind: "tool", Cursor: storage.Cursor{Before: t3, Limit: 1}}, []ID{t2}, t2},
		{"role in a conversation", storage.TaskQuery{ConversationIDs: []ID{c}, Role: storage.RoleInflight, Cursor: storage.Cursor{Limit: 5}}, []ID{t2, j1}, 0},
	} {
		p := s.scanTasks(tc.q)
		if got := taskIDs(p.Items); !cmp.Equal(got, tc.want, cmpOpts...) || p.Next != tc.wantNext {
			t.Errorf("%s: page = %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testHeadWithoutKind(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.entry(c, "user")
	checkpoint := x.entryWith(storage.Entry{ConversationID: c, Kind: "plugin.checkpoint", Head: x.next(), Data: js("cp")})
	after := x.entry(c, "assistant")
	x.commit()

	if got := s.newestHead(c, 0); got != checkpoint {
		t.Errorf("newest head = %d; want the plugin entry %d", got, checkpoint)
	}
	if got := s.newestHead(c, after); got != checkpoint {
		t.Errorf("newest head at %d = %d; want %d", after, got, checkpoint)
	}
	if got := s.newestHead(c, checkpoint-1); got != 0 {
		t.Errorf("newest head before the head = %d; want none", got)
	}
}

func testEntryKinds(t *testing.T, open Opener) {
	s := newStore(t, open)
	kinds := func() []string {
		t.Helper()
		k, err := s.EntryKinds(s.ctx)
		if err != nil {
			t.Fatalf("EntryKinds: %v", err)
		}
		return k
	}
	if got := kinds(); len(got) != 0 {
		t.Errorf("EntryKinds of an empty store = %q; want none", got)
	}
	x := s.tx()
	c := x.conversation()
	e := x.entry(c, "user")
	x.entry(c, "assistant")
	x.entry(c, "user")
	fork := x.fork(c, e)
	x.entry(fork, "plugin.note")
	gone := x.conversation()
	x.entry(gone, "notice")
	x.commit()
	x = s.tx()
	x.deleteConversation(gone)
	x.commit()

	if got, want := kinds(), []string{"assistant", "notice", "plugin.note", "user"}; !cmp.Equal(got, want) {
		t.Errorf("EntryKinds = %q; want %q: every kind ever written, sorted, once", got, want)
	}
}

func testLiveScans(t *testing.T, open Opener) {
	s := newStore(t, open)
	w := newTaskWorld(s)
	live := taskIDs(s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(true)}).Items)
	terminal := taskIDs(s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(false)}).Items)
	everything := taskIDs(s.scanTasks(storage.TaskQuery{Cursor: all}).Items)
	if want := []ID{w.start, w.inflight, w.childGen}; !cmp.Equal(live, want) {
		t.Errorf("live scan = %v; want %v", live, want)
	}
	if want := []ID{w.owner, w.settled}; !cmp.Equal(terminal, want) {
		t.Errorf("terminal scan = %v; want %v", terminal, want)
	}
	if want := []ID{w.start, w.inflight, w.owner, w.settled, w.childGen}; !cmp.Equal(everything, want) {
		t.Errorf("unfiltered scan = %v; want %v", everything, want)
	}
	if got := s.getTasks(w.owner, w.settled); len(got) != 2 {
		t.Errorf("GetTasks of terminal tasks returned %d; want 2", len(got))
	}
}

func testScanConversations(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	var ids []ID
	for range 5 {
		ids = append(ids, x.conversation())
	}
	x.commit()
	x = s.tx()
	x.deleteConversation(ids[2])
	x.commit()

	for _, tc := range []struct {
		name     string
		cursor   storage.Cursor
		want     []ID
		wantNext ID
	}{
		{"first page", storage.Cursor{Limit: 2}, []ID{ids[0], ids[1]}, ids[1]},
		{"skips the deleted one", storage.Cursor{After: ids[1], Limit: 2}, []ID{ids[3], ids[4]}, 0},
		{"backward", storage.Cursor{Before: ids[4], Limit: 2}, []ID{ids[1], ids[3]}, ids[1]},
	} {
		p := s.scanConversations(storage.ConversationQuery{Cursor: tc.cursor})
		if got := conversationIDs(p.Items); !cmp.Equal(got, tc.want) || p.Next != tc.wantNext {
			t.Errorf("%s: page = %v next %d; want %v next %d", tc.name, got, p.Next, tc.want, tc.wantNext)
		}
	}
}

func testBadLimits(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	x.commit()
	list := storage.ConversationList[string]("test.list", storage.Rewind).In(c).Address
	scans := map[string]func(limit int) error{
		"ScanConversations": func(limit int) error {
			_, err := s.ScanConversations(s.ctx, storage.ConversationQuery{Cursor: storage.Cursor{Limit: limit}})
			return err
		},
		"ScanEntries": func(limit int) error {
			_, err := s.ScanEntries(s.ctx, storage.EntryQuery{ConversationID: c, Cursor: storage.Cursor{Limit: limit}})
			return err
		},
		"ScanTasks": func(limit int) error {
			_, err := s.ScanTasks(s.ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: limit}})
			return err
		},
		"ReadList": func(limit int) error {
			_, err := s.ReadList(s.ctx, list, storage.ListQuery{Cursor: storage.Cursor{Limit: limit}})
			return err
		},
		"ScanValues": func(limit int) error {
			_, err := s.ScanValues(s.ctx, storage.ValueQuery{Scope: storage.ConversationScope(c), Namespace: "test.v", Limit: limit})
			return err
		},
	}
	for name, scan := range scans {
		for _, limit := range []int{-1, storage.PageLimitMax + 1} {
			if err := scan(limit); !errors.Is(err, storage.ErrBadQuery) {
				t.Errorf("%s with limit %d: error = %v; want storage.ErrBadQuery", name, limit, err)
			}
		}
		for _, limit := range []int{0, 1, storage.PageLimitMax} {
			if err := scan(limit); err != nil {
				t.Errorf("%s with limit %d: %v; want no error", name, limit, err)
			}
		}
	}
	// A zero cursor is a page of PageLimitDefault.
	x = s.tx()
	for i := range storage.PageLimitDefault + 5 {
		x.push(list, fmt.Sprint(i))
	}
	x.commit()
	p, err := s.ReadList(s.ctx, list, storage.ListQuery{})
	if err != nil || len(p.Items) != storage.PageLimitDefault || p.Next == 0 {
		t.Errorf("a list read with a zero cursor = %d items, next %d, %v; want a page of %d and more", len(p.Items), p.Next, err, storage.PageLimitDefault)
	}
}

func testHistoricalReads(t *testing.T, open Opener) {
	s := newStore(t, open)
	x := s.tx()
	c := x.conversation()
	e := x.entry(c, "user")
	task := x.task(c, "generation")
	session := storage.SessionValue[string]("test.session").Address
	sticky := storage.ConversationValue[string]("test.sticky", storage.Sticky).In(c).Address
	sessionList := storage.SessionList[string]("test.session.list").Address
	stickyList := storage.ConversationList[string]("test.sticky.list", storage.Sticky).In(c).Address
	rewind := storage.ConversationValue[string]("test.rewind", storage.Rewind).In(c).Address
	x.set(session, "s")
	x.set(sticky, "c")
	x.push(sessionList, "s")
	x.push(stickyList, "c")
	x.set(rewind, "r")
	x.commit()
	scratch := storage.ScratchValue[string]("test.scratch").In(task).Address
	scratchList := storage.ScratchList[string]("test.scratch.list").In(task).Address
	x = s.scratchTx(task)
	x.set(scratch, "x")
	x.push(scratchList, "x")
	x.commit()
	at := s.LastSeq()

	for _, a := range []storage.Address{session, sticky, scratch} {
		if _, _, err := s.GetValue(s.ctx, a, e); !errors.Is(err, storage.ErrHistoricalRead) {
			t.Errorf("GetValue(%s, %d): error = %v; want storage.ErrHistoricalRead", a, e, err)
		}
		if _, ok := s.version(a, 0); !ok {
			t.Errorf("GetValue(%s, 0) is absent; want the current value", a)
		}
	}
	for _, a := range []storage.Address{sessionList, stickyList, scratchList} {
		if _, err := s.ReadList(s.ctx, a, storage.ListQuery{Cursor: all, At: at}); !errors.Is(err, storage.ErrHistoricalRead) {
			t.Errorf("ReadList(%s, at %d): error = %v; want storage.ErrHistoricalRead", a, at, err)
		}
		if got := s.list(a, 0); len(got) != 1 {
			t.Errorf("ReadList(%s) now = %q; want one element", a, got)
		}
	}
	if got := s.str(rewind, at); got != "r" {
		t.Errorf("a rewindable value read at %d = %q; want %q", at, got, "r")
	}
}
