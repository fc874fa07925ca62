package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// --- helpers (prefixed inbox* so they cannot collide with other files) ---

// inboxBatch is one committed batch and the sequences it was given.
type inboxBatch struct {
	batch storage.CommitBatch
	rng   storage.Range
}

// inboxRecorder records every batch the harness commits, so a test can
// check commit boundaries. Simulated actors run one at a time, so a plain
// slice suffices.
type inboxRecorder struct {
	storage.Storage
	batches []inboxBatch
}

func newInboxRecorder() *inboxRecorder { return &inboxRecorder{Storage: memory.New()} }

func (r *inboxRecorder) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	rng, err := r.Storage.Commit(ctx, b)
	if err == nil && len(b.Writes) > 0 {
		r.batches = append(r.batches, inboxBatch{b, rng})
	}
	return rng, err
}

// since returns the batches committed after the first n.
func (r *inboxRecorder) since(n int) []inboxBatch { return slices.Clone(r.batches[n:]) }

// inboxCounter counts the read calls a harness makes, per method.
type inboxCounter struct {
	storage.Storage
	calls map[string]int
}

func (c *inboxCounter) GetValue(ctx context.Context, a storage.Address, at storage.ID) (storage.Version, bool, error) {
	c.calls["GetValue"]++
	return c.Storage.GetValue(ctx, a, at)
}

func (c *inboxCounter) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	c.calls["ScanEntries"]++
	return c.Storage.ScanEntries(ctx, q)
}

func (c *inboxCounter) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	c.calls["GetEntries"]++
	return c.Storage.GetEntries(ctx, ids)
}

func (c *inboxCounter) ReadList(ctx context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	c.calls["ReadList"]++
	return c.Storage.ReadList(ctx, a, q)
}

func (c *inboxCounter) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	c.calls["ScanValues"]++
	return c.Storage.ScanValues(ctx, q)
}

func (c *inboxCounter) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	c.calls["ScanTasks"]++
	return c.Storage.ScanTasks(ctx, q)
}

func (c *inboxCounter) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	c.calls["GetTasks"]++
	return c.Storage.GetTasks(ctx, ids)
}

// inboxOf reads a conversation's queued items in admission order.
func inboxOf(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID) []core.Elem[agent.InboxItem] {
	t.Helper()
	p := must(h.Store().ReadList(ctx, agent.InboxList.In(conv).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}}))
	out := make([]core.Elem[agent.InboxItem], len(p.Items))
	for i, e := range p.Items {
		out[i].ID = e.ID
		if err := json.Unmarshal(e.Value, &out[i].Value); err != nil {
			t.Fatalf("inbox element %d: %v", e.ID, err)
		}
	}
	return out
}

// inboxIDs lists the ids of a conversation's queued items.
func inboxIDs(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID) []storage.ID {
	t.Helper()
	var ids []storage.ID
	for _, e := range inboxOf(t, ctx, h, conv) {
		ids = append(ids, e.ID)
	}
	return ids
}

// inputGroups lists the input group of every generation of a conversation,
// in creation order.
func inputGroups(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID) [][]storage.ID {
	t.Helper()
	p := must(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax},
		ConversationIDs: []storage.ID{conv}, Kind: agent.GenerationKindName}))
	var out [][]storage.ID
	for _, task := range p.Items {
		var st agent.GenerationState
		if err := json.Unmarshal(task.State, &st); err != nil {
			t.Fatalf("generation %d state: %v", task.ID, err)
		}
		out = append(out, st.Inputs)
	}
	return out
}

// tasksOf returns a conversation's tasks of one kind, in creation order.
func tasksOf(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID, kind string) []*storage.Task {
	t.Helper()
	return must(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax},
		ConversationIDs: []storage.ID{conv}, Kind: kind})).Items
}

// liveTasks returns a conversation's live tasks.
func liveTasks(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID) []*storage.Task {
	t.Helper()
	return must(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax},
		ConversationIDs: []storage.ID{conv}, Live: storage.Bool(true)})).Items
}

// note queues (or, idle, lands) a write: a notice the model sees as "note x".
func note(ctx context.Context, c *agent.Conversation, x string) (storage.ID, error) {
	id, _, err := c.Write(ctx, core.NoticeKind, core.EntryDraft{
		Data:  map[string]string{"text": x},
		Model: []ai.Message{ai.UserText("note "+x, 0)},
	})
	return id, err
}

// sleepyTool sets started (if any) and then sleeps d of virtual time, so a
// turn stays busy while the test queues input.
func sleepyTool(name string, started core.Event, d time.Duration) agent.Tool {
	return toolFunc(name, func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
		if started != nil {
			started.Set()
		}
		if err := rt.Sleep(ctx, rt.Now().Add(d)); err != nil {
			return err
		}
		out.Write(name + " done")
		return nil
	})
}

// inboxDriveAsync drives c in a second actor; the event is set when the
// drive returned (idle).
func inboxDriveAsync(t testing.TB, ctx context.Context, s *sim.Sim, c *agent.Conversation) core.Event {
	done := s.Runtime().NewEvent("drive-returned")
	s.Runtime().Go(ctx, "drive", func(ctx context.Context) {
		r, err := c.Drive(ctx)
		if err != nil || r != core.Idle {
			t.Errorf("drive = %s, %v; want idle", r, err)
		}
		done.Set()
	})
	return done
}

// entryIDOf returns the id of the conversation's last entry of kind whose
// summary is text.
func entryIDOf(t testing.TB, ctx context.Context, a *loop, conv storage.ID, kind, text string) storage.ID {
	t.Helper()
	p := must(a.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax}))
	var id storage.ID
	for _, e := range p.Items {
		if e.Kind == kind && summarize(e) == text {
			id = e.ID
		}
	}
	if id == 0 {
		t.Fatalf("no %s entry %q in %v", kind, text, a.transcript(ctx, conv))
	}
	return id
}

// resultKey is pi.inputResult[id] in conv, for direct commits.
func resultKey(conv, id storage.ID) storage.Value[agent.InputResult] {
	return agent.InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(id), 10))
}

// writesOf lists a batch's writes of one type to one namespace ("" = any).
func writesOf(b storage.CommitBatch, typ storage.WriteType, namespace string) []storage.Write {
	var out []storage.Write
	for _, w := range b.Writes {
		if w.Type != typ {
			continue
		}
		if namespace != "" && (w.Addr == nil || w.Addr.Namespace != namespace) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// terminalWrites counts, per input key, the writes that set a terminal
// result, over every recorded batch of conv.
func terminalWrites(t testing.TB, rec *inboxRecorder, conv storage.ID) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, b := range rec.batches {
		for _, w := range writesOf(b.batch, storage.WriteValueSet, agent.InputResultValue.Namespace) {
			if w.Addr.Scope.ID != conv {
				continue
			}
			var r agent.InputResult
			if err := json.Unmarshal(w.Value, &r); err != nil {
				t.Fatal(err)
			}
			if r.Status.Terminal() {
				n[w.Addr.Key]++
			}
		}
	}
	return n
}

func idKey(id storage.ID) string { return strconv.FormatInt(int64(id), 10) }

// --- idle acceptance ---

// An idle acceptance is one commit: it appends the inbox element (whose id
// is the input id), places it as a user entry, removes it, writes its
// result running and creates the generation; the inbox then reads empty.
func TestIdleAcceptAppendsPlacesAndRemovesInOneCommit(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec})
		a.faux.SetResponses(answer("hello"))
		c := a.h.Root()
		before, n := a.h.Store().LastSeq(), len(rec.batches)
		id := must(c.Accept(ctx, userText("hi"), agent.AcceptOptions{}))
		after := a.h.Store().LastSeq()
		batches := rec.since(n)
		if len(batches) != 1 {
			t.Fatalf("idle accept committed %d batches; want 1", len(batches))
		}
		b := batches[0]
		if b.rng.First != before+1 || b.rng.Last != after {
			t.Fatalf("accept batch covers %d..%d; want %d..%d (lastSeq advanced by exactly that batch)", b.rng.First, b.rng.Last, before+1, after)
		}
		appends := writesOf(b.batch, storage.WriteListAppend, agent.InboxList.Namespace)
		removes := writesOf(b.batch, storage.WriteListRemove, agent.InboxList.Namespace)
		if len(appends) != 1 || len(removes) != 1 {
			t.Fatalf("%d inbox appends and %d removes; want one of each", len(appends), len(removes))
		}
		appendSeq := b.rng.First + storage.ID(slices.IndexFunc(b.batch.Writes, func(w storage.Write) bool {
			return w.Type == storage.WriteListAppend
		}))
		if id != appendSeq || removes[0].Element != id {
			t.Fatalf("input id %d, element appended at %d, removed element %d; want all equal", id, appendSeq, removes[0].Element)
		}
		var user storage.ID
		for i, w := range b.batch.Writes {
			if w.Type == storage.WriteEntry && w.Entry.Kind == core.UserKind.Kind() {
				user = b.rng.First + storage.ID(i)
			}
		}
		if user == 0 {
			t.Fatalf("the accept batch placed no user entry: %+v", b.batch.Writes)
		}
		sets := writesOf(b.batch, storage.WriteValueSet, agent.InputResultValue.Namespace)
		if len(sets) != 1 || sets[0].Addr.Key != idKey(id) || !strings.Contains(string(sets[0].Value), `"running"`) {
			t.Fatalf("result writes in the accept batch = %+v; want input %d set running", sets, id)
		}
		if got := len(writesOf(b.batch, storage.WriteTask, "")); got != 1 {
			t.Fatalf("the accept batch created %d tasks; want the generation", got)
		}
		if got := inboxOf(t, ctx, a.h, c.ID); len(got) != 0 {
			t.Fatalf("inbox after idle accept = %+v; want empty", got)
		}
		if diff := cmp.Diff([][]storage.ID{{id}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("generation groups (-want +got):\n%s", diff)
		}
		if got, want := a.result(ctx, c, id), (agent.InputResult{Status: agent.InputRunning, PlacementEntryID: user}); got != want {
			t.Fatalf("result after accept = %+v; want %+v", got, want)
		}
		must(c.Drive(ctx))
		answerID := entryIDOf(t, ctx, a, c.ID, "assistant", "hello")
		if got, want := a.result(ctx, c, id), (agent.InputResult{Status: agent.InputDone, PlacementEntryID: user, ResultEntryID: answerID}); got != want {
			t.Fatalf("result after the turn = %+v; want %+v", got, want)
		}
		must(0, a.h.Close(ctx))
	})
}

