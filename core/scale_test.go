package core_test

// What the driver reads (reference §6.1, §6.2): open seeds the live tasks
// with one indexed scan and loads only the ancestry they need; completing
// tasks uses the indexes, never a scan; history costs nothing.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// tallyStore counts the calls a harness makes per storage method and the
// records each returns, and remembers every task and conversation id it
// handed out. Simulated actors run one at a time, so plain fields suffice.
type tallyStore struct {
	storage.Storage
	calls     map[string]int
	records   map[string]int
	returned  map[storage.ID]bool // task and conversation records handed out
	taskScans []storage.TaskQuery
	convScans []storage.ConversationQuery
}

var _ storage.Storage = (*tallyStore)(nil)

func newTallyStore(inner storage.Storage) *tallyStore {
	s := &tallyStore{Storage: inner}
	s.reset()
	return s
}

func (s *tallyStore) reset() {
	s.calls, s.records, s.returned = map[string]int{}, map[string]int{}, map[storage.ID]bool{}
	s.taskScans, s.convScans = nil, nil
}

func (s *tallyStore) count(method string, n int) {
	s.calls[method]++
	s.records[method] += n
}

// recordsRead is how many task and conversation records were returned.
func (s *tallyStore) recordsRead() int {
	return s.records["GetTasks"] + s.records["ScanTasks"] + s.records["GetConversations"] + s.records["ScanConversations"]
}

func (s *tallyStore) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	s.count("Commit", 0)
	return s.Storage.Commit(ctx, b)
}

func (s *tallyStore) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	m, err := s.Storage.GetConversations(ctx, ids)
	s.count("GetConversations", len(m))
	for id := range m {
		s.returned[id] = true
	}
	return m, err
}

func (s *tallyStore) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	p, err := s.Storage.ScanConversations(ctx, q)
	s.count("ScanConversations", len(p.Items))
	s.convScans = append(s.convScans, q)
	for _, c := range p.Items {
		s.returned[c.ID] = true
	}
	return p, err
}

func (s *tallyStore) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	m, err := s.Storage.GetTasks(ctx, ids)
	s.count("GetTasks", len(m))
	for id := range m {
		s.returned[id] = true
	}
	return m, err
}

func (s *tallyStore) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	p, err := s.Storage.ScanTasks(ctx, q)
	s.count("ScanTasks", len(p.Items))
	s.taskScans = append(s.taskScans, q)
	for _, t := range p.Items {
		s.returned[t.ID] = true
	}
	return p, err
}

func (s *tallyStore) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	m, err := s.Storage.GetEntries(ctx, ids)
	s.count("GetEntries", len(m))
	return m, err
}

func (s *tallyStore) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	p, err := s.Storage.ScanEntries(ctx, q)
	s.count("ScanEntries", len(p.Items))
	return p, err
}

func (s *tallyStore) NewestHead(ctx context.Context, conv, at storage.ID) (*storage.Entry, bool, error) {
	e, ok, err := s.Storage.NewestHead(ctx, conv, at)
	s.count("NewestHead", 0)
	return e, ok, err
}

func (s *tallyStore) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	p, err := s.Storage.ScanValues(ctx, q)
	s.count("ScanValues", len(p.Items))
	return p, err
}

func (s *tallyStore) ReadList(ctx context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	p, err := s.Storage.ReadList(ctx, a, q)
	s.count("ReadList", len(p.Items))
	return p, err
}

// scans lists the scanning calls made, by method.
func (s *tallyStore) scans() map[string]int {
	out := map[string]int{}
	for _, m := range []string{"ScanTasks", "ScanConversations", "ScanEntries", "ScanValues", "ReadList"} {
		if s.calls[m] > 0 {
			out[m] = s.calls[m]
		}
	}
	return out
}

// wantOpenScans checks the scans of an open: exactly one live-task scan,
// the one-row root lookup, and no other scan.
func wantOpenScans(t testing.TB, s *tallyStore) {
	t.Helper()
	if len(s.taskScans) != 1 || s.taskScans[0].Live == nil || !*s.taskScans[0].Live {
		t.Fatalf("open scanned tasks with %+v; want exactly one live-task scan", s.taskScans)
	}
	for _, q := range s.convScans {
		if q.Limit != 1 {
			t.Fatalf("open scanned conversations with %+v; want at most the one-row root lookup", q)
		}
	}
	if n := s.calls["ScanEntries"] + s.calls["ScanValues"] + s.calls["ReadList"]; n != 0 {
		t.Fatalf("open made %d entry/value/list scans (%v); want none", n, s.scans())
	}
}

