package main

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The inherit rule (§8.5): a child spawned with context "inherit" starts
// with its parent's context at the last complete exchange before the
// launching one; a fresh child with nothing of it. Derived here on its
// own, over the transcripts the oracle keeps, at the commit that makes the
// child:
//   - the parent's context (contextrule.go) through the commit before;
//   - for a subagent call, cut before the assistant entry that made the
//     call (the launching exchange and all after it);
//   - cut again before the newest answer (an assistant entry; a head's
//     messages were projected as a request and are complete) when its
//     calls do not all have a result in what is left (the exchange in
//     flight, not complete); an
//     older answer is complete, or was cut by a fork, which a request
//     repairs (§3.2); an answer that ended in an error or was aborted is no
//     exchange (§2.2: it never makes tool tasks or results) and cuts
//     nothing;
//   - without its system entries, projected as a request is (requestrule.go).
//
// The child must then hold, made in that commit, one handoff head whose
// messages are that projection, or none when it is empty; a fresh child
// holds none.

// ruleInherit: a child inherits its parent's context as §8.5 says.
const ruleInherit oracleRule = "a-child-inherits-the-last-complete-exchange"

// spawnIntent is how a child is being made: from which conversation,
// inheriting or not, and before which entry (0: none).
type spawnIntent struct {
	parent  storage.ID
	inherit bool
	before  storage.ID
}

// hostSpawns notes that the host is spawning a child of parent with
// context (parent 0: it is done).
func (o *oracle) hostSpawns(parent storage.ID, context agent.SpawnContext) {
	o.hostSpawn = spawnIntent{parent: parent, inherit: context == agent.SpawnInherit}
}

// subagentLaunch notes how a subagent call that makes a child would make
// it, from its state when its task is made.
func (o *oracle) subagentLaunch(task storage.ID, st agent.ToolState, conv storage.ID) {
	var args struct {
		Command string `json:"command"`
		Context string `json:"context"`
	}
	if st.Call.Name != agent.SubagentToolName || json.Unmarshal(st.Call.Arguments, &args) != nil || args.Command != "run" && args.Command != "spawn" {
		return
	}
	o.launches[task] = spawnIntent{parent: conv, inherit: args.Context == string(agent.SpawnInherit), before: st.Assistant}
}

// inheritChecked holds the children batch b (committed at r) makes to the
// rule.
func (o *oracle) inheritChecked(inv core.Invocation, byInv bool, b storage.CommitBatch, r storage.Range, by string) error {
	for _, w := range b.Writes {
		if w.Type != storage.WriteCreateConversation || w.Conversation == nil || w.Conversation.Parent != nil {
			continue
		}
		child := w.Conversation.ID
		var how spawnIntent
		switch owner := w.Conversation.Owner; {
		case owner != 0 && byInv && inv.Task == owner:
			var ok bool
			if how, ok = o.launches[owner]; !ok {
				continue
			}
		case owner == 0 && o.hostSpawn.parent != 0:
			how = o.hostSpawn
		default:
			continue
		}
		if err := o.inherited(how, child, b, r, by); err != nil {
			return err
		}
	}
	return nil
}

