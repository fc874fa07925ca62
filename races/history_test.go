package races

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The history row of §6.2: a session with a large finished past and little
// live work opens and runs reading only the live tasks and the ancestry they
// need.

const (
	// historicalChildren is how many finished owned children the root has.
	historicalChildren = 100_000
	// historyBatchChildren is how many children one history batch creates.
	historyBatchChildren = 10_000
	// ancestryDepth is how far below the root the deep live task lives:
	// each level is a conversation owned by a settled task one level up.
	ancestryDepth = 3
	// historySeeds is how many seeds the row runs at, instead of the sweep.
	// Every run, replays included, needs its own store holding the
	// 300,000-write history (a memory store cannot be copied, and a run
	// writes to it); committing it costs about a third of a second, several
	// under the race detector. The forced order, not the seed, is what the
	// row is about (the seed only picks among the few actors the order
	// leaves free), so two seeds, each replayed, keep the package fast.
	historySeeds = 2
	// historyReadsMax bounds the records (and calls) that open, the drive
	// and both tasks may read: the live tasks, their conversations, the
	// owner chain and the tasks' own commits come to fewer than twenty.
	historyReadsMax = 50
	// historyWorkMax bounds the memory store's own count of index probes and
	// records visited over the same span.
	historyWorkMax = 50
)

// The ids the history's construction mints: the root conversation, then per
// child an owner task, its conversation and its settlement, then per
// ancestry level the same, then the two live tasks.
const (
	historyLastID   = 1 + 3*historicalChildren
	deepConv        = historyLastID + 3*ancestryDepth - 1 // the conversation of the deepest level
	rootLiveTask    = historyLastID + 3*ancestryDepth + 1
	deepLiveTask    = rootLiveTask + 1
	liveKindName    = "live"
	historyKindName = "finished"
)

// historicalChildrenTwoLive is the row "100,000 historical children, two
// live tasks". The history is written straight to a memory store: the root,
// 100,000 conversations each owned by a settled task of the root, a chain
// of settled owners three conversations deep, a live task in the root and
// one in the deepest conversation. A counting wrapper sits between the
// session and the store. Open and a drive of the root, which serves the
// deep task through its ancestry, run both live tasks to completion while
// reading fewer than historyReadsMax records, none of them historical.
//
// forward: the root's task settles first, then the deep one. reverse: the
// deep task settles first.
func historicalChildrenTwoLive(o order) cell {
	rootExec, deepExec := actor(rootLiveTask, core.MethodExecute), actor(deepLiveTask, core.MethodExecute)
	first, second := rootExec, deepExec
	if o == reverse {
		first, second = deepExec, rootExec
	}
	points := []string{label(first, "settle"), label(first, "settled"), label(second, "settle"), label(second, "settled")}
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		mem := buildHistory()
		// Closing the session closes only the fault handle; mem stays
		// readable for the outcome.
		counter := &readCounter{Storage: fault.Wrap(s.Runtime(), mem, fault.Plan{}, nil)}
		var (
			workBefore, work int64
			status           = map[storage.ID]string{}
		)
		rt := s.Runtime()
		finished := map[storage.ID]core.Event{rootLiveTask: rt.NewEvent("root-finished"), deepLiveTask: rt.NewEvent("deep-finished")}
		kind := inv.wrapped(raceKind(liveKindName, func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			if err := transition(ctx, trt, t.ID, "running"); err != nil {
				return err
			}
			sim.Yield(ctx, "settle")
			if err := settle(ctx, trt, t.ID, "done"); err != nil {
				return err
			}
			j.add("task %d settled", t.ID)
			finished[t.ID].Set()
			sim.Yield(ctx, "settled")
			return nil
		}))
		main := func(ctx context.Context) {
			workBefore = mem.Work()
			h := must(core.Open(ctx, counter, core.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{kind}}))
			if r := must(h.Root().Drive(ctx)); r != core.Idle {
				panic(fmt.Sprintf("drive = %s; want idle", r))
			}
			check(finished[rootLiveTask].Wait(ctx))
			check(finished[deepLiveTask].Wait(ctx))
			check(h.Close(ctx))
			work = mem.Work() - workBefore
			for _, id := range []storage.ID{rootLiveTask, deepLiveTask} {
				status[id] = taskStatus(ctx, mem, id)
			}
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case counter.records >= historyReadsMax || counter.total() >= historyReadsMax:
				return fmt.Errorf("open, the drive and both tasks read %d records in %d calls %v; want fewer than %d", counter.records, counter.total(), counter.calls, historyReadsMax)
			case len(counter.historical) > 0:
				return fmt.Errorf("historical records were read: %v", counter.historical[:min(10, len(counter.historical))])
			case work >= historyWorkMax:
				return fmt.Errorf("the store visited %d records and index entries; want fewer than %d", work, historyWorkMax)
			case status[rootLiveTask] != "done" || status[deepLiveTask] != "done":
				return fmt.Errorf("live tasks ended %v; want both done", status)
			}
			firstID, secondID := storage.ID(rootLiveTask), storage.ID(deepLiveTask)
			if o == reverse {
				firstID, secondID = secondID, firstID
			}
			return j.inOrder(fmt.Sprintf("task %d settled", firstID), fmt.Sprintf("task %d settled", secondID))
		}
		return main, verify
	}}
}

// buildHistory writes the row's history to a fresh memory store. The
// batches are built once and shared by every run's store: their records are
// immutable once committed (a backend copies on change), so sharing them is
// what sharing the bytes of one file would be.
func buildHistory() *memory.Store {
	mem := memory.New()
	for _, b := range historyBatches() {
		must(mem.Commit(context.Background(), b))
	}
	return mem
}

