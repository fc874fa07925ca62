package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/conformance/script"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// session is this implementation under the kit: an agent session over
// memory storage on the simulated runtime, which a reopen keeps, with the
// faux provider playing the scenario's responses and the kit's tools. Its
// methods run on the simulation's main actor.
type session struct {
	s     *sim.Sim
	swarm Swarm
	store storage.Storage
	faux  *faux.Provider
	// proc is a shell scenario's execution environment (nil otherwise),
	// the same machine across a reopen.
	proc *proc.Env
	h    *agent.Harness
	// convs are the conversations the program knows, by cN index: the
	// root, then forks and spawned children in the order actions made them.
	convs []storage.ID
	// inputs are the inputs accepted into each conversation, in order,
	// which cancel-queued numbers.
	inputs map[storage.ID][]storage.ID
	// views keep a watch on every conversation the program knows, whose
	// fold is the final view.
	views map[storage.ID]*core.WatchHandle
	// watches are the watch actions' logs; live says which still listen.
	watches []*watchLog
	actions []ActionOutcome
	// configured says the root's settings are written (once, at the
	// first open).
	configured bool
	// record, when set, sees every record and event the session
	// exchanges, by the name of its schema (RunRecorded).
	record func(schema string, v any)
}

// watchLog is one watch action: its conversation and each commit's events.
type watchLog struct {
	conv    storage.ID
	w       *core.WatchHandle
	commits [][]string
	readAt  storage.ID
	live    bool
}

const rootConversation storage.ID = 1

// quiesceDelay is the virtual time the kit lets pass after every action,
// so that watch listeners have seen every commit it made before the next
// one starts (virtual time moves only when nothing else can run).
const quiesceDelay = time.Millisecond

func newSession(s *sim.Sim, open Request) (*session, error) {
	se := &session{s: s}
	steps, err := fauxSteps(open.Responses, se.jobAt)
	if err != nil {
		return nil, err
	}
	// Whole answers in one chunk: the outcome has no previews, but a
	// watch's commits do not depend on chunking either way.
	p, err := faux.New(s.Runtime(), s.Rand(), faux.Options{TokenSize: faux.TokenSize{Min: 4096, Max: 4096}})
	if err != nil {
		return nil, err
	}
	p.SetResponses(steps...)
	sw := Swarm{Tail: 1}
	if open.Swarm != nil {
		sw = *open.Swarm
	}
	if len(open.Processes) > 0 && !sw.Shell {
		return nil, errors.New("processes without the shell tools (swarm shell)")
	}
	if sw.Shell {
		scripts := proc.Scripts{Commands: map[string]proc.Script{}}
		for _, pr := range open.Processes {
			sc := proc.Script{ExitCode: pr.ExitCode, Hang: pr.Hang, IgnoreKillMs: pr.TrapMs}
			for _, c := range pr.Chunks {
				sc.Chunks = append(sc.Chunks, proc.Chunk{AfterMs: c.AfterMs, Stream: c.Stream, Data: c.Data})
			}
			if pr.EndAfterMs > 0 {
				sc.Chunks = append(sc.Chunks, proc.Chunk{AfterMs: pr.EndAfterMs, Stream: proc.StreamStdout})
			}
			scripts.Commands[pr.Command] = sc
		}
		if err := scripts.Validate(); err != nil {
			return nil, err
		}
		se.proc = proc.New(s.Runtime(), scripts)
	}
	se.swarm, se.store, se.faux, se.convs = sw, survivor{memory.New()}, p, []storage.ID{rootConversation}
	se.inputs, se.views = map[storage.ID][]storage.ID{}, map[storage.ID]*core.WatchHandle{}
	return se, nil
}

// jobs are the session's jobs by creation order.
func (se *session) jobs(ctx context.Context) ([]*storage.Task, error) {
	jobs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return se.store.ScanTasks(ctx, storage.TaskQuery{Cursor: c, Kind: agent.JobKindName})
	})
	slices.SortFunc(jobs, func(a, b *storage.Task) int { return int(a.ID - b.ID) })
	return jobs, err
}