// A busy acceptance of user content with an image is one inbox append (no
// placement, no task), and the queued element carries the complete draft,
// so the image renders from the inbox before it lands.
func TestBusyImageAcceptIsOneAppendAndRendersFromTheQueuedItem(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec})
		a.faux.SetResponses(answer("one"), answer("saw it"))
		c := a.h.Root()
		first := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{})) // the generation makes it busy
		img := ai.Block{Type: ai.BlockImage, Data: "iVBORw0KGgoAAAANSUhEUg==", MimeType: "image/png"}
		content := ai.Blocks(ai.Text("what is this?"), img)
		n := len(rec.batches)
		id := must(c.Accept(ctx, content, agent.AcceptOptions{RequestID: "img-1"}))
		batches := rec.since(n)
		if len(batches) != 1 {
			t.Fatalf("busy accept committed %d batches; want 1", len(batches))
		}
		b := batches[0].batch
		appends := writesOf(b, storage.WriteListAppend, "")
		if len(appends) != 1 || appends[0].Addr.Namespace != agent.InboxList.Namespace || batches[0].rng.First+storage.ID(slices.IndexFunc(b.Writes, func(w storage.Write) bool { return w.Type == storage.WriteListAppend })) != id {
			t.Fatalf("busy accept appended %+v; want exactly one inbox append, element %d", appends, id)
		}
		for _, typ := range []storage.WriteType{storage.WriteListRemove, storage.WriteEntry, storage.WriteTask, storage.WriteListClear} {
			if got := writesOf(b, typ, ""); len(got) != 0 {
				t.Fatalf("busy accept wrote %d %s; want none", len(got), typ)
			}
		}
		queued := inboxOf(t, ctx, a.h, c.ID)
		if len(queued) != 1 || queued[0].ID != id {
			t.Fatalf("inbox = %+v; want only input %d", queued, id)
		}
		item := queued[0].Value
		if item.Mode != agent.ModeFollowUp || item.RequestID != "img-1" || item.Entry.Kind != core.UserKind.Kind() || len(item.Entry.Model) != 1 {
			t.Fatalf("queued item = %+v; want a followUp user draft with request id img-1", item)
		}
		if diff := cmp.Diff(content, item.Entry.Model[0].Content); diff != "" {
			t.Fatalf("queued draft content (-want +got):\n%s", diff)
		}
		if got, want := a.result(ctx, c, id), (agent.InputResult{Status: agent.InputQueued, RequestID: "img-1"}); got != want {
			t.Fatalf("queued result = %+v; want %+v", got, want)
		}
		must(c.Drive(ctx))
		r := a.result(ctx, c, id)
		placed, ok := must2(a.h.GetEntry(ctx, r.PlacementEntryID))
		if r.Status != agent.InputDone || !ok || len(placed.Model) != 1 {
			t.Fatalf("result after drive = %+v (placement found %v); want done with a placed user entry", r, ok)
		}
		if diff := cmp.Diff(content, placed.Model[0].Content); diff != "" {
			t.Fatalf("placed entry content (-want +got):\n%s", diff)
		}
		reqs := a.faux.Requests()
		last := reqs[len(reqs)-1].Messages
		if diff := cmp.Diff(content, last[len(last)-1].Content); diff != "" {
			t.Fatalf("the model was sent (-want +got):\n%s", diff)
		}
		if got := a.result(ctx, c, first); got.Status != agent.InputDone || got.ResultEntryID == r.ResultEntryID {
			t.Fatalf("first input = %+v; want done by its own answer", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// must2 is must for three-valued reads that report presence.
func must2[T any](v T, ok bool, err error) (T, bool) {
	if err != nil {
		panic(err)
	}
	return v, ok
}

// --- modes ---

// Input queued while a tool runs lands per its mode (§8.1's table): write
// and steer at post_tools (steer joins the group, write joins none),
// followUp after the final answer in a new group, nextRun only at the next
// idle accept, joining the group that accept starts.
func TestInputModesLandAtTheirBoundaries(t *testing.T) {
	type want struct {
		transcript []string
		groups     func(goID, id storage.ID) [][]storage.ID
		status     agent.InputStatus
		sameAnswer bool // the input resolves with "go"'s answer
		queued     bool // still queued when the drive is idle
	}
	head := []string{"user:go", "system:system", "assistant:call slow", "tool_result:slow done"}
	modes := []struct {
		mode  agent.InputMode
		queue func(ctx context.Context, c *agent.Conversation) (storage.ID, error)
		want  want
	}{
		{agent.ModeWrite, func(ctx context.Context, c *agent.Conversation) (storage.ID, error) { return note(ctx, c, "x") },
			want{transcript: append(slices.Clone(head), "notice:note x", "assistant:one"),
				groups: func(g, _ storage.ID) [][]storage.ID { return [][]storage.ID{{g}, {g}} }, status: agent.InputPlaced}},
		{agent.ModeSteer, func(ctx context.Context, c *agent.Conversation) (storage.ID, error) {
			return c.Steer(ctx, userText("x"))
		},
			want{transcript: append(slices.Clone(head), "user:x", "assistant:one"),
				groups: func(g, x storage.ID) [][]storage.ID { return [][]storage.ID{{g}, {g, x}} }, status: agent.InputDone, sameAnswer: true}},
		{agent.ModeFollowUp, func(ctx context.Context, c *agent.Conversation) (storage.ID, error) {
			return c.FollowUp(ctx, userText("x"))
		},
			want{transcript: append(slices.Clone(head), "assistant:one", "user:x", "assistant:two"),
				groups: func(g, x storage.ID) [][]storage.ID { return [][]storage.ID{{g}, {g}, {x}} }, status: agent.InputDone}},
		{agent.ModeNextRun, func(ctx context.Context, c *agent.Conversation) (storage.ID, error) {
			return c.NextRun(ctx, userText("x"))
		},
			want{transcript: append(slices.Clone(head), "assistant:one"),
				groups: func(g, _ storage.ID) [][]storage.ID { return [][]storage.ID{{g}, {g}} }, status: agent.InputQueued, queued: true}},
	}
	for _, m := range modes {
		t.Run(string(m.mode), func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				started := s.Runtime().NewEvent("tool-started")
				a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{sleepyTool("slow", started, time.Minute)}})
				a.faux.SetResponses(calls("slow"), answer("one"), answer("two"))
				c := a.h.Root()
				goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
				done := inboxDriveAsync(t, ctx, s, c)
				started.Wait(ctx)
				id := must(m.queue(ctx, c))
				if got := a.result(ctx, c, id); got.Status != agent.InputQueued {
					t.Fatalf("result while the tool runs = %+v; want queued", got)
				}
				if q := inboxOf(t, ctx, a.h, c.ID); len(q) != 1 || q[0].ID != id || q[0].Value.Mode != m.mode {
					t.Fatalf("inbox while the tool runs = %+v; want input %d in mode %s", q, id, m.mode)
				}
				done.Wait(ctx)
				if diff := cmp.Diff(m.want.transcript, a.transcript(ctx, c.ID)); diff != "" {
					t.Fatalf("transcript (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(m.want.groups(goID, id), inputGroups(t, ctx, a.h, c.ID)); diff != "" {
					t.Fatalf("generation groups (-want +got):\n%s", diff)
				}
				goRes, r := a.result(ctx, c, goID), a.result(ctx, c, id)
				one := entryIDOf(t, ctx, a, c.ID, "assistant", "one")
				if goRes.Status != agent.InputDone || goRes.ResultEntryID != one {
					t.Fatalf("go = %+v; want done by answer %d", goRes, one)
				}
				if r.Status != m.want.status {
					t.Fatalf("input %s = %+v; want status %s", m.mode, r, m.want.status)
				}
				switch {
				case m.want.sameAnswer && r.ResultEntryID != one:
					t.Fatalf("input %s resolved to %d; want the group's answer %d", m.mode, r.ResultEntryID, one)
				case m.mode == agent.ModeFollowUp && r.ResultEntryID != entryIDOf(t, ctx, a, c.ID, "assistant", "two"):
					t.Fatalf("followUp resolved to %d; want its own group's answer", r.ResultEntryID)
				case m.mode == agent.ModeWrite && (r.ResultEntryID != 0 || r.PlacementEntryID != entryIDOf(t, ctx, a, c.ID, "notice", "note x")):
					t.Fatalf("write result = %+v; want placed at the notice with no result entry", r)
				}
				if got := len(inboxIDs(t, ctx, a.h, c.ID)) == 1; got != m.want.queued {
					t.Fatalf("still queued after the drive: %v; want %v", got, m.want.queued)
				}
				if m.mode == agent.ModeNextRun {
					// The next explicit idle accept places it first and it
					// joins that group.
					later := must(c.Accept(ctx, userText("later"), agent.AcceptOptions{}))
					groups := inputGroups(t, ctx, a.h, c.ID)
					if diff := cmp.Diff([]storage.ID{id, later}, groups[len(groups)-1]); diff != "" {
						t.Fatalf("group of the idle accept (-want +got):\n%s", diff)
					}
					must(c.Drive(ctx))
					two := entryIDOf(t, ctx, a, c.ID, "assistant", "two")
					if r, l := a.result(ctx, c, id), a.result(ctx, c, later); r.Status != agent.InputDone || r.ResultEntryID != two || l.ResultEntryID != two {
						t.Fatalf("nextRun %+v, later %+v; want both done by answer %d", r, l, two)
					}
				}
				if len(a.reports) != 0 {
					t.Fatalf("reports: %v", a.reports)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// Steering queued during a tool exchange joins the running group at
// post_tools; steering queued during a final answer starts the next group.
func TestSteerJoinsAtPostToolsButStartsANewGroupAfterAFinalAnswer(t *testing.T) {
	t.Run("post_tools", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(calls("a").WithDelay(time.Second), answer("one"), answer("unused"))
			c := a.h.Root()
			goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			done := inboxDriveAsync(t, ctx, s, c)
			steer := must(c.Steer(ctx, userText("focus")))
			if got := a.result(ctx, c, steer).Status; got != agent.InputQueued {
				t.Fatalf("steer while the turn runs is %s; want queued", got)
			}
			done.Wait(ctx)
			if diff := cmp.Diff([][]storage.ID{{goID}, {goID, steer}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			want := []string{"user:go", "system:system", "assistant:call a", "tool_result:a(a)", "user:focus", "assistant:one"}
			if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
				t.Fatalf("transcript (-want +got):\n%s", diff)
			}
			one := entryIDOf(t, ctx, a, c.ID, "assistant", "one")
			for _, id := range []storage.ID{goID, steer} {
				if r := a.result(ctx, c, id); r.Status != agent.InputDone || r.ResultEntryID != one {
					t.Fatalf("input %d = %+v; want done by the one answer %d", id, r, one)
				}
			}
			if a.faux.Calls() != 2 {
				t.Fatalf("%d model calls; want 2 (the steer joined the turn)", a.faux.Calls())
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("final answer", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(answer("one").WithDelay(time.Second), answer("two"))
			c := a.h.Root()
			goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			done := inboxDriveAsync(t, ctx, s, c)
			steer := must(c.Steer(ctx, userText("focus")))
			if got := a.result(ctx, c, steer).Status; got != agent.InputQueued {
				t.Fatalf("steer while the turn runs is %s; want queued", got)
			}
			done.Wait(ctx)
			if diff := cmp.Diff([][]storage.ID{{goID}, {steer}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			want := []string{"user:go", "system:system", "assistant:one", "user:focus", "assistant:two"}
			if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
				t.Fatalf("transcript (-want +got):\n%s", diff)
			}
			if g, st := a.result(ctx, c, goID), a.result(ctx, c, steer); g.ResultEntryID != entryIDOf(t, ctx, a, c.ID, "assistant", "one") ||
				st.Status != agent.InputDone || st.ResultEntryID != entryIDOf(t, ctx, a, c.ID, "assistant", "two") {
				t.Fatalf("go %+v, steer %+v; want each done by its own answer", g, st)
			}
			must(0, a.h.Close(ctx))
		})
	})
}

// FollowUp input (and a busy Accept, which queues as followUp) does not
// join at post_tools; after the final answer it starts the next group, in
// admission order.
func TestFollowUpStartsTheNextGroup(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a").WithDelay(time.Second), answer("one"), answer("two"))
		c := a.h.Root()
		goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		done := inboxDriveAsync(t, ctx, s, c)
		f1 := must(c.FollowUp(ctx, userText("f1")))
		acc := must(c.Accept(ctx, userText("f2"), agent.AcceptOptions{}))
		f3 := must(c.FollowUp(ctx, userText("f3")))
		q := inboxOf(t, ctx, a.h, c.ID)
		if len(q) != 3 || q[1].ID != acc || q[1].Value.Mode != agent.ModeFollowUp {
			t.Fatalf("inbox = %+v; want three items, the busy accept queued as followUp", q)
		}
		done.Wait(ctx)
		if diff := cmp.Diff([][]storage.ID{{goID}, {goID}, {f1, acc, f3}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups (-want +got):\n%s", diff)
		}
		want := []string{"user:go", "system:system", "assistant:call a", "tool_result:a(a)", "assistant:one", "user:f1", "user:f2", "user:f3", "assistant:two"}
		if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		one, two := entryIDOf(t, ctx, a, c.ID, "assistant", "one"), entryIDOf(t, ctx, a, c.ID, "assistant", "two")
		if r := a.result(ctx, c, goID); r.ResultEntryID != one {
			t.Fatalf("go = %+v; want done by %d", r, one)
		}
		for _, id := range []storage.ID{f1, acc, f3} {
			if r := a.result(ctx, c, id); r.Status != agent.InputDone || r.ResultEntryID != two {
				t.Fatalf("followUp %d = %+v; want done by the next group's answer %d", id, r, two)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

// NextRun never lands by itself: an idle NextRun queues and creates no
// work, an idle write does not release it, neither does a busy turn's
// post_tools or final boundary; the next explicit idle accept places it in
// the same commit and it joins that group.
func TestNextRunWaitsForTheNextIdleAcceptAndJoinsItsGroup(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec})
		a.faux.SetResponses(calls("a"), answer("one"), answer("two"))
		c := a.h.Root()
		idle := must(c.NextRun(ctx, userText("n1")))
		if in := must(a.h.Inspect(ctx)); len(in.Start)+len(in.Inflight) != 0 {
			t.Fatalf("an idle nextRun created work: %+v", in)
		}
		must(note(ctx, c, "w"))
		must(c.Drive(ctx))
		if a.faux.Calls() != 0 || a.result(ctx, c, idle).Status != agent.InputQueued {
			t.Fatalf("after an idle write and drive: %d model calls, nextRun %+v; want none and queued", a.faux.Calls(), a.result(ctx, c, idle))
		}
		// A Prompt is an explicit idle accept, so use Accept + queue while busy.
		goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		busy := must(c.NextRun(ctx, userText("n2")))
		must(c.Drive(ctx))
		if diff := cmp.Diff([][]storage.ID{{idle, goID}, {idle, goID}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups after the first turn (-want +got):\n%s", diff)
		}
		if got := inboxIDs(t, ctx, a.h, c.ID); !slices.Equal(got, []storage.ID{busy}) {
			t.Fatalf("inbox after a tool turn = %v; want only the busy nextRun %d", got, busy)
		}
		n := len(rec.batches)
		later := must(c.Accept(ctx, userText("later"), agent.AcceptOptions{}))
		if got := len(rec.since(n)); got != 1 {
			t.Fatalf("the idle accept took %d commits; want 1", got)
		}
		groups := inputGroups(t, ctx, a.h, c.ID)
		if diff := cmp.Diff([]storage.ID{busy, later}, groups[len(groups)-1]); diff != "" {
			t.Fatalf("group of the idle accept (-want +got):\n%s", diff)
		}
		if got := inboxIDs(t, ctx, a.h, c.ID); len(got) != 0 {
			t.Fatalf("inbox after the idle accept = %v; want empty", got)
		}
		must(c.Drive(ctx))
		want := []string{"notice:note w", "user:n1", "user:go", "system:system", "assistant:call a", "tool_result:a(a)", "assistant:one", "user:n2", "user:later", "assistant:two"}
		if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		two := entryIDOf(t, ctx, a, c.ID, "assistant", "two")
		for _, id := range []storage.ID{busy, later} {
			if r := a.result(ctx, c, id); r.Status != agent.InputDone || r.ResultEntryID != two {
				t.Fatalf("input %d = %+v; want done by %d", id, r, two)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

// A write lands without starting or joining a group: at once when idle (no
// task), and while busy at the next boundary, before the steer and
// followUp input placed at that boundary even when queued after them.
func TestWritesArePlacedWithoutJoining(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
			rec := newInboxRecorder()
			a := openAgent(t, ctx, s, agentOptions{store: rec})
			c := a.h.Root()
			n := len(rec.batches)
			id := must(note(ctx, c, "w"))
			if got := len(rec.since(n)); got != 1 {
				t.Fatalf("an idle write took %d commits; want 1", got)
			}
			w := entryIDOf(t, ctx, a, c.ID, "notice", "note w")
			if r, want := a.result(ctx, c, id), (agent.InputResult{Status: agent.InputPlaced, PlacementEntryID: w}); r != want {
				t.Fatalf("idle write = %+v; want %+v", r, want)
			}
			if in := must(a.h.Inspect(ctx)); len(in.Start)+len(in.Inflight) != 0 || len(inboxIDs(t, ctx, a.h, c.ID)) != 0 {
				t.Fatalf("an idle write left work %+v or inbox %v; want neither", in, inboxIDs(t, ctx, a.h, c.ID))
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("an older write left queued lands first", func(t *testing.T) {
		simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(answer("never").WithDelay(time.Hour))
			c := a.h.Root()
			must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			done := inboxDriveAsync(t, ctx, s, c)
			w1 := must(note(ctx, c, "w1"))
			must(0, c.Abort(ctx)) // an abort places nothing; w1 stays queued
			done.Wait(ctx)
			if r := a.result(ctx, c, w1); r.Status != agent.InputQueued {
				t.Fatalf("w1 after the abort = %+v; want queued", r)
			}
			w2 := must(note(ctx, c, "w2"))
			tr := a.transcript(ctx, c.ID)
			if got := tr[len(tr)-2:]; !cmp.Equal(got, []string{"notice:note w1", "notice:note w2"}) {
				t.Fatalf("transcript ends %v; want w1 then w2", got)
			}
			for _, id := range []storage.ID{w1, w2} {
				if r := a.result(ctx, c, id); r.Status != agent.InputPlaced {
					t.Fatalf("write %d = %+v; want placed", id, r)
				}
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("final boundary", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(answer("one").WithDelay(time.Second), answer("two"))
			c := a.h.Root()
			goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			done := inboxDriveAsync(t, ctx, s, c)
			f := must(c.FollowUp(ctx, userText("f")))
			w := must(note(ctx, c, "w"))
			done.Wait(ctx)
			want := []string{"user:go", "system:system", "assistant:one", "notice:note w", "user:f", "assistant:two"}
			if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
				t.Fatalf("transcript (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([][]storage.ID{{goID}, {f}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			placedAt := entryIDOf(t, ctx, a, c.ID, "notice", "note w")
			if r, want := a.result(ctx, c, w), (agent.InputResult{Status: agent.InputPlaced, PlacementEntryID: placedAt}); r != want {
				t.Fatalf("write = %+v; want %+v (placed, never resolved to an answer)", r, want)
			}
			must(0, a.h.Close(ctx))
		})
	})
}

// Inputs gathered from every way in (two waiting nextRuns, the accept that
// releases them, steering joined at post_tools) resolve to one answer.
func TestSeveralInputsResolveToOneAnswer(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a", "b"), answer("all"))
		c := a.h.Root()
		n1 := must(c.NextRun(ctx, userText("n1")))
		n2 := must(c.NextRun(ctx, userText("n2")))
		x := must(c.Accept(ctx, userText("x"), agent.AcceptOptions{}))
		s1 := must(c.Steer(ctx, userText("s1")))
		s2 := must(c.Steer(ctx, userText("s2")))
		must(c.Drive(ctx))
		all := []storage.ID{n1, n2, x, s1, s2}
		if diff := cmp.Diff([][]storage.ID{{n1, n2, x}, all}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups (-want +got):\n%s", diff)
		}
		answerID := entryIDOf(t, ctx, a, c.ID, "assistant", "all")
		var placements []storage.ID
		for _, id := range all {
			r := a.result(ctx, c, id)
			if r.Status != agent.InputDone || r.ResultEntryID != answerID {
				t.Fatalf("input %d = %+v; want done by the one answer %d", id, r, answerID)
			}
			placements = append(placements, r.PlacementEntryID)
		}
		if !slices.IsSorted(placements) || len(slices.Compact(slices.Clone(placements))) != len(all) {
			t.Fatalf("placements %v; want one distinct entry per input, in admission order", placements)
		}
		must(0, a.h.Close(ctx))
	})
}

// --- cancel, abort ---

// Cancelling a queued input and landing it are exclusive: whichever commits
// first wins, the input gets exactly one terminal result, and CancelQueued
// says cancelled or not_found accordingly.
func TestCancelQueuedVersusLanding(t *testing.T) {
	setup := func(t testing.TB, ctx context.Context, s *sim.Sim) (*loop, *agent.Conversation, *inboxRecorder, storage.ID, storage.ID, core.Event, core.Event) {
		started := s.Runtime().NewEvent("tool-started")
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec, tools: []agent.Tool{sleepyTool("slow", started, time.Second)}})
		a.faux.SetResponses(calls("slow"), answer("one"))
		c := a.h.Root()
		goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		steer := must(c.Steer(ctx, userText("s")))
		return a, c, rec, goID, steer, started, inboxDriveAsync(t, ctx, s, c)
	}
	checkCancelled := func(t testing.TB, ctx context.Context, a *loop, c *agent.Conversation, goID, steer storage.ID) {
		t.Helper()
		if r := a.result(ctx, c, steer); r.Status != agent.InputCancelled || r.PlacementEntryID != 0 || r.ResultEntryID != 0 {
			t.Fatalf("cancelled steer = %+v; want cancelled, never placed", r)
		}
		if diff := cmp.Diff([][]storage.ID{{goID}, {goID}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups (-want +got):\n%s", diff)
		}
		if slices.Contains(a.transcript(ctx, c.ID), "user:s") {
			t.Fatalf("a cancelled steer landed: %v", a.transcript(ctx, c.ID))
		}
	}
	checkLanded := func(t testing.TB, ctx context.Context, a *loop, c *agent.Conversation, goID, steer storage.ID) {
		t.Helper()
		if r := a.result(ctx, c, steer); r.Status != agent.InputDone || r.PlacementEntryID == 0 {
			t.Fatalf("landed steer = %+v; want done with its placement", r)
		}
		if diff := cmp.Diff([][]storage.ID{{goID}, {goID, steer}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups (-want +got):\n%s", diff)
		}
	}
	t.Run("cancel first", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a, c, rec, goID, steer, started, done := setup(t, ctx, s)
			started.Wait(ctx)
			if got := must(c.CancelQueued(ctx, steer)); got != agent.Cancelled {
				t.Fatalf("cancel before landing = %s; want cancelled", got)
			}
			last := a.h.Store().LastSeq()
			if got := must(c.CancelQueued(ctx, steer)); got != agent.NotFound {
				t.Fatalf("second cancel = %s; want not_found", got)
			}
			if a.h.Store().LastSeq() != last {
				t.Fatal("a not_found cancel wrote something")
			}
			done.Wait(ctx)
			checkCancelled(t, ctx, a, c, goID, steer)
			if n := terminalWrites(t, rec, c.ID)[idKey(steer)]; n != 1 {
				t.Fatalf("%d terminal results written for the steer; want 1", n)
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("land first", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a, c, rec, goID, steer, _, done := setup(t, ctx, s)
			done.Wait(ctx)
			last := a.h.Store().LastSeq()
			if got := must(c.CancelQueued(ctx, steer)); got != agent.NotFound {
				t.Fatalf("cancel after landing = %s; want not_found", got)
			}
			if a.h.Store().LastSeq() != last {
				t.Fatal("a not_found cancel wrote something")
			}
			checkLanded(t, ctx, a, c, goID, steer)
			if n := terminalWrites(t, rec, c.ID)[idKey(steer)]; n != 1 {
				t.Fatalf("%d terminal results written for the steer; want 1", n)
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("race", func(t *testing.T) {
		outcomes := map[agent.CancelResult]int{}
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			wait := time.Duration(s.Rand().Int64N(int64(2 * time.Second)))
			a, c, rec, goID, steer, _, done := setup(t, ctx, s)
			s.Runtime().Sleep(ctx, wait)
			got := must(c.CancelQueued(ctx, steer))
			outcomes[got]++
			done.Wait(ctx)
			if got == agent.Cancelled {
				checkCancelled(t, ctx, a, c, goID, steer)
			} else {
				checkLanded(t, ctx, a, c, goID, steer)
			}
			if n := terminalWrites(t, rec, c.ID)[idKey(steer)]; n != 1 {
				t.Fatalf("%d terminal results written for the steer (cancel %s after %v); want 1", n, got, wait)
			}
			must(0, a.h.Close(ctx))
		})
		if outcomes[agent.Cancelled] == 0 || outcomes[agent.NotFound] == 0 {
			t.Fatalf("outcomes over the sweep: %v; want both orders exercised", outcomes)
		}
	})
}

// A conversation abort marks the live owner of the active group and, in
// the same commit, cancels queued steer and followUp while keeping write
// and nextRun queued.
func TestAbortCancelsQueuedTurnsInTheMarkCommit(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rec := newInboxRecorder()
		a := openAgent(t, ctx, s, agentOptions{store: rec})
		a.faux.SetResponses(answer("one").WithDelay(time.Minute), answer("later"))
		c := a.h.Root()
		goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		gen := inputGroups(t, ctx, a.h, c.ID)
		if len(gen) != 1 {
			t.Fatalf("groups %v; want one generation", gen)
		}
		steer := must(c.Steer(ctx, userText("s")))
		follow := must(c.FollowUp(ctx, userText("f")))
		next := must(c.NextRun(ctx, userText("n")))
		write := must(note(ctx, c, "w"))
		done := inboxDriveAsync(t, ctx, s, c)
		n := len(rec.batches)
		must(0, c.Abort(ctx))
		// The drive actor commits too; the abort's commit is the one with
		// the mark.
		var marking []storage.CommitBatch
		for _, b := range rec.since(n) {
			if slices.ContainsFunc(b.batch.Writes, func(w storage.Write) bool { return w.Type == storage.WritePatch && w.Abort }) {
				marking = append(marking, b.batch)
			}
		}
		if len(marking) != 1 {
			t.Fatalf("%d commits carry an abort mark; want 1", len(marking))
		}
		b := marking[0]
		if marks := writesOf(b, storage.WritePatch, ""); len(marks) != 1 || marks[0].ID != tasksOf(t, ctx, a.h, c.ID, agent.GenerationKindName)[0].ID {
			t.Fatalf("the abort commit's patches = %+v; want only the generation's mark", marks)
		}
		var removed []storage.ID
		for _, w := range writesOf(b, storage.WriteListRemove, agent.InboxList.Namespace) {
			removed = append(removed, w.Element)
		}
		if diff := cmp.Diff([]storage.ID{steer, follow}, removed); diff != "" {
			t.Fatalf("removed in the mark commit (-want +got):\n%s", diff)
		}
		for _, id := range []storage.ID{steer, follow} {
			if r := a.result(ctx, c, id); r.Status != agent.InputCancelled || r.PlacementEntryID != 0 {
				t.Fatalf("queued turn input %d after abort = %+v; want cancelled, unplaced", id, r)
			}
		}
		if got := inboxIDs(t, ctx, a.h, c.ID); !slices.Equal(got, []storage.ID{next, write}) {
			t.Fatalf("inbox after abort = %v; want nextRun and write kept [%d %d]", got, next, write)
		}
		done.Wait(ctx)
		if r := a.result(ctx, c, goID); r.Status != agent.InputCancelled {
			t.Fatalf("go after abort = %+v; want cancelled", r)
		}
		for _, id := range []storage.ID{next, write} {
			if r := a.result(ctx, c, id); r.Status != agent.InputQueued {
				t.Fatalf("kept input %d = %+v; want still queued", id, r)
			}
		}
		if a.faux.Calls() > 1 {
			t.Fatalf("%d model calls; want no successor after the abort", a.faux.Calls())
		}
		must(0, a.h.Close(ctx))
	})
}

// Abort racing the transfer of the active group (post_tools to the next
// generation, or a final answer to the followUp's generation) resolves
// every input exactly once, and no owner created around the abort escapes
// its mark.
func TestAbortVersusGroupTransfer(t *testing.T) {
	type scenario struct {
		name   string
		script func(a *loop)
		queue  func(ctx context.Context, c *agent.Conversation) (storage.ID, error)
		tools  func(s *sim.Sim) []agent.Tool
	}
	scenarios := []scenario{
		{name: "post_tools",
			script: func(a *loop) { a.faux.SetResponses(calls("slow"), answer("two").WithDelay(time.Second)) },
			queue: func(ctx context.Context, c *agent.Conversation) (storage.ID, error) {
				return c.Steer(ctx, userText("late"))
			},
			tools: func(s *sim.Sim) []agent.Tool { return []agent.Tool{sleepyTool("slow", nil, time.Second)} }},
		{name: "final answer",
			script: func(a *loop) {
				a.faux.SetResponses(answer("one").WithDelay(time.Second), answer("two").WithDelay(time.Second))
			},
			queue: func(ctx context.Context, c *agent.Conversation) (storage.ID, error) {
				return c.FollowUp(ctx, userText("late"))
			},
			tools: func(s *sim.Sim) []agent.Tool { return nil }},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			orders := map[string]int{}
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				wait := time.Duration(s.Rand().Int64N(int64(2 * time.Second)))
				rec := newInboxRecorder()
				a := openAgent(t, ctx, s, agentOptions{store: rec, tools: sc.tools(s)})
				sc.script(a)
				c := a.h.Root()
				goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
				late := must(sc.queue(ctx, c))
				done := inboxDriveAsync(t, ctx, s, c)
				s.Runtime().Sleep(ctx, wait)
				must(0, c.Abort(ctx))
				for _, task := range liveTasks(t, ctx, a.h, c.ID) {
					if !task.Abort {
						t.Fatalf("after abort at %v, live %s task %d (%s) is unmarked", wait, task.Kind, task.ID, task.Status)
					}
				}
				done.Wait(ctx)
				if live := liveTasks(t, ctx, a.h, c.ID); len(live) != 0 {
					t.Fatalf("live tasks after the drive: %d; want none", len(live))
				}
				g, l := a.result(ctx, c, goID), a.result(ctx, c, late)
				order := "aborted after both resolved"
				switch {
				case g.Status == agent.InputDone && l.Status == agent.InputDone:
				case l.PlacementEntryID == 0:
					order = "abort before the transfer"
					if l.Status != agent.InputCancelled || g.Status != agent.InputCancelled {
						t.Fatalf("abort at %v before the transfer: go %+v, late %+v; want both cancelled", wait, g, l)
					}
				default:
					order = "abort after the transfer"
					if l.Status != agent.InputCancelled || l.Reason != "aborted" {
						t.Fatalf("abort at %v after the transfer: late %+v; want cancelled by its owner's abort", wait, l)
					}
					if sc.name == "post_tools" && g.Status != agent.InputCancelled || sc.name == "final answer" && g.Status != agent.InputDone {
						t.Fatalf("abort at %v after the transfer: go %+v", wait, g)
					}
				}
				orders[order]++
				writes := terminalWrites(t, rec, c.ID)
				for _, id := range []storage.ID{goID, late} {
					if r := a.result(ctx, c, id); !r.Status.Terminal() || writes[idKey(id)] != 1 {
						t.Fatalf("abort at %v: input %d = %+v with %d terminal writes; want terminal, written once", wait, id, r, writes[idKey(id)])
					}
				}
				// Exactly one owner held the active group when the mark
				// landed, unless everything had already resolved.
				aborted := 0
				for _, kind := range []string{agent.GenerationKindName, agent.PostToolsKindName} {
					for _, task := range tasksOf(t, ctx, a.h, c.ID, kind) {
						if task.Status == "aborted" {
							aborted++
						}
					}
				}
				if want := map[bool]int{true: 0, false: 1}[order == "aborted after both resolved"]; aborted != want {
					t.Fatalf("abort at %v (%s): %d generation/post_tools owners aborted; want %d", wait, order, aborted, want)
				}
				must(0, a.h.Close(ctx))
			})
			if orders["abort before the transfer"] == 0 || orders["abort after the transfer"] == 0 {
				t.Fatalf("orders over the sweep: %v; want both exercised", orders)
			}
		})
	}
}

// A generation failure fails its whole group and a tool's terminate stops
// it; either places queued writes but consumes no queued input that would
// need a successor.
func TestGroupFailureAndTerminateResolveTheGroupOnly(t *testing.T) {
	t.Run("failure", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(calls("a"), faux.Reply().WithError("boom"))
			c := a.h.Root()
			goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			steer := must(c.Steer(ctx, userText("s")))
			must(c.Drive(ctx))
			for _, id := range []storage.ID{goID, steer} {
				if r := a.result(ctx, c, id); r.Status != agent.InputFailed || r.Reason != "boom" {
					t.Fatalf("input %d = %+v; want failed (boom)", id, r)
				}
			}
			follow := must(c.FollowUp(ctx, userText("f"))) // idle now: it lands at once
			if r := a.result(ctx, c, follow); r.Status != agent.InputRunning {
				t.Fatalf("followUp after the failure = %+v; want running", r)
			}
			must(0, a.h.Close(ctx))
		})
	})
	t.Run("terminate", func(t *testing.T) {
		simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
			term := toolFunc("term", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
				out.Write("bye")
				out.Terminate(true)
				return nil
			})
			a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{term}})
			a.faux.SetResponses(calls("term"))
			c := a.h.Root()
			goID := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
			steer := must(c.Steer(ctx, userText("s")))
			write := must(note(ctx, c, "w"))
			must(c.Drive(ctx))
			if r := a.result(ctx, c, goID); r.Status != agent.InputStopped {
				t.Fatalf("go = %+v; want stopped", r)
			}
			if r := a.result(ctx, c, write); r.Status != agent.InputPlaced {
				t.Fatalf("write = %+v; want placed at the stop", r)
			}
			if r := a.result(ctx, c, steer); r.Status != agent.InputQueued {
				t.Fatalf("steer = %+v; want still queued (it needs a successor)", r)
			}
			if got := inboxIDs(t, ctx, a.h, c.ID); !slices.Equal(got, []storage.ID{steer}) {
				t.Fatalf("inbox = %v; want [%d]", got, steer)
			}
			must(0, a.h.Close(ctx))
		})
	})
}

