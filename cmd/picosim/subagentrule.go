package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// ruleSubagent: the subagent tool answers for the child it names (§8.5).
// run and spawn name the child their own call created and the input of its
// prompt; send names the input its own commit gave the child, queued or
// running as that commit left it (or, for a replay that found the input
// already given, as the input stands when it settles); wait names
// the newest input the child was given by a call before the wait was made,
// or a newer one; run's and wait's answer to an input that ended done is
// the text of the entry that ended it; status lists the child's newest
// entries as they stood when it read them. run and spawn make their child
// once, and are refused for depth exactly when their conversation is
// agent.SubagentDepthMax owned conversations below an independent one.
const ruleSubagent oracleRule = "subagent-answers-for-its-child"

// subagentAsk is one call of the subagent tool: its command, the child it
// names (send, status, wait, stop) and the commit that made it.
type subagentAsk struct {
	command string
	child   storage.ID
	made    storage.ID
}

// givenInput is an input a subagent call gave its child: at spawn, its
// prompt; at send, the text.
type givenInput struct {
	input, seq, by storage.ID
	status         agent.InputStatus // the result the giving commit wrote: queued, or running when placed at once
}

// subagentWatch is what the rule follows: the calls, the inputs they gave
// each child, and every input that ended done.
type subagentWatch struct {
	calls map[storage.ID]subagentAsk
	given map[storage.ID][]givenInput
	// uncertain are the children that lived through a restart: a commit
	// the oracle missed (an uncertain one before it) may have given them
	// an input it does not know.
	uncertain map[storage.ID]bool
	// status is the latest status of each input result address written
	// so far, done the results of those that ended done.
	status map[string]agent.InputStatus
	done   map[string]agent.InputResult
}

func newSubagentWatch() subagentWatch {
	return subagentWatch{calls: map[storage.ID]subagentAsk{}, given: map[storage.ID][]givenInput{},
		uncertain: map[storage.ID]bool{}, status: map[string]agent.InputStatus{}, done: map[string]agent.InputResult{}}
}

// subagentMade records a call of the subagent tool, made at seq.
func (o *oracle) subagentMade(task storage.ID, call ai.Block, seq storage.ID) {
	var args struct {
		Command string     `json:"command"`
		ID      storage.ID `json:"id"`
	}
	if call.Name != agent.SubagentToolName || json.Unmarshal(call.Arguments, &args) != nil {
		return
	}
	o.subagents.calls[task] = subagentAsk{command: args.Command, child: args.ID, made: seq}
}

// subagentInput records an input result written at seq: the first result
// of an input that a subagent call's commit writes into another
// conversation is an input the call gave its child.
func (o *oracle) subagentInput(inv core.Invocation, byTask bool, addr storage.Address, res agent.InputResult, seq storage.ID) {
	key := addr.StateKey()
	_, seen := o.subagents.status[key]
	first := !seen
	o.subagents.status[key] = res.Status
	if res.Status == agent.InputDone {
		o.subagents.done[key] = res
	}
	input, err := strconv.ParseInt(addr.Key, 10, 64)
	if !first || err != nil || !byTask || o.tools[inv.Task] != agent.SubagentToolName || addr.Scope.ID == o.convs[inv.Task] {
		return
	}
	child := addr.Scope.ID
	o.subagents.given[child] = append(o.subagents.given[child], givenInput{input: storage.ID(input), seq: seq, by: inv.Task, status: res.Status})
}

// subagentRestarted marks every child known so far uncertain.
func (o *oracle) subagentRestarted() {
	for _, c := range o.created {
		if o.owners[c] != 0 {
			o.subagents.uncertain[c] = true
		}
	}
}

