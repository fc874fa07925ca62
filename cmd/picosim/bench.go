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
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// benchToolsMax is how many tools a turn may call (the peer's a, b, c, d).
const benchToolsMax = 4

// benchConfig is what `picosim bench` runs: the peer's faux-turn workload
// (shared/peer/bench.mjs).
type benchConfig struct {
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
	// CPUProfile, when set, is where the run's CPU profile is written.
	CPUProfile string
	// Dir, when set, is where the session's files go and stay; otherwise
	// a temporary directory, removed afterwards.
	Dir string
	// progress, when set, hears how many turns are done after each one.
	progress func(done, total int)
}

// benchTurnsMax bounds --turns: the workload's provider script and its
// latencies are made up front, a few dozen bytes a turn, so an unbounded
// count exhausts memory before the first turn; a million turns is hours.
const benchTurnsMax = 1_000_000

func parseBench(args []string, stderr io.Writer) (benchConfig, error) {
	c := benchConfig{}
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.IntVar(&c.Turns, "turns", 200, "turns to run")
	fl.IntVar(&c.Tools, "tools", 2, "tool calls per turn (0-4)")
	fl.IntVar(&c.ResetEvery, "reset-every", 0, "append a reset head every N turns (0: never)")
	fl.IntVar(&c.CollapseEvery, "collapse-every", 0, "collapse the context every N turns, waiting for the summary (0: never)")
	fl.StringVar(&c.Backend, "backend", "memory", "memory, jsonl or sqlite")
	fl.BoolVar(&c.Fsync, "fsync", false, "sync every JSONL write")
	fl.BoolVar(&c.JSON, "json", false, "print one JSON line with the peer benchmark's field names")
	fl.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	fl.StringVar(&c.Dir, "dir", "", "keep the session's files in this directory (created if need be)")
	if err := fl.Parse(args); err != nil {
		return c, flagError(err)
	}
	switch {
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
	case c.Fsync && c.Backend != "jsonl":
		return c, usagef("--fsync applies to the jsonl backend only")
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
		return sqlite.Open(ctx, filepath.Join(dir, "sessions.db"), sqlite.Options{Session: "bench"})
	}
	return memory.New(), nil
}

// runBench runs the workload under the real runtime: each turn one input
// ("tool:a,b" style), one call per tool, the tools, and a final answer.
func runBench(ctx context.Context, c benchConfig) (benchResult, error) {
	res := benchResult{Impl: "pico-go", Backend: c.Backend, Fsync: c.Fsync, Turns: c.Turns, ToolsPerTurn: c.Tools, ResetEvery: c.ResetEvery, CollapseEvery: c.CollapseEvery}
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
	p, err := faux.New(rt, rand.New(rand.NewPCG(1, 2)), faux.Options{DiscardRequests: true})
	if err != nil {
		return res, err
	}
	names := []string{"a", "b", "c", "d"}[:c.Tools]
	calls := 0
	step := faux.Respond(func(req ai.Request) (faux.Step, error) {
		calls++
		in := int64(len(req.Messages) * 50) // usage as the peer's provider reports it
		usage := ai.Usage{Input: in, Output: 2, TotalTokens: in + 2}
		last := req.Messages[len(req.Messages)-1]
		if summarizerAsks(last) {
			return faux.Reply(faux.Text(fmt.Sprintf("summary %d", calls))).WithUsage(usage), nil
		}
		if last.Role == ai.RoleToolResult || len(names) == 0 {
			return faux.Reply(faux.Text("after tools")).WithUsage(usage), nil
		}
		blocks := make([]ai.Block, len(names))
		for i, n := range names {
			blocks[i] = faux.ToolCall(fmt.Sprintf("call_%d_%d", calls, i), n, fmt.Sprintf(`{"v":%q}`, n))
		}
		return faux.Reply(blocks...).WithStop(ai.StopToolUse).WithUsage(usage), nil
	})
	collapses := 0
	if c.CollapseEvery > 0 {
		collapses = (c.Turns - 1) / c.CollapseEvery
	}
	steps := make([]faux.Step, 2*c.Turns+collapses)
	for i := range steps {
		steps[i] = step
	}
	p.SetResponses(steps...)
	var toolCalls atomic.Int64 // a turn's tools run concurrently
	var tools []agent.Tool
	for _, n := range names {
		tools = append(tools, agent.Tool{
			Definition: ai.Tool{Name: n, Description: n, Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)},
			Replay:     agent.ReplaySafe,
			Execute: func(_ context.Context, _ string, args json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
				toolCalls.Add(1)
				out.Write(n + string(args))
				return nil
			},
		})
	}
	opts := agent.Options{Runtime: rt, Tools: tools, Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})}
	store, err := benchStore(ctx, c, dir)
	if err != nil {
		return res, err
	}
	if at, ok := killPoint(); ok {
		store = &killingStore{Storage: store, at: at}
	}
	if strings.HasPrefix(os.Getenv(pauseEnv), "commit:") {
		store = &pausingStore{Storage: store, ctx: ctx, dir: dir}
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	h, err := agent.Open(ctx, store, opts)
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
		if h != nil {
			_ = h.Close(ctx)
		}
	}()
	root := h.Root()
	settled, err := collapseWaiter(ctx, h, c)
	if err != nil {
		return res, err
	}
	lat := make([]float64, 0, c.Turns)
	input := "hello"
	if len(names) > 0 {
		input = "tool:" + strings.Join(names, ",")
	}
	for i := range c.Turns {
		if c.ResetEvery > 0 && i > 0 && i%c.ResetEvery == 0 {
			if _, err := root.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, root.ID); return nil }); err != nil {
				return res, err
			}
		}
		if c.CollapseEvery > 0 && i > 0 && i%c.CollapseEvery == 0 {
			if err := collapseAndWait(ctx, root, settled); err != nil {
				return res, fmt.Errorf("collapse before turn %d: %w", i, err)
			}
			res.Collapses++
		}
		t0 := time.Now()
		answer, err := root.Prompt(ctx, ai.PlainText(input), agent.AcceptOptions{})
		if err != nil {
			return res, fmt.Errorf("turn %d: %w", i, err)
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		if answer != nil {
			res.Done++
		}
		if c.progress != nil {
			c.progress(i+1, c.Turns)
		}
	}
	res.WallMs = float64(time.Since(start).Microseconds()) / 1000
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	res.CPUUserMs = float64(time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()).Microseconds()) / 1000
	res.CPUSysMs = float64(time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano()).Microseconds()) / 1000
	res.ProviderCalls, res.ToolCalls = p.Calls(), int(toolCalls.Load())
	slices.Sort(lat)
	pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	res.TurnMs = turnMs{P50: pct(0.5), P90: pct(0.9), P99: pct(0.99), Max: lat[len(lat)-1]}
	cx, err := core.DeriveContext(ctx, h.Store(), root.ID, 0)
	if err != nil {
		return res, err
	}
	res.ContextEntries = len(cx.Entries)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapUsedMB = float64(ms.HeapAlloc) / (1 << 20)
	res.RssMB = float64(ru1.Maxrss) / 1024 // Linux reports kilobytes
	err = h.Close(ctx)
	h, root = nil, nil
	if err != nil {
		return res, err
	}
	if c.Backend != "memory" {
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					res.DiskBytes += info.Size()
					res.DiskFiles++
				}
			}
			return nil
		})
		t0 := time.Now()
		again, err := benchStore(ctx, c, dir)
		if err != nil {
			return res, fmt.Errorf("reopen: %w", err)
		}
		h2, err := agent.Open(ctx, again, opts)
		if err != nil {
			_ = again.Close(ctx)
			return res, fmt.Errorf("reopen: %w", err)
		}
		res.ReopenMs = float64(time.Since(t0).Microseconds()) / 1000
		if err := h2.Close(ctx); err != nil {
			return res, err
		}
	}
	if res.Done != c.Turns {
		return res, fmt.Errorf("%d of %d turns ended with an answer", res.Done, c.Turns)
	}
	return res, nil
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
	_, err := fmt.Fprintf(w, "%d turns on %s%s: %.1f turns/s (wall %.0f ms, cpu %.0f+%.0f ms)\n"+
		"turn latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n"+
		"provider calls %d, tool calls %d, %scontext entries %d\n"+
		"memory: rss %.1f MB, heap %.1f MB; disk: %d bytes in %d files; cold reopen %.1f ms\n",
		r.Turns, r.Backend, map[bool]string{true: " (fsync)", false: ""}[r.Fsync], float64(r.Turns)/(r.WallMs/1000), r.WallMs, r.CPUUserMs, r.CPUSysMs,
		r.TurnMs.P50, r.TurnMs.P90, r.TurnMs.P99, r.TurnMs.Max, r.ProviderCalls, r.ToolCalls, collapsesNote(r), r.ContextEntries,
		r.RssMB, r.HeapUsedMB, r.DiskBytes, r.DiskFiles, r.ReopenMs)
	return err
}