// Open reads the live tasks with one indexed scan; completing them during a
// drive scans nothing: only commits and point reads.
func TestOpenScansLiveTasksOnceAndCompletionsScanNothing(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		durable := memory.New()
		chainKind := func() core.KindFuncs {
			var k core.KindFuncs
			k = simtest.StepKind("chain", nil)
			k.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
					return err
				}
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					if attemptOf(task) < 2 {
						tx.Task(k, core.TaskSpec{After: []storage.ID{task.ID}, State: map[string]int{"attempt": attemptOf(task) + 1}})
					}
					tx.Settle(task.ID, "done", nil)
					return nil
				})
				return err
			}
			return k
		}
		kind := chainKind()
		// History: a first process completes some work in the root and
		// leaves three chains in a conversation it never drives.
		h1 := open(t, ctx, s, fault.Wrap(s.Runtime(), durable, fault.Plan{}, nil), kind)
		for range 4 {
			simtest.CreateTask(t, ctx, h1.Root(), kind, core.TaskSpec{})
		}
		must(h1.Root().Drive(ctx))
		var other storage.ID
		must(h1.Commit(ctx, func(tx *core.Tx) error {
			other = tx.CreateConversation(core.ConversationSpec{})
			for range 3 {
				tx.Task(kind, core.TaskSpec{ConversationID: other})
			}
			return nil
		}))
		must(0, h1.Close(ctx))

		tally := newTallyStore(durable)
		h := open(t, ctx, s, tally, kind)
		wantOpenScans(t, tally)
		if got := tally.records["ScanTasks"]; got != 3 {
			t.Fatalf("the live-task scan returned %d tasks; want the 3 live ones", got)
		}
		tally.reset()
		if got := must(h.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		if sc := tally.scans(); len(sc) != 0 {
			t.Fatalf("completing 9 tasks made scans %v; want none", sc)
		}
		if tally.calls["Commit"] != 18 || tally.calls["GetTasks"] == 0 {
			t.Fatalf("calls during the drive: %v; want the tasks' commits and point reads", tally.calls)
		}
		live := must(durable.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 100}, Live: storage.Bool(true)}))
		if len(live.Items) != 0 {
			t.Fatalf("%d tasks still live after the drive; want none", len(live.Items))
		}
		must(0, h.Close(ctx))
	})
}

const (
	historicalChildren = 100_000
	childrenPerBatch   = 5_000
	ownershipDepth     = 8
)

// historyWriter appends hand-built batches to a store: tasks, owned
// conversations and settlements, without running any kind code.
type historyWriter struct {
	t      testing.TB
	ctx    context.Context
	store  storage.Storage
	writes []storage.Write
}

func (w *historyWriter) next() storage.ID {
	return w.store.LastSeq() + storage.ID(len(w.writes)) + 1
}

func (w *historyWriter) conversation(owner storage.ID) storage.ID {
	id := w.next()
	w.writes = append(w.writes, storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: id, Owner: owner}})
	return id
}

// task creates a planned task of kind "step" in conv; with owns, it owns
// the conversation created right after it.
func (w *historyWriter) task(conv storage.ID, owns bool) storage.ID {
	id := w.next()
	task := &storage.Task{ID: id, ConversationID: conv, Kind: "step", Status: "planned", Role: storage.RoleStart}
	if owns {
		task.Owns = []storage.ID{id + 1}
	}
	w.writes = append(w.writes, storage.Write{Type: storage.WriteTask, Task: task})
	return id
}

func (w *historyWriter) settle(id storage.ID) {
	w.writes = append(w.writes, storage.Write{Type: storage.WriteSettle, ID: id, Status: "done", Role: storage.RoleTerminal, State: json.RawMessage(`{}`)})
}

func (w *historyWriter) note(conv storage.ID, n int) {
	w.writes = append(w.writes, storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{
		ID: w.next(), ConversationID: conv, Kind: "notice", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
	}})
}

// ownedChild creates a child conversation owned by a task of conv that then
// settles: the shape a finished subagent leaves behind.
func (w *historyWriter) ownedChild(conv storage.ID) (owner, child storage.ID) {
	owner = w.task(conv, true)
	child = w.conversation(owner)
	w.settle(owner)
	return owner, child
}

func (w *historyWriter) flush() {
	w.t.Helper()
	if _, err := w.store.Commit(w.ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: w.writes}); err != nil {
		w.t.Fatalf("history batch: %v", err)
	}
	w.writes = nil
}