// subagentSettled holds the settlement w of a subagent call, at seq, to the
// rule.
func (o *oracle) subagentSettled(w storage.Write, by string, seq storage.ID) error {
	call, ok := o.subagents.calls[w.ID]
	if !ok || w.Status != "done" {
		return nil
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
		return nil
	}
	if st.Output.IsError {
		return o.subagentRefused(call, w, st.Output, by, seq)
	}
	if depth := o.depthOf(o.convs[w.ID]); (call.command == "run" || call.command == "spawn") && depth >= agent.SubagentDepthMax {
		return o.fail(broke(ruleSubagent, "%s settled subagent %s call %d at %d done, though its conversation %d is %d deep, at the bound %d",
			by, call.command, w.ID, seq, o.convs[w.ID], depth, agent.SubagentDepthMax))
	}
	var details subagentReport
	text := outputText(st.Output)
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleSubagent, "%s settled subagent %s call %d at %d with %q: %s", by, call.command, w.ID, seq, text, fmt.Sprintf(format, args...)))
	}
	if err := json.Unmarshal(st.Output.Details, &details); err != nil || details.Subagent == nil {
		return fail("no subagent details (%s)", st.Output.Details)
	}
	d := details.Subagent
	child := call.child
	if call.command == "run" || call.command == "spawn" {
		c, made := newestOf(o.created, func(c storage.ID) bool { return o.owners[c] == w.ID })
		if !made {
			return nil // created by a commit the oracle missed
		}
		child = c
	}
	if d.ID != child {
		return fail("it names subagent %d, not %d", d.ID, child)
	}
	given := o.subagents.given[child]
	switch call.command {
	case "run", "spawn":
		if len(given) > 0 && d.Input != given[0].input {
			return fail("it names input %d of subagent %d, not its prompt %d", d.Input, child, given[0].input)
		}
	case "send":
		i := len(given) - 1
		for i >= 0 && given[i].by != w.ID {
			i--
		}
		switch {
		case i < 0:
		case d.Input != given[i].input:
			return fail("it names input %d of subagent %d, not the input %d its commit gave", d.Input, child, given[i].input)
		case d.Status != given[i].status && d.Status != o.subagents.status[agent.InputResultValue.In(child).WithKey(strconv.FormatInt(int64(d.Input), 10)).Address.StateKey()] ||
			!strings.Contains(text, "("+string(d.Status)+")"):
			return fail("it reports input %d of subagent %d %s (%q); its commit gave it %s, and it is not that now", d.Input, child, d.Status, text, given[i].status)
		}
	case "wait":
		newest := storage.ID(0)
		for _, g := range given {
			if g.seq < call.made {
				newest = g.input
			}
		}
		stranger := !o.subagents.uncertain[child] && len(given) > 0 // an input no call gave
		for _, g := range given {
			stranger = stranger && g.input != d.Input
		}
		switch {
		case d.Input < newest:
			return fail("it waited for input %d of subagent %d, older than input %d, given before the call was made", d.Input, child, newest)
		case stranger:
			return fail("it waited for input %d of subagent %d, which no subagent call gave it (%v)", d.Input, child, given)
		}
	case "status":
		return o.subagentStatus(child, call.made, text, fail)
	}
	if (call.command == "run" || call.command == "wait") && d.Status == agent.InputDone {
		return o.subagentAnswer(child, d.Input, text, fail)
	}
	return nil
}

// subagentReport is the details a subagent call's result carries: the
// child, the input and its status.
type subagentReport struct {
	Subagent *struct {
		ID     storage.ID        `json:"id"`
		Input  storage.ID        `json:"input"`
		Status agent.InputStatus `json:"status"`
	} `json:"subagent"`
}

// subagentRefused holds a subagent call that settled as an error, out, to
// the rule: a refusal is the tool's error (a child of another
// conversation, a bad argument, a budget, an interruption, an input that
// did not end done), but the tool may not refuse the caller's own child as
// not its own, nor a wait for one that was given input as having none, nor
// a run or wait whose input ended done, nor a run or spawn for depth
// under the bound.
func (o *oracle) subagentRefused(call subagentAsk, w storage.Write, out *agent.ToolOutputState, by string, seq storage.ID) error {
	text := outputText(out)
	child := call.child
	own := child != 0 && o.owners[child] != 0 && o.convs[o.owners[child]] == o.convs[w.ID] && !o.transcripts.deleted[child]
	var details subagentReport
	_ = json.Unmarshal(out.Details, &details)
	depth := o.depthOf(o.convs[w.ID])
	var problem string
	switch {
	case details.Subagent != nil && details.Subagent.Status == agent.InputDone && (call.command == "run" || call.command == "wait"):
		problem = fmt.Sprintf("input %d of subagent %d ended done, and its answer is the result", details.Subagent.Input, details.Subagent.ID)
	case own && strings.Contains(text, "is not a subagent of this conversation"):
		problem = fmt.Sprintf("subagent %d is a child of a call of conversation %d", child, o.convs[w.ID])
	case own && call.command == "wait" && strings.Contains(text, "has no input to wait for") && len(o.subagents.given[child]) > 0:
		problem = fmt.Sprintf("subagent %d was given input %d", child, o.subagents.given[child][0].input)
	case strings.Contains(text, "nest at most") && depth < agent.SubagentDepthMax:
		problem = fmt.Sprintf("its conversation %d is %d deep, under the bound %d", o.convs[w.ID], depth, agent.SubagentDepthMax)
	}
	if problem == "" {
		return nil
	}
	return o.fail(broke(ruleSubagent, "%s settled subagent %s call %d at %d as a refusal (%q): %s", by, call.command, w.ID, seq, text, problem))
}