// jobAt is the session's kth job (modulo how many), 0 when there is none.
func (se *session) jobAt(k int) storage.ID {
	jobs, err := se.jobs(context.Background())
	if err != nil || len(jobs) == 0 {
		return 0
	}
	return jobs[script.Nth(k, len(jobs))].ID
}

// fauxSteps is the protocol's responses as faux steps; a job call's id is
// the one jobAt gives when the model plays the answer.
func fauxSteps(rs []Response, jobAt func(int) storage.ID) ([]faux.Step, error) {
	var steps []faux.Step
	for _, r := range rs {
		switch r.Kind {
		case "text":
			steps = append(steps, faux.Reply(faux.Text(r.Text)))
		case "calls":
			blocks := func(jobAt func(int) storage.ID) ([]ai.Block, error) {
				var blocks []ai.Block
				for _, c := range r.Calls {
					args := c.Arguments
					if c.Job != nil {
						var m map[string]any
						if err := json.Unmarshal(args, &m); err != nil {
							return nil, fmt.Errorf("call %s: arguments: %v", c.ID, err)
						}
						m["id"] = jobAt(*c.Job)
						args, _ = json.Marshal(m)
					}
					blocks = append(blocks, faux.ToolCall(c.ID, c.Name, string(args)))
				}
				return blocks, nil
			}
			now, err := blocks(func(int) storage.ID { return 0 })
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(r.Calls, func(c Call) bool { return c.Job != nil }) {
				steps = append(steps, faux.Reply(now...).WithStop(ai.StopToolUse))
				continue
			}
			steps = append(steps, faux.Step{Func: func(ai.Request) (faux.Step, error) {
				b, err := blocks(jobAt)
				return faux.Reply(b...).WithStop(ai.StopToolUse), err
			}})
		case "rate-limited":
			steps = append(steps, faux.RateLimited())
		case "deferred":
			steps = append(steps, faux.Reply().WithStop(ai.StopDeferred))
		case "overflow":
			steps = append(steps, faux.ContextOverflow())
		case "fail":
			steps = append(steps, faux.Reply().WithStop(ai.StopError).WithError("the provider refused"))
		case "aborted":
			steps = append(steps, faux.Reply(faux.Text("cut")).WithStop(ai.StopAborted))
		default:
			return nil, fmt.Errorf("response kind %q: want text, calls, rate-limited, deferred, overflow, fail or aborted", r.Kind)
		}
	}
	return steps, nil
}

// open opens the harness over the session's storage (again, after a
// reopen) and watches every conversation the program knows.
func (se *session) open(ctx context.Context) error {
	retry := agent.RetryPolicy{Delay: time.Duration(se.swarm.RetryMs) * time.Millisecond}
	opts := agent.Options{Runtime: se.s.Runtime(), CheckInvariants: true,
		Tools: kitTools(se.swarm.Shell), Retry: retry,
		Models: agent.NewModels(agent.ModelSource{Provider: se.faux, Models: se.faux.Models()})}
	if se.proc != nil {
		opts.Env = se.proc
	}
	h, err := agent.Open(ctx, se.store, opts)
	if err != nil {
		return err
	}
	se.h = h
	if !se.configured {
		// Collapses keep only the newest exchange (keepRecent 0, §8.4):
		// the scenarios' conversations are far below the default, and an
		// overflow could otherwise collapse nothing.
		root, err := h.Conversation(ctx, rootConversation)
		if err != nil {
			return err
		}
		if err := root.Value(agent.CollapseKeepRecentValue.Address).Set(ctx, json.RawMessage("0")); err != nil {
			return err
		}
		if b := se.swarm.BudgetMs; b > 0 {
			if err := root.Value(agent.ToolBudgetValue.Address).Set(ctx, json.RawMessage(strconv.Itoa(b))); err != nil {
				return err
			}
		}
		se.configured = true
	}
	clear(se.views)
	for _, conv := range se.convs {
		if err := se.view(ctx, conv); err != nil {
			return err
		}
	}
	return nil
}

