package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/memstat"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// benchToolsMax is how many tools a turn may call (the peer's a, b, c, d).
const benchToolsMax = 4

// benchConfig is what `picosim bench` runs: the peer's faux-turn workload
// (shared/peer/bench.mjs) or another §10.3 workload (bench_workload.go).
type benchConfig struct {
	// Workload names the workload; empty is the peer's (workloadTurns).
	Workload   string
	Turns      int
	Tools      int
	ResetEvery int
	// CollapseEvery, when positive, collapses the context every that many
	// turns (§10.3's frequent compaction): a manual collapse that keeps
	// only the newest exchange, waited for before the next turn.
	CollapseEvery int
	Backend       string
	Fsync         bool
	JSON          bool
	// CPUProfile, when set, is where the run's CPU profile is written;
	// MemProfile, where its allocation profile is.
	CPUProfile, MemProfile string
	// Dir, when set, is where the session's files go and stay; otherwise
	// a temporary directory, removed afterwards.
	Dir string
	// Compare, when set, is a file of the peer's JSON lines to compare
	// with: ours run now with each line's settings, or read from Ours.
	Compare string
	Ours    string
	// CompareSQLite adds, per peer line, our run on SQLite against our
	// memory or JSONL run of the line (the peer has no SQLite).
	CompareSQLite bool
	// progress, when set, hears how many turns are done after each one.
	progress func(done, total int)
}

// compareFixes are the flags --compare refuses: each peer line sets the
// run, and the output is the table.
var compareFixes = []string{"workload", "turns", "tools", "reset-every", "collapse-every", "backend", "fsync", "json", "cpuprofile", "memprofile", "dir"}

func (c benchConfig) workloadName() string {
	if c.Workload == "" {
		return workloadTurns
	}
	return c.Workload
}

// benchTurnsMax bounds --turns: the turns' latencies are kept, and
// history-growth runs ten times the count; a million turns is hours.
const benchTurnsMax = 1_000_000