// madeOnce holds the creation of conversation c, at seq, to a subagent
// call making its child once: a run or spawn replayed after a restart goes
// on with the child it recorded (§8.5), never a second one.
func (o *oracle) madeOnce(c *storage.Conversation, by string, seq storage.ID) error {
	if c.Owner == 0 || o.tools[c.Owner] != agent.SubagentToolName {
		return nil
	}
	if first, made := newestOf(o.created, func(x storage.ID) bool { return o.owners[x] == c.Owner }); made {
		return o.fail(broke(ruleSubagent, "%s made conversation %d at %d for subagent call %d, which made its child %d already",
			by, c.ID, seq, c.Owner, first))
	}
	return nil
}

// depthOf is how many owned conversations conv is below an independent
// one, as the batches made them (up to one past the bound).
func (o *oracle) depthOf(conv storage.ID) int {
	depth := 0
	for o.owners[conv] != 0 && depth <= agent.SubagentDepthMax {
		conv = o.convs[o.owners[conv]]
		depth++
	}
	return depth
}

// subagentAnswer checks that text is the answer that ended input of child.
func (o *oracle) subagentAnswer(child, input storage.ID, text string, fail func(string, ...any) error) error {
	res, ok := o.subagents.done[agent.InputResultValue.In(child).WithKey(input.String()).StateKey()]
	if !ok {
		if o.subagents.uncertain[child] {
			return nil // its result may be a commit the oracle missed
		}
		return fail("input %d of subagent %d has not ended done", input, child)
	}
	for _, e := range o.transcripts.own[child] {
		if e.ID != res.ResultEntryID {
			continue
		}
		if len(e.Model) == 0 {
			return fail("the entry that ended input %d of subagent %d, %d, has no message", input, child, e.ID)
		}
		if want := e.Model[0].Content.TextOf(); text != want {
			return fail("the answer that ended input %d of subagent %d, entry %d, says %q", input, child, e.ID, want)
		}
		return nil
	}
	return nil
}

// subagentStatus checks that text is a status of child, read after the
// call was made: its state, a line for each live task when it works, and
// then, as of some entry k of it no older than the call, the newest
// subagentStatusTail entries through k, the system ones left out.
func (o *oracle) subagentStatus(child, made storage.ID, text string, fail func(string, ...any) error) error {
	entries := o.transcripts.own[child]
	before := 0 // the entries committed before the call was made
	for before < len(entries) && entries[before].ID < made {
		before++
	}
	for k := len(entries); k >= before; k-- {
		listed := statusEntries(entries[max(0, k-subagentStatusTail):k])
		head, ok := strings.CutSuffix(text, listed)
		if !ok {
			continue
		}
		lines := strings.Split(head, "\n")
		idle := fmt.Sprintf("Subagent %d is idle.", child)
		working := fmt.Sprintf("Subagent %d is working.", child)
		live := 0
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "live: ") {
				live++
			}
		}
		if live == len(lines)-1 && (lines[0] == idle && live == 0 || lines[0] == working && live > 0) {
			return nil
		}
	}
	return fail("no prefix of subagent %d's %d entries from the %d before the call has that status", child, len(entries), before)
}

// subagentStatusTail is how many of a child's newest entries status shows.
const subagentStatusTail = 5

// statusEntries is how a status lists entries.
func statusEntries(entries []*storage.Entry) string {
	var b strings.Builder
	for _, e := range entries {
		if len(e.Model) == 0 || e.Kind == core.SystemKind.Kind() {
			continue
		}
		m := e.Model[0]
		text := m.Content.TextOf()
		for _, call := range m.ToolCalls() {
			text += " [calls " + call.Name + "]"
		}
		fmt.Fprintf(&b, "\n%s %d: %s", m.Role, e.ID, text)
	}
	return b.String()
}

// outputText is a tool output's first text block.
func outputText(out *agent.ToolOutputState) string {
	for _, c := range out.Content {
		if c.Type == ai.BlockText {
			return c.Text
		}
	}
	return ""
}

// ruleSpawnOptions: a host spawn is refused for its options exactly when
// they are bad (§8.5): a context other than fresh or inherit is a
// *agent.SpawnError naming the parent; options a program draws otherwise
// are good, and a SpawnError for them is the harness refusing what it
// must take.
const ruleSpawnOptions oracleRule = "a-spawn-is-refused-only-for-bad-options"

// spawnRefusal holds a host spawn from parent with context mode, which
// returned err, to the rule.
func (o *oracle) spawnRefusal(parent storage.ID, mode agent.SpawnContext, err error) error {
	bad := mode != "" && mode != agent.SpawnFresh && mode != agent.SpawnInherit
	var se *agent.SpawnError
	refused := errors.As(err, &se)
	switch {
	case bad && (!refused || se.ConversationID != parent):
		return o.fail(broke(ruleSpawnOptions, "the host's spawn from conversation %d with context %q returned %v; want a SpawnError naming the conversation", parent, mode, err))
	case !bad && refused:
		return o.fail(broke(ruleSpawnOptions, "the host's spawn from conversation %d with context %q was refused: %v", parent, mode, err))
	}
	return nil
}