// view starts the watch whose fold is conv's final view.
func (se *session) view(ctx context.Context, conv storage.ID) error {
	if se.views[conv] != nil {
		return nil
	}
	w, err := se.h.Watch(ctx, conv, core.WatchOptions{Tail: se.swarm.Tail})
	if err != nil {
		return err
	}
	se.views[conv] = w
	return w.Start(ctx, func(ev core.ConversationEvent) {
		if se.record != nil {
			se.record("conversation-event", ev)
		}
	})
}

// know adds a conversation an action made to those the program knows.
func (se *session) know(ctx context.Context, conv storage.ID) error {
	se.convs = append(se.convs, conv)
	return se.view(ctx, conv)
}

// kitTools are the tools a scenario's answers call: a and b echo their
// name and arguments; work does what its do argument says; a shell
// scenario's bash and job are the built-in ones.
func kitTools(shell bool) []agent.Tool {
	echo := func(name string) agent.Tool {
		return agent.Tool{
			Definition: ai.Tool{Name: name, Description: "echo " + name, Parameters: json.RawMessage(`{"type":"object"}`)},
			Replay:     agent.ReplaySafe,
			Execute: func(_ context.Context, _ string, args json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
				out.Write(name + string(args))
				return nil
			},
		}
	}
	tools := []agent.Tool{echo("a"), echo("b"), WorkTool()}
	if shell {
		tools = append(tools, agent.BashTool(), agent.JobTool())
	}
	return tools
}

// WorkTool is the program language's "work" tool: it does what its call
// asks — ok, throw, slow (three virtual seconds), terminate, handoff or
// addTools — the tool behaviours a scenario's or a generated program's
// answers name. picosim's runs and the kit's sessions use this one tool.
func WorkTool() agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: "work", Description: "do as asked", Parameters: json.RawMessage(`{"type":"object","properties":{"do":{"type":"string"}}}`)},
		Replay:     agent.ReplaySafe,
		Execute: func(ctx context.Context, _ string, raw json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			var args struct{ Do string }
			if err := json.Unmarshal(raw, &args); err != nil {
				return err
			}
			switch args.Do {
			case "throw":
				return errors.New("the work failed")
			case "slow":
				if err := rt.Sleep(ctx, rt.Now().Add(3*time.Second)); err != nil {
					return err
				}
			case "terminate":
				out.Terminate(true)
			case "handoff":
				out.Handoff("start afresh")
			case "addTools":
				out.AddTools([]string{"b"})
			}
			out.Write("worked: " + args.Do)
			return nil
		},
	}
}

// pickEntry is the entry a fork or host-entry line names: conversation cN's
// entry number n (modulo how many it has). A conversation with no entry
// gives a nil conversation and no error.
func (se *session) pickEntry(ctx context.Context, convArg, nArg string) (*agent.Conversation, storage.ID, error) {
	conv := se.conv(convArg)
	page, err := se.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
	if err != nil || len(page.Items) == 0 {
		return nil, 0, err
	}
	c, err := se.h.Conversation(ctx, conv)
	if err != nil {
		return nil, 0, err
	}
	n, _ := strconv.Atoi(nArg)
	return c, page.Items[script.Nth(n, len(page.Items))].ID, nil
}

// conv resolves "cN" to a conversation the program knows (script.Nth).
func (se *session) conv(a string) storage.ID {
	n, _ := script.ConvIndex(a)
	return se.convs[script.Nth(n, len(se.convs))]
}

func (se *session) agentConv(ctx context.Context, a string) (*agent.Conversation, error) {
	return se.h.Conversation(ctx, se.conv(a))
}

