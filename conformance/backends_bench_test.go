package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/memstat"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// The durable-backend benchmarks (issue 7) drive the peer's agent-loop
// workload (shared/peer/bench.mjs, as core's BenchmarkFauxTurns does): each
// turn sends one input "tool:a,b"; the model answers with one call per tool,
// the tools run, and the model answers with text.
const (
	// backendTurnsBench is how many turns one iteration of
	// BenchmarkBackendTurns runs: enough commits to average, few enough that
	// JSONL with fsync stays within seconds.
	backendTurnsBench = 200
	// heapHistorySmallTurns and heapHistoryLargeTurns are the two history
	// lengths BenchmarkSQLiteHeap compares: ten times apart.
	heapHistorySmallTurns = 200
	heapHistoryLargeTurns = 2000
	// heapSteadyTurns is how many turns run on a cold reopen before the
	// heap is read, so the reading is of a session at work, not just opened.
	heapSteadyTurns = 20
)

// turnBackend opens one backend on a fresh session in dir.
type turnBackend struct {
	name string
	open func(ctx context.Context, dir string) (storage.Storage, error)
}

var turnBackends = []turnBackend{
	{"memory", func(context.Context, string) (storage.Storage, error) { return memory.New(), nil }},
	{"jsonl", func(ctx context.Context, dir string) (storage.Storage, error) {
		return jsonl.Open(ctx, filepath.Join(dir, "s.jsonl"), jsonl.Options{})
	}},
	{"jsonl-fsync", func(ctx context.Context, dir string) (storage.Storage, error) {
		return jsonl.Open(ctx, filepath.Join(dir, "s.jsonl"), jsonl.Options{Fsync: true})
	}},
	{"sqlite", openSQLiteBench},
}

func openSQLiteBench(ctx context.Context, dir string) (storage.Storage, error) {
	return sqlite.Open(ctx, filepath.Join(dir, "s.db"), sqlite.Options{Session: "s"})
}

// timedStorage times the Commit calls of the storage it wraps. The line
// commits from one goroutine at a time; the counters are atomic so the
// benchmark may read them from its own.
type timedStorage struct {
	storage.Storage
	commits atomic.Int64
	spentNs atomic.Int64
}

var _ storage.Storage = (*timedStorage)(nil)

func (s *timedStorage) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	start := time.Now()
	r, err := s.Storage.Commit(ctx, b)
	s.spentNs.Add(int64(time.Since(start)))
	s.commits.Add(1)
	return r, err
}

// benchEchoTool writes name(v); it is safe to replay. (Core's echoTool lives
// in core's tests.)
func benchEchoTool(name string) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: "echo " + name,
			Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)},
		Replay: agent.ReplaySafe,
		Execute: func(ctx context.Context, callID string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			var p struct{ V string }
			if err := json.Unmarshal(args, &p); err != nil {
				return err
			}
			out.Write(fmt.Sprintf("%s(%s)", name, p.V))
			return nil
		},
	}
}

// scriptTurns queues the faux answers of turns turns: calls after a user
// input, text after tool results, with the peer provider's usage (50 input
// tokens per message). Call ids are unique per call.
func scriptTurns(p *faux.Provider, turns int) {
	n := 0
	step := faux.Respond(func(req ai.Request) (faux.Step, error) {
		n++
		in := int64(len(req.Messages) * 50)
		usage := ai.Usage{Input: in, Output: 2, TotalTokens: in + 2}
		if req.Messages[len(req.Messages)-1].Role == ai.RoleToolResult {
			return faux.Reply(faux.Text("after tools")).WithUsage(usage), nil
		}
		return faux.Reply(
			faux.ToolCall(fmt.Sprintf("call_%d_0", n), "a", `{"v":"a"}`),
			faux.ToolCall(fmt.Sprintf("call_%d_1", n), "b", `{"v":"b"}`),
		).WithStop(ai.StopToolUse).WithUsage(usage), nil
	})
	steps := make([]faux.Step, 2*turns)
	for i := range steps {
		steps[i] = step
	}
	p.SetResponses(steps...)
}

// turnSession is a harness on a store with the faux provider and the two
// echo tools, under the real runtime.
type turnSession struct {
	h *agent.Harness
	c *agent.Conversation
}

func openTurnSession(b *testing.B, ctx context.Context, store storage.Storage, seed uint64, turns int) *turnSession {
	b.Helper()
	rt := core.RealRuntime()
	p := simtest.Must(faux.New(rt, rand.New(rand.NewPCG(seed, 2)), faux.Options{DiscardRequests: true}))
	scriptTurns(p, turns)
	h, err := agent.Open(ctx, store, agent.Options{
		Runtime: rt, Tools: []agent.Tool{benchEchoTool("a"), benchEchoTool("b")},
		Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()}),
	})
	if err != nil {
		b.Fatalf("agent.Open: %v", err)
	}
	return &turnSession{h: h, c: h.Root()}
}