// 100,000 finished children and two live tasks, one of them deep in the
// ownership tree: open and drive read the live tasks and their ancestry,
// decode no historical child, and finish both tasks.
func TestOpenAndDriveIgnoreHistoricalChildren(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		durable := memory.New()
		w := &historyWriter{t: t, ctx: ctx, store: durable}
		root := w.conversation(0)
		historical := map[storage.ID]bool{}
		for i := range historicalChildren {
			owner, child := w.ownedChild(root)
			w.note(child, i)
			historical[owner], historical[child] = true, true
			if (i+1)%childrenPerBatch == 0 {
				w.flush()
			}
		}
		// A chain of finished owners leads down to the deep live task.
		conv := root
		ancestry := map[storage.ID]bool{root: true}
		for range ownershipDepth {
			owner, child := w.ownedChild(conv)
			ancestry[owner], ancestry[child] = true, true
			conv = child
		}
		shallow := w.task(root, false)
		deep := w.task(conv, false)
		w.flush()

		tally := newTallyStore(durable)
		h := open(t, ctx, s, tally, simtest.StepKind("step", nil))
		wantOpenScans(t, tally)
		if got := tally.records["ScanTasks"]; got != 2 {
			t.Fatalf("the live-task scan returned %d tasks; want the 2 live ones", got)
		}
		if got := must(h.Root().Drive(ctx)); got != core.Idle {
			t.Fatalf("conversation drive = %s; want idle", got)
		}
		if got := must(h.Drive(ctx)); got != core.Idle {
			t.Fatalf("session drive = %s; want idle", got)
		}
		if sc := tally.scans(); sc["ScanTasks"] != 1 || sc["ScanConversations"] > 1 || len(sc) > 2 {
			t.Fatalf("open and drive scanned %v; want one live-task scan and the root lookup", sc)
		}
		if n := tally.recordsRead(); n >= 50 {
			t.Fatalf("open and drive read %d task/conversation records (%v); want O(live + ancestry), under 50", n, tally.records)
		}
		for id := range tally.returned {
			if historical[id] {
				t.Fatalf("record %d of a historical child was read", id)
			}
			if !ancestry[id] && id != shallow && id != deep {
				t.Fatalf("record %d is neither live work nor its ancestry", id)
			}
		}
		t.Logf("open and drive: %d records read, calls %v", tally.recordsRead(), tally.calls)
		if tally.calls["GetEntries"]+tally.calls["ScanEntries"] != 0 {
			t.Fatalf("entries were read: %v", tally.calls)
		}
		got := must(durable.GetTasks(ctx, []storage.ID{shallow, deep}))
		if got[shallow].Status != "done" || got[deep].Status != "done" {
			t.Fatalf("live tasks after the drives: %s, %s; want both done", got[shallow].Status, got[deep].Status)
		}
		must(0, h.Close(ctx))
	})
}

// BenchmarkOpenWithFinishedChildren is §10.3's "many finished child
// conversations with few live tasks" on each backend: a session holding
// 100,000 finished children and two live tasks, one of them eight owned
// conversations deep, opened cold (store and harness) once per iteration.
// records/op counts the task and conversation records the harness read:
// the live tasks and their ancestry, whatever the history. The JSONL store
// replays its whole file into memory when it opens, so its ns/op is the
// history's size; SQLite reads rows on demand.
func BenchmarkOpenWithFinishedChildren(b *testing.B) {
	ctx := context.Background()
	for _, backend := range []string{"memory", "jsonl", "sqlite"} {
		b.Run(backend, func(b *testing.B) {
			dir := b.TempDir()
			open := func() storage.Storage {
				switch backend {
				case "jsonl":
					return must(jsonl.Open(ctx, filepath.Join(dir, "s.jsonl"), jsonl.Options{}))
				case "sqlite":
					return must(sqlite.Open(ctx, filepath.Join(dir, "s.db"), sqlite.Options{Session: "s"}))
				}
				return memory.New()
			}
			build := func() storage.Storage {
				store := open()
				w := &historyWriter{t: b, ctx: ctx, store: store}
				root := w.conversation(0)
				for i := range historicalChildren {
					_, child := w.ownedChild(root)
					w.note(child, i)
					if (i+1)%childrenPerBatch == 0 {
						w.flush()
					}
				}
				conv := root
				for range ownershipDepth {
					_, conv = w.ownedChild(conv)
				}
				w.task(root, false)
				w.task(conv, false)
				w.flush()
				return store
			}
			var durable storage.Storage
			if backend != "memory" {
				must(0, build().Close(ctx))
			}
			records := 0
			b.ResetTimer()
			for range b.N {
				if backend == "memory" {
					b.StopTimer()
					durable = build()
					b.StartTimer()
				} else {
					durable = open()
				}
				tally := newTallyStore(durable)
				h := must(core.Open(ctx, tally, core.Options{TaskKinds: []core.TaskKind{simtest.StepKind("step", nil)}}))
				records += tally.recordsRead()
				b.StopTimer()
				must(0, h.Close(ctx))
				b.StartTimer()
			}
			b.ReportMetric(float64(records)/float64(b.N), "records/op")
		})
	}
}