// --- durability ---

// Queued and placed input survive a crash unchanged: reopening over the
// same store writes nothing, infers no work from the inbox, and keeps every
// item and result; the live generation then runs its group and a later
// idle accept places the waiting nextRun.
func TestQueuedAndPlacedInputSurviveACrashUnchanged(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{}, nil)
		a1 := openAgent(t, ctx, s, agentOptions{store: store})
		c1 := a1.h.Root()
		// No drive in this process: an attachment would run the generation.
		earlier := must(note(ctx, c1, "earlier")) // idle: placed at once
		goID := must(c1.Accept(ctx, userText("go"), agent.AcceptOptions{RequestID: "req-go"}))
		steer := must(c1.Steer(ctx, userText("s")))
		follow := must(c1.FollowUp(ctx, userText("f")))
		next := must(c1.NextRun(ctx, userText("n")))
		write := must(note(ctx, c1, "w"))
		ids := []storage.ID{earlier, goID, steer, follow, next, write}
		inbox := inboxOf(t, ctx, a1.h, c1.ID)
		results := map[storage.ID]agent.InputResult{}
		for _, id := range ids {
			results[id] = a1.result(ctx, c1, id)
		}
		before := must(a1.h.Inspect(ctx))
		last := store.LastSeq()

		// Crash: the process's handle dies with the generation pending.
		a2 := openAgent(t, ctx, s, agentOptions{store: store.Reopen(fault.Plan{})})
		c2 := a2.h.Root()
		if a2.h.Store().LastSeq() != last {
			t.Fatalf("reopen wrote: lastSeq %d → %d", last, a2.h.Store().LastSeq())
		}
		if diff := cmp.Diff(inbox, inboxOf(t, ctx, a2.h, c2.ID)); diff != "" {
			t.Fatalf("inbox after reopen (-before +after):\n%s", diff)
		}
		for _, id := range ids {
			if diff := cmp.Diff(results[id], a2.result(ctx, c2, id)); diff != "" {
				t.Fatalf("result %d after reopen (-before +after):\n%s", id, diff)
			}
		}
		after := must(a2.h.Inspect(ctx))
		taskIDs := func(ts []*storage.Task) []storage.ID {
			var out []storage.ID
			for _, task := range ts {
				out = append(out, task.ID)
			}
			return out
		}
		if diff := cmp.Diff(taskIDs(before.Start), taskIDs(after.Start)); diff != "" || len(after.Inflight) != 0 || len(after.Start) != 1 {
			t.Fatalf("live work after reopen: start (-before +after):\n%s inflight %v; want only the pending generation", diff, taskIDs(after.Inflight))
		}
		if rc, ok := must2(a2.h.Acceptance(ctx, "req-go")); !ok || rc.InputID != goID {
			t.Fatalf("acceptance after reopen = %+v, %v; want input %d", rc, ok, goID)
		}
		a2.faux.SetResponses(answer("one"), answer("two"), answer("three"))
		must(c2.Drive(ctx))
		one, two := entryIDOf(t, ctx, a2, c2.ID, "assistant", "one"), entryIDOf(t, ctx, a2, c2.ID, "assistant", "two")
		if r := a2.result(ctx, c2, goID); r.Status != agent.InputDone || r.ResultEntryID != one || r.PlacementEntryID != results[goID].PlacementEntryID {
			t.Fatalf("go after reopen = %+v; want done by %d at its original placement", r, one)
		}
		for _, id := range []storage.ID{steer, follow} {
			if r := a2.result(ctx, c2, id); r.Status != agent.InputDone || r.ResultEntryID != two {
				t.Fatalf("input %d = %+v; want done by %d", id, r, two)
			}
		}
		if r := a2.result(ctx, c2, write); r.Status != agent.InputPlaced {
			t.Fatalf("write = %+v; want placed", r)
		}
		if got := inboxIDs(t, ctx, a2.h, c2.ID); !slices.Equal(got, []storage.ID{next}) {
			t.Fatalf("inbox after the turns = %v; want only the nextRun %d", got, next)
		}
		later := must(c2.Accept(ctx, userText("later"), agent.AcceptOptions{}))
		groups := inputGroups(t, ctx, a2.h, c2.ID)
		if diff := cmp.Diff([]storage.ID{next, later}, groups[len(groups)-1]); diff != "" {
			t.Fatalf("the later accept's group (-want +got):\n%s", diff)
		}
		must(c2.Drive(ctx))
		if r := a2.result(ctx, c2, next); r.Status != agent.InputDone {
			t.Fatalf("nextRun = %+v; want done", r)
		}
		must(0, a2.h.Close(ctx))
		simtest.CloseCrashed(ctx, a1.h)
	})
}