func (s *turnSession) run(b *testing.B, ctx context.Context, turns int) {
	b.Helper()
	for i := range turns {
		got, err := s.c.Prompt(ctx, ai.PlainText("tool:a,b"), agent.AcceptOptions{})
		if err != nil || got == nil {
			b.Fatalf("turn %d: %v (answer %v)", i, err, got)
		}
	}
}

func (s *turnSession) close(b *testing.B, ctx context.Context) {
	b.Helper()
	if err := s.h.Close(ctx); err != nil {
		b.Fatalf("close: %v", err)
	}
}

// dirBytes is the total size of the regular files under dir: a session's
// main file and its sidecars (JSONL's scratch directory, SQLite's -wal and
// -shm).
func dirBytes(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		b.Fatalf("size of %s: %v", dir, err)
	}
	return n
}

// BenchmarkBackendTurns runs backendTurnsBench turns of the peer workload
// on each backend, opened fresh in a temporary directory, and reports per
// turn: commit latency, commits, bytes on disk with the session open
// (sidecars included) and after close, and turns per second.
//
//	go test ./conformance -run XXX -bench BackendTurns -benchtime 1x
func BenchmarkBackendTurns(b *testing.B) {
	for _, be := range turnBackends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			var commits, spentNs, openBytes, closedBytes int64
			var elapsed time.Duration
			for i := range b.N {
				dir := b.TempDir()
				store, err := be.open(ctx, dir)
				if err != nil {
					b.Fatalf("open %s: %v", be.name, err)
				}
				timed := &timedStorage{Storage: store}
				s := openTurnSession(b, ctx, timed, uint64(i+1), backendTurnsBench)
				start := time.Now()
				s.run(b, ctx, backendTurnsBench)
				elapsed += time.Since(start)
				openBytes += dirBytes(b, dir)
				s.close(b, ctx)
				closedBytes += dirBytes(b, dir)
				commits += timed.commits.Load()
				spentNs += timed.spentNs.Load()
			}
			turns := float64(b.N * backendTurnsBench)
			b.ReportMetric(float64(spentNs)/1e3/float64(commits), "µs/commit")
			b.ReportMetric(float64(commits)/turns, "commits/turn")
			b.ReportMetric(float64(openBytes)/turns, "bytes/turn")
			b.ReportMetric(float64(closedBytes)/turns, "closed-bytes/turn")
			b.ReportMetric(turns/elapsed.Seconds(), "turns/s")
		})
	}
}

// BenchmarkSQLiteHeap measures SQLite sessions with heapHistorySmallTurns
// and heapHistoryLargeTurns turns of history. Each is opened cold (a fresh
// store and harness), runs heapSteadyTurns turns, and the process heap is
// read after a collection: the backend keeps the history on disk, so its
// part must stay flat as history grows tenfold. heapMB is the whole
// process's Go heap (the harness included, whose derived context grows with
// an uncompacted conversation), storeHeapMB the heap a cold store alone
// adds after reading the transcript's tail, and rssMB the resident set,
// which also counts SQLite's own C allocations.
//
// The history runs on the memory backend while a second goroutine replays
// its batches into SQLite, merged into large transactions: driving 2,000
// turns through the harness on SQLite directly takes over a minute.
//
//	go test ./conformance -run XXX -bench SQLiteHeap -benchtime 1x
func BenchmarkSQLiteHeap(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		small, large := sqliteHistories(b, ctx)
		for _, m := range []struct {
			history int
			dir     string
		}{{heapHistorySmallTurns, small}, {heapHistoryLargeTurns, large}} {
			storeHeap := coldStoreHeap(b, ctx, m.dir)
			store, err := openSQLiteBench(ctx, m.dir)
			if err != nil {
				b.Fatal(err)
			}
			s := openTurnSession(b, ctx, store, uint64(m.history), heapSteadyTurns)
			s.run(b, ctx, heapSteadyTurns)
			heap, rss := memstat.Settled()
			s.close(b, ctx)

			at := "@" + strconv.Itoa(m.history)
			b.ReportMetric(heap, "heapMB"+at)
			b.ReportMetric(storeHeap, "storeHeapMB"+at)
			if rss > 0 {
				b.ReportMetric(rss, "rssMB"+at)
			}
		}
	}
}