func parseBench(args []string, stderr io.Writer) (benchConfig, error) {
	c := benchConfig{}
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.IntVar(&c.Turns, "turns", 200, "turns to run")
	fl.IntVar(&c.Tools, "tools", 2, "tool calls per turn (0-4)")
	fl.IntVar(&c.ResetEvery, "reset-every", 0, "append a reset head after every Nth turn, the last included, as the peer does (0: never)")
	fl.IntVar(&c.CollapseEvery, "collapse-every", 0, "collapse the context every N turns, waiting for the summary (0: never)")
	fl.StringVar(&c.Backend, "backend", "memory", "memory, jsonl or sqlite")
	fl.BoolVar(&c.Fsync, "fsync", false, "make every commit durable before it returns (JSONL: sync each line; SQLite: synchronous=FULL)")
	fl.BoolVar(&c.JSON, "json", false, "print one JSON line with the peer benchmark's field names")
	fl.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	fl.StringVar(&c.MemProfile, "memprofile", "", "write the run's allocation profile to this file (go tool pprof reads it)")
	fl.StringVar(&c.Dir, "dir", "", "keep the session's files in this directory (created if need be)")
	fl.StringVar(&c.Workload, "workload", "", "the §10.3 workload to run (list: name them)")
	fl.StringVar(&c.Compare, "compare", "", "compare with the peer's JSON lines in this file (bench.mjs output)")
	fl.StringVar(&c.Ours, "ours", "", "with --compare: our JSON lines to compare, instead of running now")
	fl.BoolVar(&c.CompareSQLite, "sqlite", false, "with --compare: also run each row on SQLite, against our memory or JSONL (with the row's fsync)")
	if err := fl.Parse(args); err != nil {
		return c, flagError(err)
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Workload == "list" {
		return c, nil
	}
	if err := c.fixWorkload(set); err != nil {
		return c, err
	}
	switch {
	case c.Compare == "" && (c.Ours != "" || c.CompareSQLite):
		return c, usagef("--ours and --sqlite go with --compare")
	case c.Compare != "" && slices.ContainsFunc(compareFixes, func(f string) bool { return set[f] }):
		return c, usagef("--compare takes its settings from the peer's lines: no --%s", strings.Join(compareFixes, ", --"))
	case fl.NArg() > 0:
		return c, usagef("unexpected argument %q", fl.Arg(0))
	case c.Turns < 1 || c.Turns > benchTurnsMax:
		return c, usagef("--turns %d: want 1 to %d", c.Turns, benchTurnsMax)
	case c.Tools < 0 || c.Tools > benchToolsMax:
		return c, usagef("--tools %d: want 0 to %d", c.Tools, benchToolsMax)
	case c.ResetEvery < 0:
		return c, usagef("--reset-every %d: want 0 or more", c.ResetEvery)
	case c.CollapseEvery < 0:
		return c, usagef("--collapse-every %d: want 0 or more", c.CollapseEvery)
	case !slices.Contains(backends, c.Backend):
		return c, usagef("--backend %q: want memory, jsonl or sqlite", c.Backend)
	case c.Fsync && c.Backend == "memory":
		return c, usagef("--fsync applies to the jsonl and sqlite backends only")
	}
	if err := backendAvailable(c.Backend); err != nil {
		return c, err
	}
	return c, nil
}

// benchResult has the peer benchmark's field names, so the two compare line
// by line.
type benchResult struct {
	Impl           string  `json:"impl"`
	Backend        string  `json:"backend"`
	Fsync          bool    `json:"fsync"`
	Turns          int     `json:"turns"`
	ToolsPerTurn   int     `json:"toolsPerTurn"`
	ResetEvery     int     `json:"resetEvery"`
	CollapseEvery  int     `json:"collapseEvery,omitempty"`
	Collapses      int     `json:"collapses,omitempty"`
	Done           int     `json:"done"`
	ProviderCalls  int     `json:"providerCalls"`
	ToolCalls      int     `json:"toolCalls"`
	WallMs         float64 `json:"wallMs"`
	CPUUserMs      float64 `json:"cpuUserMs"`
	CPUSysMs       float64 `json:"cpuSysMs"`
	TurnMs         turnMs  `json:"turnMs"`
	RssMB          float64 `json:"rssMB"`
	HeapUsedMB     float64 `json:"heapUsedMB"`
	ContextEntries int     `json:"contextEntries"`
	DiskBytes      int64   `json:"diskBytes"`
	DiskFiles      int     `json:"diskFiles"`
	ReopenMs       float64 `json:"reopenMs"`

	// What the peer does not report: the workload (empty: the peer's),
	// allocations per turn, the storage's queries, rows decoded, commits
	// and writes over the run (storeCounts) and on the cold reopen, bytes
	// on disk with the session still open (scratch and WAL included), and
	// the workload's own counts.
	Workload      string  `json:"workload,omitempty"`
	AllocsPerTurn float64 `json:"allocsPerTurn"`
	storeCounts
	RssPeakMB         float64        `json:"rssPeakMB"`
	ReopenQueries     int64          `json:"reopenQueries,omitempty"`
	ReopenRows        int64          `json:"reopenRows,omitempty"`
	DiskBytesOpen     int64          `json:"diskBytesOpen,omitempty"`
	Forks             int            `json:"forks,omitempty"`
	HistoricalReads   int            `json:"historicalReads,omitempty"`
	HistoricalEntries int64          `json:"historicalEntries,omitempty"`
	Children          int            `json:"children,omitempty"`
	Jobs              int            `json:"jobs,omitempty"`
	Cancelled         int            `json:"cancelled,omitempty"`
	StreamedBytes     int64          `json:"streamedBytes,omitempty"`
	History           []historyPoint `json:"history,omitempty"`
}

type turnMs struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// benchStore opens the configured backend in dir.
func benchStore(ctx context.Context, c benchConfig, dir string) (storage.Storage, error) {
	switch c.Backend {
	case "jsonl":
		return jsonl.Open(ctx, filepath.Join(dir, "session.jsonl"), jsonl.Options{Fsync: c.Fsync})
	case "sqlite":
		return sqlite.Open(ctx, filepath.Join(dir, "sessions.db"), sqlite.Options{Session: "bench", Fsync: c.Fsync})
	}
	return memory.New(), nil
}

// benchRun is one run of a workload: its session and what it measured so
// far.
type benchRun struct {
	ctx   context.Context
	c     benchConfig
	w     workload
	dir   string
	rt    core.Runtime
	p     *faux.Provider
	opts  agent.Options
	store *countingStore
	h     *agent.Harness
	root  *agent.Conversation
	// settled hears the root's collapses end, when the config collapses.
	settled <-chan *storage.Task
	// lat are the turns' latencies in ms, in order.
	lat              []float64
	calls, toolCalls atomic.Int64
	// gate, while set, holds the echo tools until it is closed (the
	// queued workload's turn).
	gate atomic.Pointer[chan struct{}]
	res  *benchResult
}

// runBench runs the configured workload under the real runtime and
// measures it: wall and CPU time over the session, turn latencies,
// allocations per turn, memory, the storage's queries, rows and commits,
// bytes on disk with the session open and closed, and a cold reopen.
func runBench(ctx context.Context, c benchConfig) (benchResult, error) {
	res := benchResult{Impl: "pico-go", Backend: c.Backend, Fsync: c.Fsync, Turns: c.Turns, ToolsPerTurn: c.Tools, ResetEvery: c.ResetEvery, CollapseEvery: c.CollapseEvery}
	w, err := findWorkload(c.workloadName())
	if err != nil {
		return res, err
	}
	if w.name != workloadTurns {
		res.Workload = w.name
	}
	dir := c.Dir
	if dir == "" {
		tmp, err := tempDir(ctx, "picosim-bench-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, dirMode); err != nil {
		return res, err
	}
	if err := interruption(ctx); err != nil {
		return res, err
	}
	rt := core.RealRuntime()
	fo := faux.Options{DiscardRequests: true}
	if w.streams {
		fo.TokenSize = faux.TokenSize{Min: streamTokensPerChunk, Max: streamTokensPerChunk}
	}
	p, err := faux.New(rt, rand.New(rand.NewPCG(1, 2)), fo)
	if err != nil {
		return res, err
	}
	r := &benchRun{ctx: ctx, c: c, w: w, dir: dir, rt: rt, p: p, res: &res, lat: make([]float64, 0, c.Turns)}
	var tools []agent.Tool
	for _, n := range echoToolNames[:c.Tools] {
		tools = append(tools, r.tool(n))
	}
	if w.streams {
		tools = append(tools, r.dumpTool())
	}
	r.opts = agent.Options{Runtime: rt, Tools: tools, Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})}
	if w.jobs {
		r.opts.Env = proc.New(rt, benchScripts)
	}
	backend, err := benchStore(ctx, c, dir)
	if err != nil {
		return res, err
	}
	r.store = &countingStore{Storage: backend}
	var store storage.Storage = r.store
	if at, ok := killPoint(); ok {
		store = &killingStore{Storage: store, at: at}
	}
	if strings.HasPrefix(os.Getenv(pauseEnv), "commit:") {
		store = &pausingStore{Storage: store, ctx: ctx, dir: dir}
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	r.h, err = agent.Open(ctx, store, r.opts)
	if err != nil {
		_ = store.Close(ctx)
		return res, err
	}
	// A turn that fails (or a signal) returns early: the session is
	// closed first, so that nothing writes into the directory once it is
	// removed. The normal path closes it itself, checks the error and
	// drops it, so that the cold reopen below is measured (time and peak
	// memory) without the first session still held.
	defer func() {
		if r.h != nil {
			_ = r.h.Close(ctx)
		}
	}()
	if err := r.attach(); err != nil {
		return res, err
	}
	if err := w.run(r); err != nil {
		return res, err
	}
	res.WallMs = msSince(start)
	res.Turns = len(r.lat) // a workload may run more than --turns (history-growth)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	res.CPUUserMs = float64(time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()).Microseconds()) / 1000
	res.CPUSysMs = float64(time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano()).Microseconds()) / 1000
	res.ProviderCalls, res.ToolCalls = p.Calls(), int(r.toolCalls.Load())
	res.storeCounts = r.store.counts()
	if len(r.lat) > 0 {
		res.AllocsPerTurn = float64(ms1.Mallocs-ms0.Mallocs) / float64(len(r.lat))
		res.TurnMs = latencies(r.lat)
	}
	cx, err := core.DeriveContext(ctx, r.h.Store(), r.root.ID, 0)
	if err != nil {
		return res, err
	}
	res.ContextEntries = len(cx.Entries)
	res.HeapUsedMB = float64(ms1.HeapAlloc) / (1 << 20)
	// The peer's rssMB is the resident set at this point (Node's
	// memoryUsage); the peak over the process's life is apart, and in a
	// process that runs several benches it is the largest of them.
	res.RssMB = memstat.RSS()
	// Linux reports kilobytes; the set may have grown since the rusage.
	res.RssPeakMB = max(float64(ru1.Maxrss)/1024, res.RssMB)
	if c.Backend != "memory" {
		res.DiskBytesOpen, _ = filesUnder(dir)
	}
	err = r.h.Close(ctx)
	r.h, r.root = nil, nil
	if err != nil {
		return res, err
	}
	if c.Backend != "memory" {
		res.DiskBytes, res.DiskFiles = filesUnder(dir)
		t0 := time.Now()
		again, err := benchStore(ctx, c, dir)
		if err != nil {
			return res, fmt.Errorf("reopen: %w", err)
		}
		counted := &countingStore{Storage: again}
		h2, err := agent.Open(ctx, counted, r.opts)
		if err != nil {
			_ = again.Close(ctx)
			return res, fmt.Errorf("reopen: %w", err)
		}
		res.ReopenMs = msSince(t0)
		rc := counted.counts()
		res.ReopenQueries, res.ReopenRows = rc.Queries, rc.Rows
		if err := h2.Close(ctx); err != nil {
			return res, err
		}
	}
	if want := len(r.lat); res.Done != want {
		return res, fmt.Errorf("%d of %d turns ended with an answer", res.Done, want)
	}
	return res, nil
}