// do performs one action and records its outcome; then it lets watch
// listeners catch up.
func (se *session) do(ctx context.Context, op string, args []string, line string) (ActionOutcome, error) {
	before := se.store.LastSeq()
	out := ActionOutcome{Line: line}
	ids, result, err := se.act(ctx, op, args)
	switch {
	case err == nil:
		for _, id := range ids {
			out.IDs = append(out.IDs, idOf(id))
		}
		out.Result = result
	case refusal(err) != "":
		out.Refused = refusal(err)
		if n := se.store.LastSeq() - before; n != 0 {
			out.Result = fmt.Sprintf("consumed %d ids", n) // a rejected commit consumes none
		}
	default:
		return out, fmt.Errorf("%s: %w", line, err)
	}
	if err := se.s.Runtime().Sleep(ctx, quiesceDelay); err != nil {
		return out, err
	}
	se.actions = append(se.actions, out)
	return out, nil
}

// refusal names a typed refusal of a host call: the commit rule it broke,
// or the typed error; "" for anything else, which fails the scenario.
func refusal(err error) string {
	if r := core.RuleOf(err); r != "" {
		return string(r)
	}
	var already *agent.RequestAlreadyAcceptedError
	var spawn *agent.SpawnError
	var input *agent.InputError
	var collapse *agent.CollapseError
	switch {
	case errors.As(err, &already):
		return "request-already-accepted"
	case errors.As(err, &spawn):
		return "spawn"
	case errors.As(err, &input):
		return "input"
	case errors.Is(err, agent.ErrNothingToCollapse):
		return "nothing-to-collapse"
	case errors.Is(err, agent.ErrCollapseInProgress):
		return "collapse-in-progress"
	case errors.As(err, &collapse):
		return "collapse"
	case errors.Is(err, core.ErrNotFound):
		return "not-found"
	case errors.Is(err, core.ErrShuttingDown):
		return "shutting-down"
	}
	return ""
}

func idOf(id storage.ID) ID { return ID(strconv.FormatInt(int64(id), 10)) }

