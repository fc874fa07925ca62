package main

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// ruleThreshold: a generation's first attempt, in a conversation with a
// collapse threshold, collapses its context first exactly when the
// context's estimate is over the threshold's share of the model's window
// (§8.2), unless another collapse of the conversation is live or the
// context has no cut (keepRecentAt's keep, keeprule.go). The estimate is
// derived here on its own: a quarter of the characters (text, thinking, a
// call's name and arguments; an image counts 4,800), rounded up, of every
// message but an assistant's that failed or was aborted; from the newest
// answer after the head whose usage the provider reported, that usage
// plus the quarter of the characters after it. Both happen in the commit
// that starts the attempt, over the context before that commit.
const ruleThreshold oracleRule = "collapse-at-the-threshold"

// imageChars is what the rule's estimate counts for an image.
const imageChars = 4800

// estimate is the rule's estimate of conv's context at pos; false when
// the context rule cannot derive it.
func (t *transcripts) estimate(conv, pos storage.ID) (int64, bool) {
	cx, ok := t.derive(conv, pos)
	if !ok {
		return 0, false
	}
	var head storage.ID
	if len(cx) > 0 {
		e := t.entry(conv, cx[0].ID)
		if e == nil {
			return 0, false
		}
		if e.IsHead() {
			head = e.ID
		}
	}
	answer := func(m ai.Message) bool {
		return m.Role == ai.RoleAssistant && m.StopReason != ai.StopError && m.StopReason != ai.StopAborted
	}
	var base int64
	from := 0
	for i := len(cx) - 1; i >= 0 && from == 0; i-- {
		msgs := cx[i].Messages
		if cx[i].ID < head || len(msgs) == 0 || !answer(msgs[len(msgs)-1]) {
			continue
		}
		if u := msgs[len(msgs)-1].Usage; u != nil {
			total := u.TotalTokens
			if total <= 0 {
				total = u.Input + u.Output + u.CacheRead + u.CacheWrite
			}
			if total > 0 {
				base, from = total, i+1
			}
		}
	}
	var chars int64
	for _, ce := range cx[from:] {
		for _, m := range ce.Messages {
			if m.Role == ai.RoleAssistant && !answer(m) {
				continue
			}
			for _, b := range m.Content.Blocks {
				switch b.Type {
				case ai.BlockImage:
					chars += imageChars
				case ai.BlockToolCall:
					chars += int64(len(b.Name) + len(b.Arguments))
				default:
					chars += int64(len(b.Text) + len(b.Thinking))
				}
			}
		}
	}
	return base + (chars+3)/4, true
}

// thresholdBudget is the tokens conv's context may estimate at pos before
// a generation collapses it first; false when it has no threshold or the
// rule does not know the window.
func (o *oracle) thresholdBudget(conv, pos storage.ID) (float64, bool) {
	var threshold float64
	if !o.settingAt(agent.CollapseThresholdValue.Namespace, conv, pos, &threshold) || threshold <= 0 || o.window <= 0 {
		return 0, false
	}
	return threshold * float64(o.window), true
}

// firstAttemptMade notes a generation created pending and not to run
// after a collapse: one whose first attempt the rule holds.
func (o *oracle) firstAttemptMade(t *storage.Task) {
	var st struct {
		AfterCollapse storage.ID `json:"afterCollapse"`
	}
	if t.Kind == agent.GenerationKindName && t.Status == "pending" && json.Unmarshal(t.State, &st) == nil && st.AfterCollapse == 0 {
		o.firstAttempts[t.ID] = true
	}
}