var historyBatches = sync.OnceValue(func() []storage.CommitBatch {
	b := &historyBatch{}
	b.conversation(0)
	b.cut()
	for done := 0; done < historicalChildren; done += historyBatchChildren {
		for range historyBatchChildren {
			b.ownedChild(rootID)
		}
		b.cut()
	}
	conv := rootID
	for range ancestryDepth {
		conv = b.ownedChild(conv)
	}
	live := func(c storage.ID) storage.ID {
		return b.write(storage.Write{Type: storage.WriteTask, Task: &storage.Task{
			ID: b.next(), ConversationID: c, Kind: liveKindName, Status: "planned", Role: storage.RoleStart}})
	}
	expectID("the root's live task", live(rootID), rootLiveTask)
	expectID("the deepest conversation", conv, deepConv)
	expectID("the deep live task", live(conv), deepLiveTask)
	b.cut()
	return b.batches
})

// historyBatch numbers raw storage writes and cuts them into batches.
type historyBatch struct {
	seq     storage.ID // the last sequence written
	writes  []storage.Write
	batches []storage.CommitBatch
}

func (b *historyBatch) next() storage.ID { return b.seq + 1 }

func (b *historyBatch) write(w storage.Write) storage.ID {
	b.seq++
	if b.writes == nil {
		b.writes = make([]storage.Write, 0, 3*historyBatchChildren)
	}
	b.writes = append(b.writes, w)
	return b.seq
}

func (b *historyBatch) conversation(owner storage.ID) storage.ID {
	return b.write(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: b.next(), Owner: owner}})
}

// ownedChild writes a task in conversation c that owns a new conversation
// and has settled, and returns the new conversation.
func (b *historyBatch) ownedChild(c storage.ID) storage.ID {
	task := b.next()
	b.write(storage.Write{Type: storage.WriteTask, Task: &storage.Task{
		ID: task, ConversationID: c, Kind: historyKindName, Status: "planned", Role: storage.RoleStart, Owns: []storage.ID{task + 1}}})
	child := b.conversation(task)
	b.write(storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal})
	return child
}

func (b *historyBatch) cut() {
	b.batches = append(b.batches, storage.CommitBatch{Kind: storage.BatchMain, Writes: b.writes})
	b.writes = nil
}

// readCounter counts the reads that pass through it: calls by method, the
// records they return, and every historical record among them (an id at or
// below historyLastID other than the root). Only one actor runs at a time,
// and the simulator's hand-offs order their goroutines; mu only keeps the
// counter safe outside a simulation.
type readCounter struct {
	storage.Storage
	mu         sync.Mutex
	calls      map[string]int
	records    int
	historical []storage.ID
}

func (c *readCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.calls {
		n += k
	}
	return n
}

func (c *readCounter) saw(call string, ids ...storage.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[call]++
	c.records += len(ids)
	for _, id := range ids {
		if id != rootID && id <= historyLastID {
			c.historical = append(c.historical, id)
		}
	}
}

func (c *readCounter) sawTasks(call string, tasks []*storage.Task) {
	ids := make([]storage.ID, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	c.saw(call, ids...)
}

func sortedIDs[V any](m map[storage.ID]V) []storage.ID {
	ids := make([]storage.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (c *readCounter) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	m, err := c.Storage.GetConversations(ctx, ids)
	c.saw("GetConversations", sortedIDs(m)...)
	return m, err
}

func (c *readCounter) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	p, err := c.Storage.ScanConversations(ctx, q)
	ids := make([]storage.ID, len(p.Items))
	for i, conv := range p.Items {
		ids[i] = conv.ID
	}
	c.saw("ScanConversations", ids...)
	return p, err
}

func (c *readCounter) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	m, err := c.Storage.GetEntries(ctx, ids)
	c.saw("GetEntries", sortedIDs(m)...)
	return m, err
}

func (c *readCounter) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	p, err := c.Storage.ScanEntries(ctx, q)
	ids := make([]storage.ID, len(p.Items))
	for i, e := range p.Items {
		ids[i] = e.ID
	}
	c.saw("ScanEntries", ids...)
	return p, err
}

func (c *readCounter) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	m, err := c.Storage.GetTasks(ctx, ids)
	tasks := make([]*storage.Task, 0, len(m))
	for _, id := range sortedIDs(m) {
		tasks = append(tasks, m[id])
	}
	c.sawTasks("GetTasks", tasks)
	return m, err
}

func (c *readCounter) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	p, err := c.Storage.ScanTasks(ctx, q)
	c.sawTasks("ScanTasks", p.Items)
	return p, err
}

func (c *readCounter) NewestHead(ctx context.Context, conv, at storage.ID) (*storage.Entry, bool, error) {
	c.saw("NewestHead")
	return c.Storage.NewestHead(ctx, conv, at)
}

func (c *readCounter) GetValue(ctx context.Context, a storage.Address, at storage.ID) (storage.Version, bool, error) {
	c.saw("GetValue")
	return c.Storage.GetValue(ctx, a, at)
}

func (c *readCounter) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	c.saw("ScanValues")
	return c.Storage.ScanValues(ctx, q)
}

func (c *readCounter) ReadList(ctx context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	c.saw("ReadList")
	return c.Storage.ReadList(ctx, a, q)
}

func (c *readCounter) EntryKinds(ctx context.Context) ([]string, error) {
	c.saw("EntryKinds")
	return c.Storage.EntryKinds(ctx)
}