func (se *session) act(ctx context.Context, op string, args []string) (ids []storage.ID, result string, err error) {
	switch op {
	case "accept", "followup", "steer", "next-run":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		content := ai.PlainText(args[1])
		var id storage.ID
		switch op {
		case "accept":
			var opts agent.AcceptOptions
			if len(args) == 3 {
				opts.RequestID = strings.TrimPrefix(args[2], "req=")
			}
			id, err = c.Accept(ctx, content, opts)
		case "followup":
			id, err = c.FollowUp(ctx, content)
		case "steer":
			id, err = c.Steer(ctx, content)
		default:
			id, err = c.NextRun(ctx, content)
		}
		if err != nil {
			return nil, "", err
		}
		se.inputs[c.ID] = append(se.inputs[c.ID], id)
		return []storage.ID{id}, "", nil
	case "write":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		input, entry, err := c.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": args[1]}})
		if err != nil {
			return nil, "", err
		}
		_ = entry // §9.1: write returns the input id; its placement is in the input's result
		se.inputs[c.ID] = append(se.inputs[c.ID], input)
		return []storage.ID{input}, "", nil
	case "cancel-queued":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		ins := se.inputs[c.ID]
		if len(ins) == 0 {
			return nil, "no input", nil
		}
		n, _ := strconv.Atoi(args[1])
		r, err := c.CancelQueued(ctx, ins[script.Nth(n, len(ins))])
		return nil, string(r), err
	case "abort":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		return nil, "", c.Abort(ctx)
	case "abort-task":
		in, err := se.h.Inspect(ctx)
		if err != nil {
			return nil, "", err
		}
		live := append(in.Start, in.Inflight...)
		if len(live) == 0 {
			return nil, "no task", nil
		}
		slices.SortFunc(live, func(a, b *storage.Task) int { return int(a.ID - b.ID) })
		n, _ := strconv.Atoi(args[0])
		t := live[script.Nth(n, len(live))]
		return []storage.ID{t.ID}, "", se.h.AbortTask(ctx, t.ID)
	case "fork":
		c, at, err := se.pickEntry(ctx, args[0], args[1])
		if err != nil {
			return nil, "", err
		}
		if c == nil {
			return nil, "no entry", nil
		}
		abort, carry, _ := script.ForkOf(script.Line{Op: "fork", Args: args})
		f, err := c.Fork(ctx, at, core.ForkOptions{Abort: abort, Values: CarriedAddresses(carry)})
		if err != nil {
			return nil, "", err
		}
		return []storage.ID{f.ID}, "", se.know(ctx, f.ID)
	case "entry":
		c, at, err := se.pickEntry(ctx, args[0], args[1])
		if err != nil {
			return nil, "", err
		}
		if c == nil {
			return nil, "no entry", nil
		}
		id, err := hostHead(ctx, c.Conversation, at)
		if err != nil {
			return nil, "", err
		}
		return []storage.ID{id}, "", nil
	case "edit":
		conv := se.conv(args[0])
		page, err := se.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil {
			return nil, "", err
		}
		n, _ := strconv.Atoi(args[1])
		draft, ok := HostEdit(page.Items, n, args[2], se.s.Runtime().Now().UnixMilli())
		if !ok {
			return nil, "no user entry", nil
		}
		c, err := se.h.Conversation(ctx, conv)
		if err != nil {
			return nil, "", err
		}
		var id storage.ID
		_, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
			id = tx.Entry(core.NoticeKind, draft)
			return nil
		})
		if err != nil {
			return nil, "", err
		}
		return []storage.ID{id}, "", nil
	case "value", "list":
		var scope core.StateScope = se.h
		if args[0] != "session" {
			c, err := se.h.Conversation(ctx, se.conv(args[0]))
			if err != nil {
				return nil, "", err
			}
			scope = c
		}
		r, err := HostState(ctx, scope, op, args)
		return nil, r, err
	case "watch":
		conv := se.conv(args[0])
		w, err := se.h.Watch(ctx, conv, core.WatchOptions{Tail: se.swarm.Tail})
		if err != nil {
			return nil, "", err
		}
		log := &watchLog{conv: conv, w: w, live: true}
		se.watches = append(se.watches, log)
		return nil, "", w.Start(ctx, log.listen)
	case "unwatch":
		var live []*watchLog
		for _, w := range se.watches {
			if w.live {
				live = append(live, w)
			}
		}
		if len(live) == 0 {
			return nil, "no watch", nil
		}
		n, _ := strconv.Atoi(args[0])
		w := live[script.Nth(n, len(live))]
		w.w.Unsubscribe()
		w.live = false
		return nil, "", nil
	case "drive":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		r, err := c.Drive(ctx)
		return nil, string(r), err
	case "drive-for":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		ms, _ := strconv.Atoi(args[1])
		r, err := se.driveFor(ctx, c, time.Duration(ms)*time.Millisecond)
		return nil, r, err
	case "job":
		c, err := se.h.Conversation(ctx, rootConversation)
		if err != nil {
			return nil, "", err
		}
		id, err := c.StartJob(ctx, JobSpec(args, se.h.Runtime().Now()))
		if err != nil {
			return nil, "", err
		}
		return []storage.ID{id}, "", nil
	case "wait-job":
		jobs, err := se.jobs(ctx)
		if err != nil {
			return nil, "", err
		}
		if len(jobs) == 0 {
			return nil, "no job", nil
		}
		n, _ := strconv.Atoi(args[0])
		r, err := se.waitJob(ctx, jobs[script.Nth(n, len(jobs))])
		return []storage.ID{jobs[script.Nth(n, len(jobs))].ID}, r, err
	case "reopen", "shutdown":
		if op == "shutdown" {
			if err := se.h.Shutdown(ctx); err != nil {
				return nil, "", err
			}
		}
		for _, w := range se.watches {
			w.live = false // a closed harness ends its watches
		}
		if err := se.h.Close(ctx); err != nil {
			return nil, "", err
		}
		return nil, "", se.open(ctx)
	case "collapse":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		// Keep only the newest exchange: the scenarios' conversations
		// are far below the default keepRecent.
		var keep int64
		opts := agent.CollapseOptions{KeepRecent: &keep}
		if len(args) > 1 {
			opts.Instructions = args[1]
		}
		id, err := c.Collapse(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return []storage.ID{id}, "", nil
	case "reset":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		input, _, err := c.Reset(ctx, "")
		if err != nil {
			return nil, "", err
		}
		se.inputs[c.ID] = append(se.inputs[c.ID], input)
		return nil, "", nil // §9.1: reset returns nothing
	case "spawn":
		c, err := se.agentConv(ctx, args[0])
		if err != nil {
			return nil, "", err
		}
		opts := agent.SpawnOptions{Prompt: ai.PlainText(args[1])}
		if len(args) == 3 {
			opts.Context = agent.SpawnContext(args[2]) // fresh or inherit
		}
		child, input, err := c.Spawn(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		se.inputs[child] = append(se.inputs[child], input)
		return []storage.ID{child}, "", se.know(ctx, child) // §9.1: spawn returns the child
	}
	return nil, "", fmt.Errorf("op %q is not one a data scenario may use", op)
}