// attach makes the session's root handle, the collapse watch when the
// config collapses, and for the job workloads attaches the session, so
// that background work runs from now on.
func (r *benchRun) attach() error {
	r.root = r.h.Root()
	var err error
	if r.settled, err = collapseWaiter(r.ctx, r.h, r.c); err != nil {
		return err
	}
	if r.w.jobs {
		_, err = r.h.Drive(r.ctx)
	}
	return err
}

// reopenInPlace closes the session and opens it again cold on a fresh
// handle of the same files, keeping the counters.
func (r *benchRun) reopenInPlace() error {
	err := r.h.Close(r.ctx)
	r.h, r.root = nil, nil
	if err != nil {
		return err
	}
	again, err := benchStore(r.ctx, r.c, r.dir)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	r.store.Storage = again // nothing reads the wrapper between sessions
	if r.h, err = agent.Open(r.ctx, r.store, r.opts); err != nil {
		_ = again.Close(r.ctx)
		return fmt.Errorf("reopen: %w", err)
	}
	return r.attach()
}

// latencies are the percentiles of turn latencies in ms.
func latencies(lat []float64) turnMs {
	lat = slices.Clone(lat)
	slices.Sort(lat)
	pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	return turnMs{P50: pct(0.5), P90: pct(0.9), P99: pct(0.99), Max: lat[len(lat)-1]}
}

