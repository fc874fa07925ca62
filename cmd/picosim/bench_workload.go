package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/memstat"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
)

// The §10.3 workloads (pico-v3.md: "many short turns with and without
// tools; frequent compaction plus cold reopen; parallel and sequential
// tools; large streaming output; deep forks with repeated historical
// reads; many finished child conversations with few live tasks; many live
// background tasks; queued input and cancellation"), each `picosim bench
// --workload NAME` and, through the same runBench, BenchmarkWorkloads.
// Every one runs under the real runtime with the faux provider, whose
// answers follow the turn's input (benchRespond); --turns scales it.

// workload is one §10.3 workload.
type workload struct {
	name  string
	about string
	// turns is its --turns when the flag is not given.
	turns int
	// streams registers the dump tool beside the config's echo tools
	// (and the built-in subagent tool).
	streams bool
	// tunes are the tuning flags it takes (tools, reset-every,
	// collapse-every); it fixes the others.
	tunes []string
	// jobs gives the session an execution environment of fake processes
	// (benchScripts) and attaches it, so that background jobs run.
	jobs bool
	// configure sets what the workload fixes in the config, after the
	// flags: at least the echo tools (Tools).
	configure func(c *benchConfig)
	run       func(r *benchRun) error
}

// workloadTurns is the peer's workload, `picosim bench` without
// --workload.
const workloadTurns = "turns"

// workloads are the §10.3 workloads by name, in the order `--workload
// list` names them.
var workloads = []workload{
	{name: workloadTurns, about: "the peer's workload (shared/peer/bench.mjs): each turn one input, --tools K calls at once, a final answer; --reset-every, --collapse-every",
		turns: 200, tunes: []string{"tools", "reset-every", "collapse-every"}, configure: func(*benchConfig) {}, run: runTurns},
	{name: "short", about: "short turns without tools: one input, one answer",
		turns: 200, configure: withTools(0), run: runTurns},
	{name: "short-tools", about: "short turns with two tools called at once (the peer's turn)",
		turns: 200, configure: withTools(2), run: runTurns},
	{name: "parallel-tools", about: "four tools called in one answer, run concurrently, then a final answer",
		turns: 200, configure: withTools(4), run: runTurns},
	{name: "sequential-tools", about: "four tools called one per answer (five provider calls a turn)",
		turns: 200, configure: withTools(4), run: runSequentialTools},
	{name: "streaming", about: fmt.Sprintf("large streaming output: a tool writes %d KB in %d-byte writes, then the model streams a %d KB answer",
		streamToolBytes>>10, streamWriteBytes, streamAnswerBytes>>10),
		turns: 20, streams: true, configure: withTools(0), run: runStreaming},
	{name: "deep-forks", about: "each turn forks the previous fork one turn back (a chain as deep as the turns), prompts it, then pages its whole transcript and derives two historical contexts",
		turns: 100, configure: withTools(2), run: runDeepForks},
	{name: "children", about: fmt.Sprintf("each turn runs a subagent to its answer (a finished child per turn) while %d background jobs stay live", childrenLiveJobs),
		turns: 200, jobs: true, configure: withTools(0), run: runChildren},
	{name: "live-jobs", about: fmt.Sprintf("each turn starts %d background jobs that run until stopped, then a two-tool turn among them; all stopped at the end", liveJobsPerTurn),
		turns: 200, jobs: true, configure: withTools(2), run: runLiveJobs},
	{name: "queued", about: "each turn accepts an input, queues two followUps and a nextRun, cancels one followUp and the nextRun, steers, and drives: three provider calls, two inputs cancelled",
		turns: 200, configure: withTools(2), run: runQueued},
	{name: "collapse", about: fmt.Sprintf("frequent compaction plus cold reopen: two-tool turns, a collapse every %d (or --collapse-every), reopened cold at the end", collapseEveryDefault),
		turns: 200, tunes: []string{"collapse-every"}, configure: func(c *benchConfig) {
			c.Tools = 2
			if c.CollapseEvery == 0 {
				c.CollapseEvery = collapseEveryDefault
			}
		}, run: runTurns},
	{name: "history-growth", about: fmt.Sprintf("RSS as history grows tenfold: N two-tool turns (reset every %d), a cold reopen and %d turns, then to 10N and again; prints both RSS figures",
		growthResetEvery, growthSteadyTurns),
		turns: 200, tunes: []string{"reset-every"}, configure: func(c *benchConfig) {
			c.Tools = 2
			if c.ResetEvery == 0 {
				c.ResetEvery = growthResetEvery
			}
		}, run: runHistoryGrowth},
}