// listen logs one event of a watch action, grouped by the commit it
// belongs to. Previews (task_output) are left out: they follow the
// stream's chunking, which is an implementation's own.
func (w *watchLog) listen(ev core.ConversationEvent) {
	if ev.Type == core.EventTaskOutput {
		return
	}
	if len(w.commits) == 0 || ev.ReadAt != w.readAt {
		w.commits = append(w.commits, nil)
		w.readAt = ev.ReadAt
	}
	s := ev.Type
	switch {
	case ev.Entry != nil:
		s += " " + strconv.FormatInt(int64(ev.Entry.ID), 10)
	case ev.Task != nil:
		s += " " + strconv.FormatInt(int64(ev.Task.ID), 10)
	}
	last := len(w.commits) - 1
	w.commits[last] = append(w.commits[last], s)
}

// survivor is the session's storage across a reopen: what a process keeps
// on disk, so closing one harness leaves it for the next (memory storage is
// the model the durable backends are held to).
type survivor struct{ storage.Storage }

func (survivor) Close(context.Context) error { return nil }

// hostHead is the entry action: a host commit of a notice entry that starts
// the context at head (§2.1), which the line holds to the head rules.
func hostHead(ctx context.Context, c *core.Conversation, head storage.ID) (storage.ID, error) {
	var id storage.ID
	_, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
		id = tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "host head"}, Head: head})
		return nil
	})
	return id, err
}

// HostEdit is the edit action's entry: a notice whose context edit omits,
// or replaces (action "replace") with a user message written at now, the
// nth user entry among entries (modulo how many; user entries, so that no
// tool exchange is cut). False when entries hold no user entry.
func HostEdit(entries []*storage.Entry, n int, action string, now int64) (core.EntryDraft, bool) {
	var users []storage.ID
	for _, e := range entries {
		if e.Kind == core.UserKind.Kind() {
			users = append(users, e.ID)
		}
	}
	if len(users) == 0 {
		return core.EntryDraft{}, false
	}
	ed := storage.ContextEdit{Target: users[script.Nth(n, len(users))], Action: storage.EditOmit}
	if action == "replace" {
		ed.Action, ed.Messages = storage.EditReplace, []ai.Message{ai.UserText("edited", now)}
	}
	return core.EntryDraft{Data: map[string]string{"text": "host edit"}, Edits: []storage.ContextEdit{ed}}, true
}

// driveFor drives c until it is idle or bound of virtual time has passed,
// whichever is first: "idle", or "busy" with its tasks still running.
func (se *session) driveFor(ctx context.Context, c *agent.Conversation, bound time.Duration) (string, error) {
	rt := se.s.Runtime()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := rt.NewEvent("drive-for bound")
	rt.Go(dctx, "drive-for bound", func(ctx context.Context) {
		if rt.Sleep(ctx, bound) == nil {
			timedOut.Set()
			cancel()
		}
	})
	r, err := c.Drive(dctx)
	if err != nil && timedOut.IsSet() && ctx.Err() == nil {
		return "busy", nil
	}
	return string(r), err
}