// filesUnder is the size and number of the regular files under dir: a
// session's main file and its sidecars (JSONL's scratch, SQLite's -wal
// and -shm).
func filesUnder(dir string) (bytes int64, files int) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				bytes += info.Size()
				files++
			}
		}
		return nil
	})
	return bytes, files
}

// summarizerAsks reports whether a request's last message is the
// summarizer's instruction, which bench answers with a summary.
func summarizerAsks(last ai.Message) bool {
	return last.Role == ai.RoleUser && strings.HasPrefix(last.Content.TextOf(), "Summarize the conversation above")
}

// collapseWaiter watches the root for collapses that end, when the bench
// collapses at all: the channel gets each one's final state.
func collapseWaiter(ctx context.Context, h *agent.Harness, c benchConfig) (<-chan *storage.Task, error) {
	if c.CollapseEvery == 0 {
		return nil, nil
	}
	w, err := h.Watch(ctx, h.Root().ID, core.WatchOptions{Tail: 1})
	if err != nil {
		return nil, err
	}
	ended := make(chan *storage.Task, 1)
	err = w.Start(ctx, func(e core.ConversationEvent) {
		if e.Type == core.EventTaskEnd && e.Task.Kind == agent.CollapseKindName {
			ended <- e.Task
		}
	})
	return ended, err
}