// sqliteHistories runs heapHistoryLargeTurns turns on the memory backend
// while replaying them into SQLite, and returns the directories of the
// sessions after heapHistorySmallTurns and after all of them. Nothing of
// the memory session outlives the call, so none of it counts in a heap
// measured afterwards.
func sqliteHistories(b *testing.B, ctx context.Context) (small, large string) {
	b.Helper()
	small, large = b.TempDir(), b.TempDir()
	items := make(chan replayItem, replayQueueItemsMax)
	replayed := make(chan error, 1)
	go func() { replayed <- replayInto(ctx, large, items) }()
	func() {
		defer close(items) // also when a turn fails the benchmark
		s := openTurnSession(b, ctx, &recordingStorage{Storage: memory.New(), to: items}, 1, heapHistoryLargeTurns)
		s.run(b, ctx, heapHistorySmallTurns)
		items <- replayItem{snapshotTo: small}
		s.run(b, ctx, heapHistoryLargeTurns-heapHistorySmallTurns)
		s.close(b, ctx)
	}()
	if err := <-replayed; err != nil {
		b.Fatal(err)
	}
	return small, large
}

// replayQueueItemsMax bounds the batches recorded but not yet replayed; a
// full queue holds the recording session back.
const replayQueueItemsMax = 1024

// replayItem is a batch to replay or, with snapshotTo set, a request to
// copy the session as replayed so far into that directory.
type replayItem struct {
	batch      storage.CommitBatch
	snapshotTo string
}

// recordingStorage sends every batch the storage it wraps accepted, in
// order, to a replayer. The batches are the backend's once committed; the
// replayer only reads them.
type recordingStorage struct {
	storage.Storage
	to chan<- replayItem
}

var _ storage.Storage = (*recordingStorage)(nil)

func (s *recordingStorage) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := s.Storage.Commit(ctx, b)
	if err == nil {
		s.to <- replayItem{batch: b}
	}
	return r, err
}

// replayBatchWritesMax bounds the writes of one merged replay transaction.
const replayBatchWritesMax = 5000

// replayInto commits the batches it receives to a new SQLite session in
// dir until items is closed, merging runs of consecutive main batches (and
// of one task's scratch batches) into one batch each: write i of a batch
// gets LastSeq+1+i, so a merged batch gives every write the sequence it
// had, and CheckBatch counts earlier writes of the same batch. After a
// failure it drains items, so the recording session never blocks.
func replayInto(ctx context.Context, dir string, items <-chan replayItem) error {
	err := replayItems(ctx, filepath.Join(dir, "s.db"), items)
	for range items {
		// Discarded: a failed replay must not block the recording session.
	}
	return err
}

func replayItems(ctx context.Context, path string, items <-chan replayItem) error {
	store, err := sqlite.Open(ctx, path, sqlite.Options{Session: "s"})
	if err != nil {
		return err
	}
	var merged storage.CommitBatch
	flush := func() error {
		if len(merged.Writes) == 0 {
			return nil
		}
		if _, err := store.Commit(ctx, merged); err != nil {
			return fmt.Errorf("replay at seq %d: %w", store.LastSeq()+1, err)
		}
		merged = storage.CommitBatch{}
		return nil
	}
	for it := range items {
		batch := it.batch
		switch {
		case it.snapshotTo != "":
			// Closed, the session is the one file: the WAL is checkpointed.
			err := errors.Join(flush(), store.Close(ctx))
			if err == nil {
				err = copyFile(path, filepath.Join(it.snapshotTo, "s.db"))
			}
			if err != nil {
				return err
			}
			if store, err = sqlite.Open(ctx, path, sqlite.Options{Session: "s"}); err != nil {
				return err
			}
			continue
		case batch.Kind != merged.Kind || batch.Task != merged.Task || len(merged.Writes)+len(batch.Writes) > replayBatchWritesMax:
			if err := flush(); err != nil {
				store.Close(ctx)
				return err
			}
			merged.Kind, merged.Task = batch.Kind, batch.Task
		}
		merged.Writes = append(merged.Writes, batch.Writes...)
	}
	return errors.Join(flush(), store.Close(ctx))
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o600)
}

// coldStoreHeap opens the SQLite session in dir on its own, reads the
// newest head and the last page of the root transcript, as a reopened
// harness would, and returns the Go heap in MB with the store still open.
func coldStoreHeap(b *testing.B, ctx context.Context, dir string) float64 {
	b.Helper()
	before, _ := memstat.Settled()
	store, err := openSQLiteBench(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close(ctx)
	page, err := store.ScanConversations(ctx, storage.ConversationQuery{Cursor: storage.Cursor{Limit: 1}})
	if err != nil || len(page.Items) != 1 {
		b.Fatalf("root conversation: %v, %v", page.Items, err)
	}
	root := page.Items[0].ID
	if _, _, err := store.NewestHead(ctx, root, 0); err != nil {
		b.Fatal(err)
	}
	tail, err := store.ScanEntries(ctx, storage.EntryQuery{ConversationID: root,
		Cursor: storage.Cursor{Before: store.LastSeq() + 1, Limit: 100}})
	if err != nil || len(tail.Items) == 0 {
		b.Fatalf("transcript tail: %d entries, %v", len(tail.Items), err)
	}
	after, _ := memstat.Settled()
	runtime.KeepAlive(tail)
	return max(after-before, 0)
}