var echoToolNames = []string{"a", "b", "c", "d"}

func withTools(n int) func(*benchConfig) { return func(c *benchConfig) { c.Tools = n } }

// fixWorkload checks the workload and the tuning flags given (set), and
// applies the workload's settings: its turns unless --turns is given,
// and what it fixes.
func (c *benchConfig) fixWorkload(set map[string]bool) error {
	w, err := findWorkload(c.workloadName())
	if err != nil {
		return &fieldError{"--workload", err}
	}
	for _, f := range []string{"tools", "reset-every", "collapse-every"} {
		if set[f] && !slices.Contains(w.tunes, f) {
			return usagef("--%s: the %s workload fixes it", f, w.name)
		}
	}
	if !set["turns"] {
		c.Turns = w.turns
	}
	if w.name == "history-growth" && c.Turns > benchTurnsMax/growthFactor {
		return usagef("--turns %d: history-growth runs %d times that; want at most %d", c.Turns, growthFactor, benchTurnsMax/growthFactor)
	}
	w.configure(c)
	return nil
}

const (
	// streamToolBytes is what the streaming workload's dump tool writes a
	// turn, in streamWriteBytes writes; streamAnswerBytes is the answer
	// the model then streams, in chunks of streamTokensPerChunk tokens.
	streamToolBytes      = 64 << 10
	streamWriteBytes     = 1 << 10
	streamAnswerBytes    = 64 << 10
	streamTokensPerChunk = 64
	// childrenLiveJobs are the few live tasks beside the finished children.
	childrenLiveJobs = 2
	// liveJobsPerTurn are the jobs the live-jobs workload adds each turn.
	liveJobsPerTurn = 5
	// collapseEveryDefault is the collapse workload's period in turns.
	collapseEveryDefault = 10
	// growthResetEvery bounds history-growth's context, as the issue's
	// bounded rows do; growthFactor is how much the history grows.
	growthResetEvery  = 50
	growthSteadyTurns = 10
	growthFactor      = 10
	// jobsSettleMax bounds the wall time jobs get to start or stop.
	jobsSettleMax = time.Minute
	// benchStepsAhead is how many provider answers stay queued before a
	// turn: more than any turn of any workload asks for (sequential tools:
	// five; a collapse: one more).
	benchStepsAhead = 16
)

// benchServeCmd is the fake process the job workloads start: it prints a
// line and runs until killed.
const benchServeCmd = "serve"

var benchScripts = proc.Scripts{Commands: map[string]proc.Script{
	benchServeCmd: {Chunks: []proc.Chunk{{Stream: proc.StreamStdout, Data: "listening\n"}}, Hang: true},
}}

// UnknownWorkloadError is a --workload that names no workload.
type UnknownWorkloadError struct{ Name string }

func (e *UnknownWorkloadError) Error() string {
	return fmt.Sprintf("unknown workload %q (picosim bench --workload list names them)", e.Name)
}

func findWorkload(name string) (workload, error) {
	i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
	if i < 0 {
		return workload{}, &UnknownWorkloadError{Name: name}
	}
	return workloads[i], nil
}

func printWorkloads(w io.Writer) {
	for _, wl := range workloads {
		fmt.Fprintf(w, "%-17s %s (default %d turns)\n", wl.name, wl.about, wl.turns)
	}
}

// runTurns is the peer's loop: each turn one input, with a reset and a
// collapse every so many turns when the config asks for them.
func runTurns(r *benchRun) error {
	input := "hello"
	if r.c.Tools > 0 {
		input = "tool:" + strings.Join(echoToolNames[:r.c.Tools], ",")
	}
	return r.turns(r.root, r.c.Turns, input)
}

func runSequentialTools(r *benchRun) error {
	return r.turns(r.root, r.c.Turns, "seq:"+strings.Join(echoToolNames, ","))
}

func runStreaming(r *benchRun) error {
	if err := r.turns(r.root, r.c.Turns, fmt.Sprintf("stream:%d", streamAnswerBytes)); err != nil {
		return err
	}
	r.res.StreamedBytes = int64(r.c.Turns) * (streamToolBytes + streamAnswerBytes)
	return nil
}