// An idle conversation whose only queued input is a nextRun reopens to no
// work at all: a drive after reopen calls no model and writes nothing.
func TestReopenInfersNoWorkFromAWaitingNextRun(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{}, nil)
		a1 := openAgent(t, ctx, s, agentOptions{store: store})
		next := must(a1.h.Root().NextRun(ctx, userText("n")))
		last := store.LastSeq()
		a2 := openAgent(t, ctx, s, agentOptions{store: store.Reopen(fault.Plan{})})
		c := a2.h.Root()
		must(c.Drive(ctx))
		must(a2.h.Drive(ctx))
		if a2.faux.Calls() != 0 || a2.h.Store().LastSeq() != last {
			t.Fatalf("after reopen and drive: %d model calls, lastSeq %d → %d; want nothing", a2.faux.Calls(), last, a2.h.Store().LastSeq())
		}
		if r := a2.result(ctx, c, next); r.Status != agent.InputQueued {
			t.Fatalf("nextRun = %+v; want queued", r)
		}
		must(0, a2.h.Close(ctx))
		simtest.CloseCrashed(ctx, a1.h)
	})
}

// A cancelled unplaced payload is gone: the element no longer reads, no
// entry or request ever carries it, and its result is cancelled with the
// request id kept.
func TestCancelledUnplacedPayloadIsUnavailable(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one"), answer("unused"))
		c := a.h.Root()
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		id := must(c.Accept(ctx, userText("secret payload"), agent.AcceptOptions{RequestID: "req-secret"}))
		if got := inboxIDs(t, ctx, a.h, c.ID); !slices.Equal(got, []storage.ID{id}) {
			t.Fatalf("inbox = %v; want [%d]", got, id)
		}
		if got := must(c.CancelQueued(ctx, id)); got != agent.Cancelled {
			t.Fatalf("cancel = %s; want cancelled", got)
		}
		if got := inboxOf(t, ctx, a.h, c.ID); len(got) != 0 {
			t.Fatalf("inbox after cancel = %+v; want the element gone", got)
		}
		r := a.result(ctx, c, id)
		if r.Status != agent.InputCancelled || r.RequestID != "req-secret" || r.PlacementEntryID != 0 || r.ResultEntryID != 0 {
			t.Fatalf("result = %+v; want cancelled with request id req-secret and nothing placed", r)
		}
		raw, _ := must2(a.h.Store().GetValue(ctx, resultKey(c.ID, id).Address, 0))
		var fields map[string]any
		if err := json.Unmarshal(raw.Value, &fields); err != nil {
			t.Fatal(err)
		}
		for k := range fields {
			if k != "status" && k != "requestId" && k != "reason" {
				t.Fatalf("stored result %s has field %q; want only status, request id and reason", raw.Value, k)
			}
		}
		if rc, ok := must2(a.h.Acceptance(ctx, "req-secret")); !ok || rc.InputID != id {
			t.Fatalf("acceptance = %+v, %v; want the receipt of %d", rc, ok, id)
		}
		must(c.Drive(ctx))
		for _, line := range a.transcript(ctx, c.ID) {
			if strings.Contains(line, "secret") {
				t.Fatalf("the cancelled payload landed: %v", a.transcript(ctx, c.ID))
			}
		}
		for _, req := range a.faux.Requests() {
			for _, m := range req.Messages {
				if strings.Contains(m.Content.TextOf(), "secret") {
					t.Fatalf("the model was sent the cancelled payload")
				}
			}
		}
		if a.faux.Calls() != 1 {
			t.Fatalf("%d model calls; want 1", a.faux.Calls())
		}
		must(0, a.h.Close(ctx))
	})
}