// collapseAndWait collapses the root's context, keeping its newest
// exchange, and waits until the summary landed.
func collapseAndWait(ctx context.Context, root *agent.Conversation, ended <-chan *storage.Task) error {
	keep := int64(0)
	id, err := root.Collapse(ctx, agent.CollapseOptions{KeepRecent: &keep})
	if err != nil {
		return err
	}
	select {
	case t := <-ended:
		if t.ID != id || t.Status != "done" {
			return fmt.Errorf("collapse %d ended %s (%s)", t.ID, t.Status, t.State)
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// killAtEnv, for picosim's own tests only, names a commit at which the bench
// process kills itself with SIGKILL: "N" just after commit N reached
// storage, "N:before" just before. A kill -9 at a seeded point, with no
// wall clock involved.
const killAtEnv = "PICOSIM_KILL_AT"

type commitKill struct {
	commit int
	before bool
}

func killPoint() (commitKill, bool) {
	v := os.Getenv(killAtEnv)
	if v == "" {
		return commitKill{}, false
	}
	n, when, _ := strings.Cut(v, ":")
	k, err := strconv.Atoi(n)
	if err != nil || k < 1 {
		return commitKill{}, false
	}
	return commitKill{commit: k, before: when == "before"}, true
}

// killingStore kills the process at its commit. Scratch frames commit
// beside the line, so the count is atomic and each commit keeps its own.
type killingStore struct {
	storage.Storage
	at      commitKill
	commits atomic.Int64
}

func (s *killingStore) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	n := int(s.commits.Add(1))
	if n == s.at.commit && s.at.before {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	r, err := s.Storage.Commit(ctx, b)
	if n == s.at.commit {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return r, err
}

// pausingStore waits, once, at the commit pauseEnv names ("commit:N").
type pausingStore struct {
	storage.Storage
	ctx     context.Context
	dir     string
	commits atomic.Int64
}

func (s *pausingStore) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := s.Storage.Commit(ctx, b)
	pauseIfAsked(s.ctx, fmt.Sprintf("commit:%d", s.commits.Add(1)), s.dir)
	return r, err
}

func printBench(w io.Writer, c benchConfig, r benchResult) error {
	if c.JSON {
		return json.NewEncoder(w).Encode(r)
	}
	var b strings.Builder
	name := r.Workload
	if name == "" {
		name = workloadTurns
	}
	turns := float64(max(r.Turns, 1))
	fmt.Fprintf(&b, "%s: %d turns on %s%s: %.1f turns/s (wall %.0f ms, cpu %.0f+%.0f ms)\n"+
		"turn latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n"+
		"allocations per turn %.0f; provider calls %d, tool calls %d, %scontext entries %d\n"+
		"storage: %d queries (%.1f/turn), %d rows decoded (%.1f/turn), %d commits (%.1f/turn), %d writes\n",
		name, r.Turns, r.Backend, map[bool]string{true: " (fsync)", false: ""}[r.Fsync], turns/(r.WallMs/1000), r.WallMs, r.CPUUserMs, r.CPUSysMs,
		r.TurnMs.P50, r.TurnMs.P90, r.TurnMs.P99, r.TurnMs.Max,
		r.AllocsPerTurn, r.ProviderCalls, r.ToolCalls, workloadNotes(r), r.ContextEntries,
		r.Queries, float64(r.Queries)/turns, r.Rows, float64(r.Rows)/turns, r.Commits, float64(r.Commits)/turns, r.Writes)
	fmt.Fprintf(&b, "memory: rss %.1f MB (peak %.1f MB), heap %.1f MB", r.RssMB, r.RssPeakMB, r.HeapUsedMB)
	if r.Backend != "memory" {
		fmt.Fprintf(&b, "; disk: %d bytes open (scratch and WAL included), %d closed in %d files (%.0f bytes/turn); "+
			"cold reopen %.1f ms (%d queries, %d rows)", r.DiskBytesOpen, r.DiskBytes, r.DiskFiles, float64(r.DiskBytes)/turns,
			r.ReopenMs, r.ReopenQueries, r.ReopenRows)
	}
	b.WriteString("\n")
	for _, p := range r.History {
		fmt.Fprintf(&b, "history of %d turns: rss %.1f MB, heap %.1f MB\n", p.Turns, p.RssMB, p.HeapMB)
	}
	if n := len(r.History); n >= 2 && r.History[0].RssMB > 0 {
		fmt.Fprintf(&b, "rss grew %.2f× as history grew %d×\n", r.History[n-1].RssMB/r.History[0].RssMB, r.History[n-1].Turns/r.History[0].Turns)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// workloadNotes are the counts a workload adds to the summary line.
func workloadNotes(r benchResult) string {
	var b strings.Builder
	note := func(n int64, what string) {
		if n != 0 {
			fmt.Fprintf(&b, "%s %d, ", what, n)
		}
	}
	if r.CollapseEvery != 0 {
		fmt.Fprintf(&b, "collapses %d, ", r.Collapses)
	}
	note(int64(r.Forks), "forks")
	note(int64(r.HistoricalReads), "historical reads")
	note(r.HistoricalEntries, "historical entries")
	note(int64(r.Children), "children")
	note(int64(r.Jobs), "jobs")
	note(int64(r.Cancelled), "cancelled inputs")
	note(r.StreamedBytes, "streamed bytes")
	return b.String()
}

// benchMain is `picosim bench ARGS`; it returns the exit code.
func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseBench(args, io.Discard)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, benchHelp)
		return 0
	}
	if err != nil {
		return fail(stderr, "bench", err)
	}
	switch {
	case c.Workload == "list":
		printWorkloads(stdout)
		return 0
	case c.Compare != "":
		return compareMain(ctx, c, stdout, stderr)
	}
	cpu, err := newProfileFile("--cpuprofile", c.CPUProfile)
	if err != nil {
		return fail(stderr, "bench", err)
	}
	mem, err := newProfileFile("--memprofile", c.MemProfile)
	if err != nil {
		cpu.abandon()
		return fail(stderr, "bench", err)
	}
	if cpu != nil {
		if err := pprof.StartCPUProfile(&cpu.buf); err != nil {
			cpu.abandon()
			mem.abandon()
			return fail(stderr, "bench", &fieldError{"--cpuprofile", err})
		}
	}
	var turns atomic.Int64
	c.progress = func(done, _ int) { turns.Store(int64(done)) }
	stop := startProgress(stderr, "bench", func() string { return fmt.Sprintf("%d/%d turns", turns.Load(), c.Turns) })
	r, err := runBench(ctx, c)
	stop()
	if cpu != nil {
		pprof.StopCPUProfile()
		if werr := cpu.write(); werr != nil && err == nil {
			err = werr
		}
	}
	if mem != nil {
		if werr := pprof.Lookup("allocs").WriteTo(&mem.buf, 0); werr != nil && err == nil {
			err = &envError{fmt.Errorf("--memprofile: %w", werr)}
		}
		if werr := mem.write(); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fail(stderr, "bench", benchError(ctx, err))
	}
	if err := printBench(stdout, c, r); err != nil {
		return exitFailed
	}
	return 0
}

// profileFile is a profile written to memory and then to its file,
// because pprof drops its own write errors: a full disk must not leave a
// cut profile behind a zero exit. The file is made first, so that a path
// that cannot be written is refused before the run.
type profileFile struct {
	flag string
	file *os.File
	buf  bytes.Buffer
}

// newProfileFile creates the file of flag's profile; nil when path is empty.
func newProfileFile(flag, path string) (*profileFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return nil, &fieldError{flag, err}
	}
	return &profileFile{flag: flag, file: f}, nil
}

// write writes the profile to its file and closes it.
func (p *profileFile) write() error {
	_, err := p.file.Write(p.buf.Bytes())
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &envError{fmt.Errorf("%s: %w", p.flag, err)}
	}
	return nil
}