// thresholdStreaming holds a generation's first attempt start (w, in a
// commit at r by its own invocation) to the rule: the context it did not
// collapse is within the threshold, or could not be collapsed.
func (o *oracle) thresholdStreaming(inv core.Invocation, ok bool, w storage.Write, r storage.Range, by string) error {
	first := o.firstAttempts[w.ID]
	delete(o.firstAttempts, w.ID)
	if !first || !ok || inv.Task != w.ID || w.Status != "streaming" {
		return nil
	}
	conv, pos := o.convs[w.ID], r.First-1
	budget, has := o.thresholdBudget(conv, pos)
	if !has {
		return nil
	}
	est, known := o.transcripts.estimate(conv, pos)
	if !known || float64(est) <= budget {
		return nil
	}
	for t, kind := range o.kinds {
		if kind == agent.CollapseKindName && o.convs[t] == conv && !o.settled[t] {
			return nil // busy: the generation waits on no collapse and goes on
		}
	}
	keep, known := o.keepRecentAt(agent.CollapseThreshold, conv, pos)
	if !known {
		return nil
	}
	if _, _, cuts, known := o.cutAt(conv, pos, keep); !known || !cuts {
		return nil
	}
	return o.fail(broke(ruleThreshold, "%s started generation %d's first attempt at %d with conversation %d's context estimated at %d tokens, over its threshold's %.0f, without collapsing it first",
		by, w.ID, r.Last, conv, est, budget))
}

// thresholdCollapse holds a threshold collapse's creation (w, at seq, in a
// commit that read the state at pos) to the rule: its context was over the
// threshold.
func (o *oracle) thresholdCollapse(w storage.Write, by string, seq, pos storage.ID) error {
	var st agent.CollapseState
	if w.Task == nil || w.Task.Kind != agent.CollapseKindName || json.Unmarshal(w.Task.State, &st) != nil || st.Reason != agent.CollapseThreshold {
		return nil
	}
	conv := w.Task.ConversationID
	budget, has := o.thresholdBudget(conv, pos)
	est, known := o.transcripts.estimate(conv, pos)
	if !known || o.window <= 0 {
		return nil
	}
	if !has || float64(est) <= budget {
		return o.fail(broke(ruleThreshold, "%s created threshold collapse %d of conversation %d at %d with its context estimated at %d tokens, within its threshold's %.0f (threshold set: %v)",
			by, w.Task.ID, conv, seq, est, budget, has))
	}
	return nil
}

// thresholdSeeds is how often a drawn program gives the root a collapse
// threshold from its start (every fifth seed from 3, not the golden
// traces' seed 1).
const thresholdSeeds = 5

// drawThresholds has the program of every thresholdSeeds-th seed begin,
// from a generator of its own, by setting the root's collapse threshold to
// 700 to 1,800 tokens of the faux window, about what a few turns' requests
// cost with the tools they offer (the usage the estimate starts from), so
// that the root's turns cross it again and again (each collapse brings the
// context back under it) and the rule weighs many first attempts near it, and up to three turns of tool
// calls first, whose results (one of 90 to 330 characters) the estimate
// must count; half the program's other answers with calls call for such a
// result too.
func drawThresholds(p *program, seed uint64) {
	if seed%thresholdSeeds != 3 {
		return
	}
	rng := seededRNG(seed, "threshold")
	tokens := 700 + rng.IntN(1101)
	threshold := strconv.FormatFloat(float64(tokens)/float64(faux.DefaultContextWindow), 'f', -1, 64)
	lines := []progLine{{op: "value", args: []string{"c0", agent.CollapseThresholdValue.Namespace, "rewind", "set", threshold}}}
	for range rng.IntN(4) {
		lines = append([]progLine{{op: "respond", args: []string{"calls", "a,work:" + strings.Repeat("step", 20+rng.IntN(60)) + ",b"}}}, lines...)
		lines = append(lines, progLine{op: "accept", args: []string{"c0", "use the tools"}}, progLine{op: "drive", args: []string{"c0"}})
	}
	for i, l := range p.lines {
		if l.op == "respond" && l.args[0] == "calls" && rng.IntN(2) == 0 {
			p.lines[i].args = []string{"calls", l.args[1] + ",work:" + strings.Repeat("step", 20+rng.IntN(60))}
		}
	}
	p.lines = append(lines, p.lines...)
}