// --- request ids ---

// A caller that lost the accept reply recovers the input through its
// request id; accepting again under that id reports the first receipt and
// writes nothing, in any conversation.
func TestLostAcceptReplyIsRecoveredByRequestID(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a"), answer("one"), answer("two"))
		c := a.h.Root()
		if _, ok := must2(a.h.Acceptance(ctx, "req-42")); ok {
			t.Fatal("an unused request id was found")
		}
		idle := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{RequestID: "req-42"}))
		busy := must(c.Accept(ctx, userText("more"), agent.AcceptOptions{RequestID: "req-43"}))
		var other storage.ID
		must(a.h.Commit(ctx, func(tx *core.Tx) error {
			other = tx.CreateConversation(core.ConversationSpec{})
			return nil
		}))
		oc := must(a.h.Conversation(ctx, other))
		for _, tc := range []struct {
			req  string
			id   storage.ID
			conv *agent.Conversation
		}{{"req-42", idle, c}, {"req-43", busy, c}} {
			want := agent.Receipt{RequestID: tc.req, ConversationID: c.ID, InputID: tc.id}
			got, ok := must2(a.h.Acceptance(ctx, tc.req))
			if !ok || got != want {
				t.Fatalf("acceptance(%s) = %+v, %v; want %+v", tc.req, got, ok, want)
			}
			conv := must(a.h.Conversation(ctx, got.ConversationID))
			if r := a.result(ctx, conv, got.InputID); r.RequestID != tc.req {
				t.Fatalf("result of the recovered input = %+v; want request id %s", r, tc.req)
			}
			for _, into := range []*agent.Conversation{c, oc} {
				last, inbox := a.h.Store().LastSeq(), inboxIDs(t, ctx, a.h, into.ID)
				_, err := into.Accept(ctx, userText("again"), agent.AcceptOptions{RequestID: tc.req})
				var dup *agent.RequestAlreadyAcceptedError
				if !errors.As(err, &dup) || dup.First != want {
					t.Fatalf("duplicate accept of %s in conversation %d = %v; want RequestAlreadyAccepted with first %+v", tc.req, into.ID, err, want)
				}
				if a.h.Store().LastSeq() != last || !slices.Equal(inboxIDs(t, ctx, a.h, into.ID), inbox) {
					t.Fatalf("a duplicate accept wrote something")
				}
			}
		}
		must(c.Drive(ctx))
		if r := a.result(ctx, c, busy); r.Status != agent.InputDone {
			t.Fatalf("the recovered busy input = %+v; want done", r)
		}
		must(0, a.h.Close(ctx))
	})
}