// abandon closes the file of a profile that will not be written.
func (p *profileFile) abandon() {
	if p != nil {
		_ = p.file.Close()
	}
}

// benchError says what ended a bench early: a signal, the machine (a
// full disk, no cgo), or the harness.
func benchError(ctx context.Context, err error) error {
	if stopped := interruption(ctx); stopped != nil {
		return stopped
	}
	if isEnvironment(err) {
		return &envError{err}
	}
	return err
}

const benchHelp = `usage: picosim bench [--workload NAME] [--turns N] [--tools K] [--reset-every R] [--collapse-every C]
                     [--backend memory|jsonl|sqlite] [--fsync] [--json] [--cpuprofile FILE]
                     [--memprofile FILE] [--dir DIR]
       picosim bench --workload list
       picosim bench --compare PEER.json [--ours OURS.json] [--sqlite]

Runs the faux-turn workload of shared/peer (each turn: one input, K tool calls, a final answer)
under the real runtime and prints turns per second, turn latency percentiles, allocations per
turn, the storage's queries, rows decoded and commits, process memory, bytes on disk (with the
session open, scratch and WAL included, and closed) and the cold reopen time. --json prints one
line with the peer benchmark's fields and ours after them; --cpuprofile writes a CPU profile of the
run for go tool pprof, --memprofile its allocation profile (go tool pprof -sample_index=alloc_space
ranks what allocated most); --dir keeps the session's files in DIR (for picosim check) instead of a
temporary directory. --fsync makes every commit durable before it returns: JSONL syncs each line,
SQLite runs with synchronous=FULL. --collapse-every C collapses the context every C turns and waits for the
summary. While it runs, stderr shows the turns done: a line redrawn every second on a terminal, a
plain line every 10 s elsewhere.

--workload NAME runs one of pico-v3.md §10.3's workloads instead (--workload list names them and
says what each does): short turns with and without tools, parallel and sequential tools, large
streaming output, deep forks with historical reads, many finished children with few live tasks,
many live background jobs, queued input and cancellation, frequent compaction plus cold reopen,
and RSS as history grows tenfold (history-growth). --turns scales each; a workload fixes the
tuning flags it does not take. The same runs are BenchmarkWorkloads:
  go test ./cmd/picosim -run XXX -bench Workloads -benchtime 1x

--compare PEER.json reads the peer's JSON lines (node bench.mjs TURNS BACKEND TOOLS FSYNC RESET,
one line per run), runs ours with each line's settings (or reads ours from --ours OURS.json, lines
of picosim bench --json), and prints the ratio table: wall time, CPU, turn latency p50 and p99, RSS,
and on JSONL bytes per turn on disk and the cold reopen. --sqlite adds our SQLite run for each
line: a memory line's against our memory, a JSONL line's (synced as the line is, --fsync on
SQLite being synchronous=FULL) against our JSONL. conformance/ports/pico3/compare-bench.sh installs the peer
outside the repository and runs the issue's rows on both sides.
`