// runDeepForks forks, every turn after the second, the current
// conversation at its answer before the newest, so each fork drops one
// turn of its source and the chain nests source cutoffs as deep as the
// turns; each fork runs a turn and then reads history: its whole logical
// transcript, paged, and its derived context at the fork point and half
// way back.
func runDeepForks(r *benchRun) error {
	conv := r.root
	var answers []storage.ID
	for i := range r.c.Turns {
		if len(answers) >= 2 {
			at := answers[len(answers)-2]
			f, err := conv.Fork(r.ctx, at, core.ForkOptions{})
			if err != nil {
				return fmt.Errorf("fork %d: %w", i, err)
			}
			conv, answers = f, answers[:len(answers)-1]
			r.res.Forks++
		}
		answer, err := r.prompt(conv, "tool:a,b")
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		answers = append(answers, answer.ID)
		if err := r.readHistory(conv, answers); err != nil {
			return fmt.Errorf("history after turn %d: %w", i, err)
		}
	}
	return nil
}

// readHistory pages conv's whole transcript and derives its context at
// its previous answer and at the answer half way back.
func (r *benchRun) readHistory(conv *agent.Conversation, answers []storage.ID) error {
	entries, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
		return r.h.Entries(r.ctx, conv.ID, c)
	})
	if err != nil {
		return err
	}
	r.res.HistoricalReads++
	r.res.HistoricalEntries += int64(len(entries))
	for _, at := range []storage.ID{answers[max(len(answers)-2, 0)], answers[len(answers)/2]} {
		if _, err := core.DeriveContext(r.ctx, r.h.Store(), conv.ID, at); err != nil {
			return err
		}
		r.res.HistoricalReads++
	}
	return nil
}

// runChildren runs a subagent to its answer each turn, with
// childrenLiveJobs jobs live throughout: the finished children pile up
// while the live set stays small.
func runChildren(r *benchRun) error {
	jobs, err := r.startJobs(childrenLiveJobs)
	if err != nil {
		return err
	}
	for i := range r.c.Turns {
		if _, err := r.prompt(r.root, fmt.Sprintf("spawn:%d", i)); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
	}
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return r.h.Store().ScanConversations(r.ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	for _, c := range convs {
		if c.Owner != 0 {
			r.res.Children++
		}
	}
	return r.stopJobs(jobs)
}

// runLiveJobs adds liveJobsPerTurn running jobs before each turn, so the
// last turns run among liveJobsPerTurn×turns live background tasks; at the
// end it stops them all and waits until each settled killed.
func runLiveJobs(r *benchRun) error {
	var all []storage.ID
	for i := range r.c.Turns {
		jobs, err := r.startJobs(liveJobsPerTurn)
		if err != nil {
			return err
		}
		all = append(all, jobs...)
		if _, err := r.prompt(r.root, "tool:a,b"); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
	}
	return r.stopJobs(all)
}

// runQueued queues input on a conversation that is busy: the accepted
// turn's tools wait at a gate until the queueing and cancelling are done,
// so what lands and what is cancelled does not depend on timing (a
// session stays attached after a drive, so the turn may already run). The
// steer joins at post_tools, the first followUp lands as the next group;
// the second followUp and the nextRun are cancelled.
func runQueued(r *benchRun) error {
	for i := range r.c.Turns {
		r.feed()
		t0 := time.Now()
		if err := r.queuedTurn(); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		r.lat = append(r.lat, msSince(t0))
		r.res.Done++
		r.progressed()
	}
	return nil
}

func (r *benchRun) queuedTurn() error {
	c := r.root
	gate := make(chan struct{})
	r.gate.Store(&gate)
	defer func() {
		r.gate.Store(nil)
		select {
		case <-gate:
		default:
			close(gate) // a failed turn leaves no tool waiting
		}
	}()
	in, err := c.Accept(r.ctx, ai.PlainText("tool:a,b"), agent.AcceptOptions{})
	if err != nil {
		return err
	}
	var queued [4]storage.ID
	for i, q := range []func(context.Context, ai.Content) (storage.ID, error){c.FollowUp, c.FollowUp, c.NextRun, c.Steer} {
		if queued[i], err = q(r.ctx, ai.PlainText(fmt.Sprintf("queued %d", i))); err != nil {
			return err
		}
	}
	for _, id := range []storage.ID{queued[1], queued[2]} {
		res, err := c.CancelQueued(r.ctx, id)
		if err != nil {
			return err
		}
		if res != agent.Cancelled {
			return fmt.Errorf("cancel of queued input %d: %s", id, res)
		}
		r.res.Cancelled++
	}
	r.gate.Store(nil)
	close(gate)
	if _, err := c.Drive(r.ctx); err != nil {
		return err
	}
	for _, id := range []storage.ID{in, queued[0], queued[3]} {
		res, ok, err := c.Result(r.ctx, id)
		switch {
		case err != nil:
			return err
		case !ok || res.Status != agent.InputDone:
			return fmt.Errorf("input %d ended %q, want done", id, res.Status)
		}
	}
	return nil
}

// runHistoryGrowth runs the history to N turns and to growthFactor×N,
// and at each reads the process's memory in a session reopened cold
// (durable backends) after growthSteadyTurns more turns.
func runHistoryGrowth(r *benchRun) error {
	n := r.c.Turns
	input := "tool:a,b"
	for _, target := range []int{n, growthFactor * n} {
		if err := r.turns(r.root, max(target-r.res.Done, 0), input); err != nil {
			return err
		}
		history := r.res.Done
		if r.c.Backend != "memory" {
			if err := r.reopenInPlace(); err != nil {
				return err
			}
		}
		if err := r.turns(r.root, growthSteadyTurns, input); err != nil {
			return err
		}
		heap, rss := memstat.Settled()
		r.res.History = append(r.res.History, historyPoint{Turns: history, RssMB: rss, HeapMB: heap})
	}
	return nil
}

// historyPoint is the process's memory with a history of Turns turns,
// read after a collection.
type historyPoint struct {
	Turns  int     `json:"turns"`
	RssMB  float64 `json:"rssMB"`
	HeapMB float64 `json:"heapMB"`
}

// turns runs n turns of input on conv, with the config's collapses before
// the turns that have them and its resets after, as the peer's bench
// resets after every Rth turn, the last one included.
func (r *benchRun) turns(conv *agent.Conversation, n int, input string) error {
	for range n {
		i := r.res.Done
		c := r.c
		if c.CollapseEvery > 0 && i > 0 && i%c.CollapseEvery == 0 {
			if err := collapseAndWait(r.ctx, conv, r.settled); err != nil {
				return fmt.Errorf("collapse before turn %d: %w", i, err)
			}
			r.res.Collapses++
		}
		if _, err := r.prompt(conv, input); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		if c.ResetEvery > 0 && (i+1)%c.ResetEvery == 0 {
			if _, err := conv.Commit(r.ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, conv.ID); return nil }); err != nil {
				return fmt.Errorf("reset after turn %d: %w", i, err)
			}
		}
	}
	return nil
}