// Two concurrent accepts under one request id: exactly one is accepted and
// the other identifies its receipt.
func TestConcurrentDuplicateAcceptReportsTheFirstReceipt(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one"))
		c := a.h.Root()
		rt := s.Runtime()
		type outcome struct {
			id  storage.ID
			err error
		}
		var outs [2]outcome
		var evs [2]core.Event
		for i := range outs {
			evs[i] = rt.NewEvent("accepted")
			rt.Go(ctx, "accept-"+strconv.Itoa(i), func(ctx context.Context) {
				outs[i].id, outs[i].err = c.Accept(ctx, userText("hi "+strconv.Itoa(i)), agent.AcceptOptions{RequestID: "req-dup"})
				evs[i].Set()
			})
		}
		for _, e := range evs {
			e.Wait(ctx)
		}
		win, lose := outs[0], outs[1]
		if win.err != nil {
			win, lose = lose, win
		}
		rc, ok := must2(a.h.Acceptance(ctx, "req-dup"))
		var dup *agent.RequestAlreadyAcceptedError
		if win.err != nil || !ok || rc.InputID != win.id || !errors.As(lose.err, &dup) || dup.First != rc {
			t.Fatalf("outcomes %+v, receipt %+v (%v); want one accepted and one RequestAlreadyAccepted naming it", outs, rc, ok)
		}
		must(c.Drive(ctx))
		if diff := cmp.Diff([][]storage.ID{{win.id}}, inputGroups(t, ctx, a.h, c.ID)); diff != "" {
			t.Fatalf("groups (-want +got):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
}

// --- reads and rules ---

// Results stay readable by one point read after further turns, unchanged.
func TestResultsStayPointReadableAfterFurtherTurns(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := &inboxCounter{Storage: memory.New(), calls: map[string]int{}}
		a := openAgent(t, ctx, s, agentOptions{store: store})
		a.faux.SetResponses(answer("one"), calls("a"), answer("two"), answer("three"))
		c := a.h.Root()
		var ids []storage.ID
		var first []agent.InputResult
		for _, text := range []string{"p1", "p2", "p3"} {
			id := must(c.Accept(ctx, userText(text), agent.AcceptOptions{}))
			must(c.Drive(ctx))
			ids = append(ids, id)
			first = append(first, a.result(ctx, c, id))
		}
		w := must(note(ctx, c, "w"))
		ids, first = append(ids, w), append(first, a.result(ctx, c, w))
		for i, id := range ids {
			clear(store.calls)
			r, ok, err := c.Result(ctx, id)
			if err != nil || !ok {
				t.Fatalf("result %d: %v (found %v)", id, err, ok)
			}
			if diff := cmp.Diff(first[i], r); diff != "" {
				t.Fatalf("result %d after later turns (-then +now):\n%s", id, diff)
			}
			if diff := cmp.Diff(map[string]int{"GetValue": 1}, store.calls); diff != "" {
				t.Fatalf("reading result %d cost (-want +got):\n%s", id, diff)
			}
		}
		if !first[0].Status.Terminal() || first[0].ResultEntryID == first[1].ResultEntryID {
			t.Fatalf("results %+v; want each turn resolved by its own answer", first)
		}
		// An id that names no input (an answer's entry, an id never minted)
		// has no result: not found, and no error.
		for _, id := range []storage.ID{first[0].ResultEntryID, 1 << 40} {
			if r, ok, err := c.Result(ctx, id); err != nil || ok {
				t.Fatalf("result of %d, no input: %+v, found %v, %v; want not found and no error", id, r, ok, err)
			}
		}
		must(0, a.h.Close(ctx))
	})
}