// inherited holds child, made by b at r as how says, to the rule.
func (o *oracle) inherited(how spawnIntent, child storage.ID, b storage.CommitBatch, r storage.Range, by string) error {
	var handoffs []*storage.Entry
	for _, w := range b.Writes {
		if w.Type == storage.WriteEntry && w.Entry != nil && w.Entry.ConversationID == child && w.Entry.Kind == core.HandoffKind.Kind() {
			handoffs = append(handoffs, w.Entry)
		}
	}
	if !how.inherit {
		if len(handoffs) > 0 {
			return o.fail(broke(ruleInherit, "%s made conversation %d fresh from %d at %d with a handoff entry %d", by, child, how.parent, r.First, handoffs[0].ID))
		}
		return nil
	}
	want, ok := o.inheritance(how, r.First-1)
	if !ok {
		return nil
	}
	switch {
	case len(want) == 0 && len(handoffs) == 0:
		return nil
	case len(want) == 0:
		return o.fail(broke(ruleInherit, "%s made conversation %d inherit %s from %d at %d; conversation %d's context has no complete exchange before it",
			by, child, describeMessages(handoffs[0].Model), how.parent, r.First, how.parent))
	case len(handoffs) != 1:
		return o.fail(broke(ruleInherit, "%s made conversation %d inherit from %d at %d with %d handoff entries; its context through its last complete exchange is %s",
			by, child, how.parent, r.First, len(handoffs), describeMessages(want)))
	case !handoffs[0].IsHead() || !sameOrEmpty(handoffs[0].Model, want):
		return o.fail(broke(ruleInherit, "%s made conversation %d inherit %s (a head: %v) from %d at %d; its context through its last complete exchange is %s",
			by, child, describeMessages(handoffs[0].Model), handoffs[0].IsHead(), how.parent, r.First, describeMessages(want)))
	}
	return nil
}

// inheritance is the rule's inherited context of how's parent as of
// through; false when the context rule cannot say.
func (o *oracle) inheritance(how spawnIntent, through storage.ID) ([]ai.Message, bool) {
	cx, ok := o.transcripts.derive(how.parent, through)
	if !ok {
		return nil, false
	}
	if how.before != 0 {
		if i := slices.IndexFunc(cx, func(ce ruleEntry) bool { return ce.ID == how.before }); i >= 0 {
			cx = cx[:i]
		}
	}
	answered := map[string]bool{}
	answer := func(m ai.Message) bool {
		return m.Role == ai.RoleAssistant && m.StopReason != ai.StopError && m.StopReason != ai.StopAborted
	}
	for i := len(cx) - 1; i >= 0; i-- {
		at := slices.IndexFunc(cx[i].Messages, answer)
		if e := o.transcripts.entry(how.parent, cx[i].ID); at < 0 || e == nil || e.Kind != core.AssistantKind.Kind() {
			continue // a head's messages are complete: a request projected them
		}
		for _, later := range cx[i+1:] { // an earlier result answers an earlier call of the id
			for _, m := range later.Messages {
				if m.Role == ai.RoleToolResult {
					answered[m.ToolCallID] = true
				}
			}
		}
		if slices.ContainsFunc(cx[i].Messages[at].ToolCalls(), func(c ai.Block) bool { return !answered[c.ID] }) {
			cx = cx[:i]
		}
		break
	}
	var kept []ruleEntry
	for _, ce := range cx {
		e := o.transcripts.entry(how.parent, ce.ID)
		if e == nil {
			return nil, false
		}
		if e.Kind != core.SystemKind.Kind() {
			kept = append(kept, ce)
		}
	}
	msgs, _, ok := o.transcripts.project(how.parent, kept)
	return msgs, ok
}

// inheritSeeds is how often a drawn program's children inherit context:
// every fourth seed from 3, not the golden traces' seed 1.
const inheritSeeds = 4