// waitJobBound is how long wait-job waits for a job in virtual time.
const waitJobBound = time.Minute

// waitJob drives job's conversation, then waits until the job has ended
// or, for a schedule, finished one more run than when the wait began:
// its status then, or "running" when waitJobBound passed first.
func (se *session) waitJob(ctx context.Context, job *storage.Task) (string, error) {
	runs := func(t *storage.Task) int {
		var st agent.JobState
		_ = json.Unmarshal(t.State, &st)
		return st.Runs
	}
	before := runs(job)
	c, err := se.h.Conversation(ctx, job.ConversationID)
	if err != nil {
		return "", err
	}
	if _, err := c.Drive(ctx); err != nil {
		return "", err
	}
	rt := se.s.Runtime()
	until := rt.Now().Add(waitJobBound)
	for {
		t, ok, err := se.h.GetTask(ctx, job.ID)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return "", fmt.Errorf("job %d is gone", job.ID)
		case !t.Live() || runs(t) > before:
			return t.Status, nil
		case !rt.Now().Before(until):
			return t.Status, nil
		}
		if err := rt.Sleep(ctx, time.Millisecond); err != nil {
			return "", err
		}
	}
}

// HostState performs a value or list line (script's TARGET NS[/KEY] POLICY
// OP [ARG]) on the state it names in scope: the harness for the session
// target, the target conversation's handle otherwise, which binds the
// address to itself. A list's remove takes its nth visible element
// (script.Nth: modulo how many, a negative n from the end) and reports
// "no element" on an empty list; every other
// write is one commit, refused as the harness refuses it.
func HostState(ctx context.Context, scope core.StateScope, op string, args []string) (string, error) {
	addr := namedAddress(args[1], args[2] == "rewind")
	if args[0] == "session" {
		addr.Scope = storage.SessionScope()
	}
	if op == "value" {
		v := core.ValueOf(scope, storage.Value[json.RawMessage]{Address: addr})
		if args[3] == "delete" {
			return "", v.Delete(ctx)
		}
		return "", v.Set(ctx, json.RawMessage(args[4]))
	}
	l := core.ListOf(scope, storage.List[json.RawMessage]{Address: addr})
	switch args[3] {
	case "append":
		_, err := l.Append(ctx, json.RawMessage(args[4]))
		return "", err
	case "clear":
		return "", l.Clear(ctx)
	}
	elems, err := l.All(ctx)
	if err != nil || len(elems) == 0 {
		return "no element", err
	}
	n, _ := strconv.Atoi(args[4])
	return "", l.Remove(ctx, elems[script.Nth(n, len(elems))].ID)
}

// CarriedAddresses are the unbound conversation addresses of a fork
// line's carried values (script.ForkOf, which checked them).
func CarriedAddresses(carry []script.Carried) []storage.Address {
	var out []storage.Address
	for _, c := range carry {
		out = append(out, namedAddress(c.Name, c.Rewind))
	}
	return out
}

// namedAddress is the unbound conversation address a program names NS or
// NS/KEY.
func namedAddress(name string, rewind bool) storage.Address {
	ns, key, _ := strings.Cut(name, "/")
	return storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation}, Namespace: ns, Key: key, Rewind: rewind}
}

// JobSpec is the spec a job line's arguments (script.JobOf, which checked
// them) start at now.
func JobSpec(args []string, now time.Time) agent.JobSpec {
	j, _ := script.JobOf(script.Line{Op: "job", Args: args})
	spec := agent.JobSpec{Cmd: j.Cmd, Every: j.Every, CatchUp: j.CatchUp, RerunSafe: j.Rerun}
	if j.After > 0 {
		spec.NotBefore = now.Add(j.After)
	}
	return spec
}