// The line rejects commits that remove an inbox element without writing
// its result, clear the inbox, or move or delete a terminal result; a
// rejected commit writes nothing.
func TestInboxRulesRejectBadCommitsAndWriteNothing(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one"))
		c := a.h.Root()
		done := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		queued := must(c.NextRun(ctx, userText("n")))
		placed := must(note(ctx, c, "w"))
		conv := c.ID
		rewritten := a.result(ctx, c, done)
		rewritten.ResultEntryID = rewritten.PlacementEntryID
		inbox := func(tx *core.Tx) core.ListTx[agent.InboxItem] { return core.TxList(tx, agent.InboxList.In(conv)) }
		result := func(tx *core.Tx, id storage.ID) core.ValueTx[agent.InputResult] {
			return core.TxValue(tx, resultKey(conv, id))
		}
		cases := []struct {
			name string
			plan func(tx *core.Tx)
		}{
			{"remove without a result", func(tx *core.Tx) { inbox(tx).Remove(queued) }},
			{"remove leaving the result queued", func(tx *core.Tx) {
				inbox(tx).Remove(queued)
				result(tx, queued).Set(agent.InputResult{Status: agent.InputQueued})
			}},
			{"clear the inbox", func(tx *core.Tx) { inbox(tx).Clear() }},
			{"done to running", func(tx *core.Tx) { result(tx, done).Set(agent.InputResult{Status: agent.InputRunning}) }},
			{"done to cancelled", func(tx *core.Tx) { result(tx, done).Set(agent.InputResult{Status: agent.InputCancelled}) }},
			{"done rewritten as done", func(tx *core.Tx) { result(tx, done).Set(rewritten) }},
			{"placed to done", func(tx *core.Tx) { result(tx, placed).Set(agent.InputResult{Status: agent.InputDone}) }},
			{"delete a terminal result", func(tx *core.Tx) { result(tx, done).Delete() }},
			{"a new result that starts terminal", func(tx *core.Tx) {
				result(tx, queued+100000).Set(agent.InputResult{Status: agent.InputDone})
			}},
		}
		snapshot := func() (storage.ID, []core.Elem[agent.InboxItem], []agent.InputResult) {
			return a.h.Store().LastSeq(), inboxOf(t, ctx, a.h, conv),
				[]agent.InputResult{a.result(ctx, c, queued), a.result(ctx, c, done), a.result(ctx, c, placed)}
		}
		for _, tc := range cases {
			last, items, results := snapshot()
			_, err := a.h.Commit(ctx, func(tx *core.Tx) error { tc.plan(tx); return nil })
			var ce *core.CommitError
			if !errors.As(err, &ce) || ce.Rule != agent.RuleInputResult {
				t.Fatalf("%s: commit = %v; want a CommitError of rule %s", tc.name, err, agent.RuleInputResult)
			}
			l2, i2, r2 := snapshot()
			if l2 != last || !cmp.Equal(items, i2) || !cmp.Equal(results, r2) {
				t.Fatalf("%s: a rejected commit changed something (lastSeq %d → %d)", tc.name, last, l2)
			}
		}
		// The rule is specific: removal with a terminal result is fine.
		must(a.h.Commit(ctx, func(tx *core.Tx) error {
			inbox(tx).Remove(queued)
			result(tx, queued).Set(agent.InputResult{Status: agent.InputCancelled, Reason: "by hand"})
			return nil
		}))
		if r := a.result(ctx, c, queued); r.Status != agent.InputCancelled || len(inboxIDs(t, ctx, a.h, conv)) != 0 {
			t.Fatalf("after a valid removal: %+v, inbox %v", r, inboxIDs(t, ctx, a.h, conv))
		}
		must(0, a.h.Close(ctx))
	})
}