// prompt runs one timed turn and returns its answer.
func (r *benchRun) prompt(conv *agent.Conversation, input string) (*storage.Entry, error) {
	r.feed()
	t0 := time.Now()
	answer, err := conv.Prompt(r.ctx, ai.PlainText(input), agent.AcceptOptions{})
	if err != nil {
		return nil, err
	}
	r.lat = append(r.lat, msSince(t0))
	if answer == nil {
		return nil, errors.New("no answer")
	}
	r.res.Done++
	r.progressed()
	return answer, nil
}

func (r *benchRun) progressed() {
	if r.c.progress != nil {
		r.c.progress(r.res.Done, r.c.Turns)
	}
}

// feed keeps benchStepsAhead answers queued: the provider answers every
// request with benchRespond, whatever asked.
func (r *benchRun) feed() {
	if n := benchStepsAhead - r.p.Pending(); n > 0 {
		steps := make([]faux.Step, n)
		for i := range steps {
			steps[i] = faux.Respond(r.respond)
		}
		r.p.AppendResponses(steps...)
	}
}

// startJobs starts n background jobs and waits until each runs.
func (r *benchRun) startJobs(n int) ([]storage.ID, error) {
	jobs := make([]storage.ID, n)
	for i := range jobs {
		id, err := r.root.StartJob(r.ctx, agent.JobSpec{Cmd: benchServeCmd})
		if err != nil {
			return nil, err
		}
		jobs[i] = id
	}
	r.res.Jobs += n
	return jobs, r.awaitJobs(jobs, agent.JobRunning)
}

// stopJobs aborts the jobs and waits until each settled killed.
func (r *benchRun) stopJobs(jobs []storage.ID) error {
	for _, id := range jobs {
		if err := r.h.AbortTask(r.ctx, id); err != nil {
			return err
		}
	}
	return r.awaitJobs(jobs, agent.JobKilled)
}