// drawInherits has the program of every inheritSeeds-th seed begin, from
// a generator of its own, with two turns of the root, the first with tool
// calls, the second launching a subagent that inherits (run or spawn,
// alone or beside another call; half the time after the root's first
// input is omitted, the child launching a grandchild that inherits too),
// and half the time a host spawn that inherits after them; and makes
// about half of its other subagent runs and spawns, and host spawns,
// inherit too.
func drawInherits(p *program, seed uint64) {
	if seed%inheritSeeds != 3 {
		return
	}
	rng := seededRNG(seed, "inherits")
	for i, l := range p.lines {
		switch {
		case l.op == "respond" && len(l.args) > 1 && l.args[0] == "calls":
			names := strings.Split(l.args[1], ",")
			for j, n := range names {
				if (n == "subagent:run" || n == "subagent:spawn") && rng.IntN(2) == 0 {
					names[j] = n + ":inherit"
				}
			}
			p.lines[i].args = []string{"calls", strings.Join(names, ",")}
		case l.op == "spawn" && len(l.args) == 2 && rng.IntN(2) == 0:
			p.lines[i].args = append(slices.Clone(l.args), string(agent.SpawnInherit))
		}
	}
	launch := []string{"subagent:run:inherit", "subagent:spawn:inherit"}[rng.IntN(2)]
	if rng.IntN(2) == 0 {
		launch = []string{"a", "work:ok"}[rng.IntN(2)] + "," + launch
	}
	block := []progLine{
		{op: "respond", args: []string{"calls", "a,b"}}, {op: "respond", args: []string{"text", "done"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive", args: []string{"c0"}},
		{op: "respond", args: []string{"calls", launch}},
		{op: "accept", args: []string{"c0", "delegate"}}, {op: "drive", args: []string{"c0"}},
	}
	if rng.IntN(2) == 0 {
		// The root's context begins with an answer (its first input
		// omitted), so the child's inherited head does, and the child
		// launches a grandchild that inherits that head.
		block = slices.Insert(block, 4, progLine{op: "edit", args: []string{"c0", "0", "omit"}})
		block = slices.Insert(block, 6, progLine{op: "respond", args: []string{"calls", "subagent:run:inherit"}})
	}
	if rng.IntN(2) == 0 {
		block = append(block, progLine{op: "spawn", args: []string{"c0", "carry on", string(agent.SpawnInherit)}})
	}
	if rng.IntN(2) == 0 {
		// The host spawns a child that inherits while the root's answer's
		// calls run: that exchange is in flight, and the child must not
		// have it.
		block = append(block, progLine{op: "respond", args: []string{"calls", "work:slow,a"}},
			progLine{op: "accept", args: []string{"c0", "look again"}}, progLine{op: "drive-async", args: []string{"c0"}},
			progLine{op: "sleep", args: []string{[]string{"50", "1000"}[rng.IntN(2)]}},
			progLine{op: "spawn", args: []string{"c0", "peek", string(agent.SpawnInherit)}})
	}
	p.lines = append(block, p.lines...)
	brokenOffInherits(p, seed)
}

// answerHeadSeeds is how often, among the inherit seeds, a drawn program
// begins with a grandchild that inherits a head whose messages begin with
// an answer: every fourth of them (every sixteenth seed from 7), but for
// the limit seeds.
const answerHeadSeeds = 16

// drawAnswerHeads has such a program begin with a turn of the root whose
// answer calls two tools, then omit the root's first input, so that its
// context begins with that answer. A turn of the root then runs a child
// that inherits it, whose handoff head therefore begins with an answer
// with calls, their results inside the head, and the child's own turn
// runs a grandchild that inherits again: that head is complete, not an
// exchange in flight. Every call is a run, which waits, so the five
// answers the block queues are taken in its order. drawInherits lines the
// same up at random, where another block that comes first or a spawn's
// child that takes the wrong answer undoes it. It must be the first block
// of the program but for the shell programs' turns of their own, which
// answer theirs, so is drawn after the other blocks that begin it.
func drawAnswerHeads(p *program, seed uint64) {
	if seed%answerHeadSeeds != 7 || seed%limitSeeds == 0 {
		return // a limited session's budget would refuse its turns, and theirs
	}
	rng := seededRNG(seed, "answer heads")
	first := []string{"a,b", "a,work:ok", "b,a"}[rng.IntN(3)]
	block := []progLine{
		{op: "respond", args: []string{"calls", first}}, {op: "respond", args: []string{"text", "done"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive", args: []string{"c0"}},
		{op: "edit", args: []string{"c0", "0", "omit"}},
		{op: "respond", args: []string{"calls", "subagent:run:inherit"}}, // the root's
		{op: "respond", args: []string{"calls", "subagent:run:inherit"}}, // the child's
		{op: "respond", args: []string{"text", "ok"}},                    // the grandchild's
		{op: "respond", args: []string{"text", "done"}}, {op: "respond", args: []string{"text", "done"}},
		{op: "accept", args: []string{"c0", "delegate"}}, {op: "drive", args: []string{"c0"}},
	}
	p.lines = append(block, p.lines...)
}

// brokenOffInherits, from a generator of its own, gives half the answers
// of an inheriting program that fail or are aborted calls, and half the
// time puts a turn whose answer breaks off after two calls before the one
// that launches the first inheriting child: such an answer is no exchange
// in flight, and the child inherits it and what came after it.
func brokenOffInherits(p *program, seed uint64) {
	rng := seededRNG(seed, "broken-off inherits")
	callSets := []string{"a", "b", "a,b", "work:ok"}
	for i, l := range p.lines {
		if l.op == "respond" && len(l.args) == 1 && (l.args[0] == "fail" || l.args[0] == "aborted") && rng.IntN(2) == 0 {
			p.lines[i].args = []string{l.args[0], callSets[rng.IntN(len(callSets))]}
		}
	}
	launch := slices.IndexFunc(p.lines, func(l progLine) bool {
		return l.op == "respond" && len(l.args) > 1 && l.args[0] == "calls" && strings.Contains(l.args[1], ":inherit")
	})
	if launch >= 0 && rng.IntN(2) == 0 {
		p.lines = slices.Insert(p.lines, launch,
			progLine{op: "respond", args: []string{[]string{"fail", "aborted"}[rng.IntN(2)], "a,b"}},
			progLine{op: "accept", args: []string{"c0", "try"}}, progLine{op: "drive", args: []string{"c0"}})
	}
}

// reusedInheritSeeds is how often, among the seeds whose model numbers its
// calls per answer (reusedIDSeeds), a drawn program has a host spawn
// inherit while an answer that uses its ids again runs: every fourth of
// them (every twelfth seed from 12).
const reusedInheritSeeds = 4

// drawReusedInherits has such a program begin, from a generator of its
// own, with a turn of the root with two calls, a second whose answer calls
// a slow tool and another under the same two ids, and a host spawn that
// inherits while the slow call runs: the ids have results, but before the
// answer in flight, which therefore is not complete and must not be
// inherited. Random programs line this up about once in 1,500 seeds.
func drawReusedInherits(p *program, seed uint64) {
	if seed%reusedIDSeeds != 0 || seed/reusedIDSeeds%reusedInheritSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "reused inherits")
	block := []progLine{
		{op: "respond", args: []string{"calls", "a,b"}}, {op: "respond", args: []string{"text", "done"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive", args: []string{"c0"}},
		{op: "respond", args: []string{"calls", []string{"work:slow,a", "b,work:slow"}[rng.IntN(2)]}},
		{op: "accept", args: []string{"c0", "look again"}}, {op: "drive-async", args: []string{"c0"}},
		{op: "sleep", args: []string{[]string{"50", "1000", "2000"}[rng.IntN(3)]}},
		{op: "spawn", args: []string{"c0", "peek", string(agent.SpawnInherit)}},
	}
	p.lines = append(block, p.lines...)
}

// badSpawnSeeds is how often a drawn program has the host spawn with a
// context mode that is neither fresh nor inherit (every seventh seed from
// 5, not the golden traces' seed 1).
const badSpawnSeeds = 7

// drawBadSpawns has such a program begin with a spawn of the root whose
// context is no mode, and gives half its other spawns one: each must be
// refused with a SpawnError, and only those (ruleSpawnOptions).
func drawBadSpawns(p *program, seed uint64) {
	if seed%badSpawnSeeds != 5 {
		return
	}
	rng := seededRNG(seed, "bad spawns")
	modes := []string{"everything", "Inherit", "none"}
	for i, l := range p.lines {
		if l.op == "spawn" && len(l.args) == 2 && rng.IntN(2) == 0 {
			p.lines[i].args = append(slices.Clone(l.args), modes[rng.IntN(len(modes))])
		}
	}
	p.lines = append([]progLine{{op: "spawn", args: []string{"c0", "look", modes[rng.IntN(len(modes))]}}}, p.lines...)
}