// Prompt's answer is the answer entry only when its input ended done; any
// other end is an *InputError carrying the input's terminal result, never
// (nil, nil) (issue 23).
func TestPromptReturnsTheResultOfAnInputThatDidNotEndDone(t *testing.T) {
	cases := []struct {
		name   string
		open   func(t testing.TB, ctx context.Context, s *sim.Sim) (*agent.Harness, func(ctx context.Context))
		status agent.InputStatus
		reason string
	}{
		{"no model configured", func(t testing.TB, ctx context.Context, s *sim.Sim) (*agent.Harness, func(context.Context)) {
			return must(agent.Open(ctx, memory.New(), agent.Options{Runtime: s.Runtime(), CheckInvariants: true})), nil
		}, agent.InputFailed, "no provider serves model"},
		{"the script exhausted", func(t testing.TB, ctx context.Context, s *sim.Sim) (*agent.Harness, func(context.Context)) {
			return openAgent(t, ctx, s, agentOptions{}).h, nil
		}, agent.InputFailed, ""},
		{"cancelled by an abort", func(t testing.TB, ctx context.Context, s *sim.Sim) (*agent.Harness, func(context.Context)) {
			a := openAgent(t, ctx, s, agentOptions{})
			a.faux.SetResponses(answer("too slow").WithDelay(time.Hour))
			return a.h, func(ctx context.Context) {
				must(0, s.Runtime().Sleep(ctx, time.Minute))
				must(0, a.h.Root().Abort(ctx))
			}
		}, agent.InputCancelled, "aborted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				h, meanwhile := tc.open(t, ctx, s)
				if meanwhile != nil {
					s.Runtime().Go(ctx, "host", meanwhile)
				}
				answer, err := h.Root().Prompt(ctx, userText("hi"), agent.AcceptOptions{})
				var ie *agent.InputError
				if answer != nil || !errors.As(err, &ie) || ie.Result.Status != tc.status || !strings.Contains(ie.Result.Reason, tc.reason) {
					t.Fatalf("prompt = %v, %v; want an InputError with status %s and a reason naming %q", answer, err, tc.status, tc.reason)
				}
				if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("input %d ended %s", ie.Input, tc.status)) || !strings.Contains(msg, ie.Result.Reason) {
					t.Fatalf("the error says %q; want the input, its status and its reason %q", msg, ie.Result.Reason)
				}
				if r, _ := must2(h.Root().Result(ctx, ie.Input)); r != ie.Result {
					t.Fatalf("the error carries %+v; the stored result is %+v", ie.Result, r)
				}
				must(0, h.Close(ctx))
			})
		})
	}
}

// Text that is not valid UTF-8 is refused at accept and write, by the line,
// so every backend answers the same: memory would have kept the bytes while
// JSON turns them into U+FFFD (issue 23). A real U+FFFD is text like any.
func TestInvalidUTF8IsRefusedAtAcceptAndWriteOnEveryBackend(t *testing.T) {
	bad := "caf\xe9"
	stores := map[string]func(t *testing.T) storage.Storage{
		"memory": func(*testing.T) storage.Storage { return memory.New() },
		"jsonl": func(t *testing.T) storage.Storage {
			return must(jsonl.Open(context.Background(), filepath.Join(t.TempDir(), "s.jsonl"), jsonl.Options{}))
		},
		"sqlite": func(t *testing.T) storage.Storage {
			return must(sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{Session: "s"}))
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				a := openAgent(t, ctx, s, agentOptions{store: store})
				a.faux.SetResponses(answer("slow").WithDelay(time.Hour))
				c := a.h.Root()
				refused := func(what string, err error) {
					t.Helper()
					if core.RuleOf(err) != core.RuleInvalidUTF8 {
						t.Fatalf("%s = %v; want a rejection by %s", what, err, core.RuleInvalidUTF8)
					}
				}
				last := store.LastSeq()
				_, err := c.Accept(ctx, ai.PlainText(bad), agent.AcceptOptions{})
				refused("an idle accept", err)
				_, _, err = c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: json.RawMessage(`{"text":"` + bad + `"}`)})
				refused("a write of raw data", err)
				_, _, err = c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": bad}})
				refused("a write of a Go value", err)
				if store.LastSeq() != last {
					t.Fatalf("refusals wrote %d sequences", store.LastSeq()-last)
				}
				must(c.Accept(ctx, ai.PlainText("busy now \uFFFD"), agent.AcceptOptions{})) // a real U+FFFD is fine
				_, err = c.Accept(ctx, ai.PlainText(bad), agent.AcceptOptions{})
				refused("a queued accept", err)
				_, err = c.Steer(ctx, ai.PlainText(bad))
				refused("a steer", err)
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// Write returns the input id and, when the entry landed at once (an idle
// conversation), its entry id; a queued write's entry is named by its input
// result once placed (issue 23).
func TestWriteReturnsItsInputAndThePlacedEntry(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("done").WithDelay(time.Second))
		c := a.h.Root()
		input, entry := mustWrite(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "idle"}}))
		if r := a.result(ctx, c, input); entry == 0 || r.Status != agent.InputPlaced || r.PlacementEntryID != entry {
			t.Fatalf("idle write: entry %d, result %+v; want the placed entry named both ways", entry, r)
		}
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		queued, none := mustWrite(c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "busy"}}))
		if none != 0 || a.result(ctx, c, queued).Status != agent.InputQueued {
			t.Fatalf("busy write: entry %d, result %+v; want no entry yet and queued", none, a.result(ctx, c, queued))
		}
		must(c.Drive(ctx))
		if r := a.result(ctx, c, queued); r.Status != agent.InputPlaced || r.PlacementEntryID == 0 {
			t.Fatalf("after the turn the queued write's result is %+v; want placed with its entry", r)
		}
		must(0, a.h.Close(ctx))
	})
}

// EachInputResult visits every stored result in key order (the decimal
// input id as text) with its stored JSON, and names a key that is no input
// id.
func TestEachInputResultVisitsEveryResultAndNamesABadKey(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one"), answer("two"))
		c := a.h.Root()
		first := must(c.Accept(ctx, userText("a"), agent.AcceptOptions{}))
		second := must(c.FollowUp(ctx, userText("b")))
		must(c.Drive(ctx))
		var got []storage.ID
		must(0, agent.EachInputResult(ctx, a.h.Store(), c.ID, func(id storage.ID, r agent.InputResult, raw json.RawMessage) {
			var back agent.InputResult
			if err := json.Unmarshal(raw, &back); err != nil || back != r || r.Status != agent.InputDone {
				t.Fatalf("input %d: %+v from %s; want done, the same as its JSON", id, r, raw)
			}
			got = append(got, id)
		}))
		if !slices.Equal(got, []storage.ID{first, second}) {
			t.Fatalf("visited %v; want %v", got, []storage.ID{first, second})
		}
		must(0, a.h.Close(ctx))
		// The harness's rules refuse such a key; a damaged store may hold one.
		raw := memory.New()
		addr := agent.InputResultValue.In(1).WithKey("not-an-id").Address
		must(raw.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			{Type: storage.WriteValueSet, Addr: &addr, Value: json.RawMessage(`{"status":"done"}`)},
		}}))
		err := agent.EachInputResult(ctx, raw, 1, func(storage.ID, agent.InputResult, json.RawMessage) {})
		if err == nil || !strings.Contains(err.Error(), `"not-an-id"`) {
			t.Fatalf("EachInputResult = %v; want an error naming the key", err)
		}
		// More results than a page holds, the last page full: every one is
		// visited.
		many := memory.New()
		writes := []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}
		for i := range 2 * storage.PageLimitMax {
			a := agent.InputResultValue.In(1).WithKey(strconv.Itoa(2 + i)).Address
			writes = append(writes, storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: json.RawMessage(`{"status":"done"}`)})
		}
		must(many.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: writes}))
		n := 0
		must(0, agent.EachInputResult(ctx, many, 1, func(storage.ID, agent.InputResult, json.RawMessage) { n++ }))
		if n != 2*storage.PageLimitMax {
			t.Fatalf("EachInputResult visited %d of %d results", n, 2*storage.PageLimitMax)
		}
	})
}