// awaitJobs polls, with the wall clock (the bench runs under the real
// runtime), until every job has status.
func (r *benchRun) awaitJobs(jobs []storage.ID, status string) error {
	deadline := time.Now().Add(jobsSettleMax)
	for {
		got, err := r.h.GetTasks(r.ctx, jobs)
		if err != nil {
			return err
		}
		n := 0
		for _, t := range got {
			if t.Status == status {
				n++
			}
		}
		if n == len(jobs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs %s after %v", n, len(jobs), status, jobsSettleMax)
		}
		if err := r.rt.Sleep(r.ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

// benchRespond answers a request by its turn's input, the newest user
// message, and by how many tool results came since:
//
//	tool:a,b     one call per tool at once, then "after tools"
//	seq:a,b      one call per answer, in order, then "after tools"
//	stream:N     a call of the dump tool, then an answer of N bytes
//	spawn:X      a call of the subagent tool running "child X", then text
//	anything     an answer ("child X" is a subagent's prompt)
//
// The summarizer's instruction gets a summary. Usage is as the peer's
// provider reports it.
func (r *benchRun) respond(req ai.Request) (faux.Step, error) {
	call := r.calls.Add(1)
	in := int64(len(req.Messages) * 50)
	usage := ai.Usage{Input: in, Output: 2, TotalTokens: in + 2}
	last := req.Messages[len(req.Messages)-1]
	if summarizerAsks(last) {
		return faux.Reply(faux.Text(fmt.Sprintf("summary %d", call))).WithUsage(usage), nil
	}
	input, results := "", 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == ai.RoleToolResult {
			results++
		}
		if m.Role == ai.RoleUser {
			input = m.Content.TextOf()
			break
		}
	}
	text := func(s string) (faux.Step, error) { return faux.Reply(faux.Text(s)).WithUsage(usage), nil }
	calls := func(blocks ...ai.Block) (faux.Step, error) {
		return faux.Reply(blocks...).WithStop(ai.StopToolUse).WithUsage(usage), nil
	}
	toolCall := func(i int, name, args string) ai.Block {
		return faux.ToolCall(fmt.Sprintf("call_%d_%d", call, i), name, args)
	}
	verb, arg, _ := strings.Cut(input, ":")
	switch verb {
	case "tool":
		if last.Role == ai.RoleToolResult {
			return text("after tools")
		}
		names := strings.Split(arg, ",")
		blocks := make([]ai.Block, len(names))
		for i, n := range names {
			blocks[i] = toolCall(i, n, fmt.Sprintf(`{"v":%q}`, n))
		}
		return calls(blocks...)
	case "seq":
		names := strings.Split(arg, ",")
		if results < len(names) {
			return calls(toolCall(0, names[results], fmt.Sprintf(`{"v":%q}`, names[results])))
		}
		return text("after tools")
	case "stream":
		if results == 0 {
			return calls(toolCall(0, dumpToolName, fmt.Sprintf(`{"v":"%d"}`, streamToolBytes)))
		}
		n, err := strconv.Atoi(arg)
		if err != nil {
			return faux.Step{}, fmt.Errorf("stream input %q: %w", input, err)
		}
		return text(streamText(n))
	case "spawn":
		if results == 0 {
			return calls(toolCall(0, agent.SubagentToolName, fmt.Sprintf(`{"command":"run","prompt":"child %s"}`, arg)))
		}
		return text("after tools")
	}
	return text("answer")
}

// streamText is n bytes of text in short lines.
func streamText(n int) string {
	line := strings.Repeat("z", 63) + "\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

const dumpToolName = "dump"

// tool is an echo tool: it writes its name and arguments, and is safe to
// replay. A turn's tools run concurrently, so the count is atomic.
func (r *benchRun) tool(name string) agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)},
		Replay:     agent.ReplaySafe,
		Execute: func(ctx context.Context, _ string, args json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
			r.toolCalls.Add(1)
			if gate := r.gate.Load(); gate != nil {
				select {
				case <-*gate:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			out.Write(name + string(args))
			return nil
		},
	}
}

// dumpTool writes {"v": "N"} bytes in streamWriteBytes writes: a tool
// streaming a large output through its sink.
func (r *benchRun) dumpTool() agent.Tool {
	t := r.tool(dumpToolName)
	t.Execute = func(_ context.Context, _ string, args json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
		r.toolCalls.Add(1)
		var p struct{ V string }
		if err := json.Unmarshal(args, &p); err != nil {
			return err
		}
		n, err := strconv.Atoi(p.V)
		if err != nil {
			return err
		}
		chunk := streamText(streamWriteBytes)
		for ; n > 0; n -= streamWriteBytes {
			out.Write(chunk[:min(n, streamWriteBytes)])
		}
		return nil
	}
	return t
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