func collapsesNote(r benchResult) string {
	if r.CollapseEvery == 0 {
		return ""
	}
	return fmt.Sprintf("collapses %d, ", r.Collapses)
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
	// The profile goes to memory and then to the file, because pprof
	// drops its own write errors: a full disk must not leave a cut
	// profile behind a zero exit. The file is made first, so that a path
	// that cannot be written is refused before the run.
	var (
		profile    *os.File
		profileBuf bytes.Buffer
	)
	if c.CPUProfile != "" {
		profile, err = os.OpenFile(c.CPUProfile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
		if err != nil {
			return fail(stderr, "bench", &fieldError{"--cpuprofile", err})
		}
		if err := pprof.StartCPUProfile(&profileBuf); err != nil {
			_ = profile.Close()
			return fail(stderr, "bench", &fieldError{"--cpuprofile", err})
		}
	}
	var turns atomic.Int64
	c.progress = func(done, _ int) { turns.Store(int64(done)) }
	stop := startProgress(stderr, "bench", func() string { return fmt.Sprintf("%d/%d turns", turns.Load(), c.Turns) })
	r, err := runBench(ctx, c)
	stop()
	if profile != nil {
		pprof.StopCPUProfile()
		_, werr := profile.Write(profileBuf.Bytes())
		if cerr := profile.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil && err == nil {
			err = &envError{fmt.Errorf("--cpuprofile: %w", werr)}
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

const benchHelp = `usage: picosim bench [--turns N] [--tools K] [--reset-every R] [--collapse-every C] [--backend memory|jsonl|sqlite]
                     [--fsync] [--json] [--cpuprofile FILE] [--dir DIR]

Runs the faux-turn workload of shared/peer (each turn: one input, K tool calls, a final answer)
under the real runtime and prints turns per second, turn latency percentiles, process memory,
bytes on disk and the cold reopen time. --json prints one line with the peer benchmark's fields;
--cpuprofile writes a CPU profile of the run for go tool pprof; --dir keeps the session's files in
DIR (for picosim check) instead of a temporary directory. --collapse-every C collapses the context
every C turns and waits for the summary: with a durable backend, §10.3's frequent compaction plus
cold reopen. While it runs, stderr shows the turns done: a line redrawn every second on a terminal,
a plain line every 10 s elsewhere.
`
