package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The summarizer rule: what a collapse sends its summarizer (§8.4) is the
// prefix it summarizes, derived here on its own: the conversation's
// context at the sequence the collapse captured it (the context rule,
// contextrule.go), cut after the last entry it summarizes, projected as a
// generation's request is (requestrule.go), its system messages left out
// (the conversation's instructions are not the summarizer's). Around it
// stand one system message (the summarizer's own prompt) first and one
// user message (what to write) last, which carries the collapse's
// instructions when it has any; no tools are offered.
//
// The prefix is noted at each commit that starts a summarizer attempt
// (the collapse's patch to summarizing) and matched against the next
// request without a generation's session id; a collapse that settles
// first drops its note.

// ruleSummarizer: a summarizer's request is its collapse's prefix.
const ruleSummarizer oracleRule = "summarizer-sees-the-prefix"

// expectedSummary is what the rule projects for a collapse's attempt.
type expectedSummary struct {
	task, conv   storage.ID
	at, through  storage.ID
	messages     []ai.Message
	instructions string
	// options are the instructions the request may carry: the collapse's
	// own, or the last an instruct hook that may have run gave, as the
	// request goes out (hookrule.go); optionsKnown false when the rule
	// cannot weigh them.
	options      []string
	optionsKnown bool
	// model is the model the collapse's configuration resolves to, and
	// thinking its thinking level; modelKnown false when the rule does
	// not know the models served (modelrule.go).
	model      ai.Model
	thinking   string
	modelKnown bool
}

// summarizerStarts notes, at a collapse's patch to summarizing, the
// request the rule projects for its attempt.
func (o *oracle) summarizerStarts(w storage.Write) {
	if w.Status != "summarizing" {
		return
	}
	delete(o.summaries, w.ID)
	var st agent.CollapseState
	if json.Unmarshal(w.State, &st) != nil {
		return
	}
	conv := o.convs[w.ID]
	cx, n, ok := o.transcripts.prefix(conv, st.At, st.Through)
	if !ok {
		// The collapse will fail to find its prefix: no request follows.
		return
	}
	msgs, _, ok := o.transcripts.project(conv, cx[:n])
	if !ok {
		return
	}
	var want []ai.Message
	for _, m := range msgs {
		if m.Role != ai.RoleSystem {
			want = append(want, m)
		}
	}
	model, served := servedModel(o.models, st.Model)
	if o.models != nil && !served {
		// Nobody serves the collapse's model: it fails before asking, and
		// a request that follows matches no projection.
		return
	}
	o.summaries[w.ID] = expectedSummary{task: w.ID, conv: conv, at: st.At, through: st.Through, messages: want, instructions: st.Instructions,
		model: model, thinking: st.Thinking, modelKnown: o.models != nil}
}

// prefix is conversation conv's context at at, and the length of its
// prefix through entry through (a head first in it is never that entry);
// false when the rule cannot say or through is not in it.
func (t *transcripts) prefix(conv, at, through storage.ID) ([]ruleEntry, int, bool) {
	cx, ok := t.derive(conv, at)
	if !ok || len(cx) == 0 {
		return nil, 0, false
	}
	headFirst := false
	if e := t.entry(conv, cx[0].ID); e != nil && e.IsHead() {
		headFirst = true
	}
	for i, ce := range cx {
		if ce.ID == through && (!headFirst || i > 0) {
			return cx, i + 1, true
		}
	}
	return nil, 0, false
}

// ruleSummaryBoundary: a published summary summarizes its collapse's
// prefix and keeps what follows it: its head is the first entry after the
// prefix in the context the collapse captured, which the collapse's state
// names as firstRetained, and the summary records the prefix's last entry
// as summarizedThrough (§8.4).
const ruleSummaryBoundary oracleRule = "summary-keeps-what-follows-the-prefix"

// summaryBoundary holds a collapse's settlement that publishes a summary
// (in batch b) to the rule.
func (o *oracle) summaryBoundary(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.CollapseKindName {
		return nil
	}
	var st agent.CollapseState
	if json.Unmarshal(w.State, &st) != nil || st.Summary == 0 {
		return nil
	}
	conv := o.convs[w.ID]
	if cx, n, ok := o.transcripts.prefix(conv, st.At, st.Through); ok && n < len(cx) && cx[n].ID != st.FirstRetained {
		return o.fail(broke(ruleSummaryBoundary, "%s settled collapse %d at %d keeping from entry %d; its context at %d goes on after entry %d with entry %d",
			by, w.ID, seq, st.FirstRetained, st.At, st.Through, cx[n].ID))
	}
	for _, x := range b.Writes {
		if x.Type != storage.WriteEntry || x.Entry == nil || x.Entry.ID != st.Summary {
			continue
		}
		var data struct {
			SummarizedThrough storage.ID `json:"summarizedThrough"`
		}
		_ = json.Unmarshal(x.Entry.Data, &data)
		if x.Entry.Head != st.FirstRetained || data.SummarizedThrough != st.Through {
			return o.fail(broke(ruleSummaryBoundary, "%s published collapse %d's summary %d with head %d through %d; the collapse summarized through %d and keeps from %d",
				by, w.ID, x.Entry.ID, x.Entry.Head, data.SummarizedThrough, st.Through, st.FirstRetained))
		}
		return nil
	}
	return o.fail(broke(ruleSummaryBoundary, "%s settled collapse %d at %d naming summary %d, which its batch does not write", by, w.ID, seq, st.Summary))
}

// summarizerSettled drops a settled collapse's note.
func (o *oracle) summarizerSettled(w storage.Write) { delete(o.summaries, w.ID) }

// summarizerRequest holds a request without a generation's session id,
// which only a summarizer sends, to a noted collapse's prefix: it must be
// one of them, and is that one's.
func (o *oracle) summarizerRequest(req ai.Request) error {
	if strings.HasPrefix(req.SessionID, "conversation-") || len(o.summaries) == 0 {
		return nil
	}
	var nearest *expectedSummary
	for id, want := range o.summaries {
		want.options, want.optionsKnown = o.collapseInstructions(want.task, want.instructions)
		if summarizerProblem(req, want) == "" {
			delete(o.summaries, id)
			return nil
		}
		if nearest == nil || want.task < nearest.task { // the same one on every replay, whatever the map's order
			nearest = &want
		}
	}
	return o.fail(broke(ruleSummarizer, "a summarizer was sent %s; no collapse's prefix is that (collapse %d of conversation %d, its context at %d through entry %d: %s)",
		describeMessages(req.Messages), nearest.task, nearest.conv, nearest.at, nearest.through, summarizerProblem(req, *nearest)))
}

// summarizerProblem says how req differs from the request want projects;
// "" when it does not.
func summarizerProblem(req ai.Request, want expectedSummary) string {
	ms := req.Messages
	switch {
	case len(req.Tools) > 0:
		return fmt.Sprintf("it offers the tools %v", toolNames(req.Tools))
	case len(ms) < 2 || ms[0].Role != ai.RoleSystem || ms[len(ms)-1].Role != ai.RoleUser:
		return "it is not a system prompt, the prefix and a user request"
	case !sameOrEmpty(ms[1:len(ms)-1], want.messages):
		return "the prefix projects to " + describeMessages(want.messages)
	case want.modelKnown && (req.Model.ID != want.model.ID || req.Model.Provider != want.model.Provider || req.ThinkingLevel != want.thinking):
		return fmt.Sprintf("it asks model %s/%s thinking %q; the collapse's configuration names %s/%s thinking %q",
			req.Model.Provider, req.Model.ID, req.ThinkingLevel, want.model.Provider, want.model.ID, want.thinking)
	case want.optionsKnown && len(want.options) == 0:
		return "a hook that surely ran declined the collapse or supplied its summary"
	case want.optionsKnown && !slices.ContainsFunc(want.options, func(s string) bool { return strings.Contains(ms[len(ms)-1].Content.TextOf(), s) }):
		return fmt.Sprintf("its request carries none of the instructions %q", want.options)
	}
	return ""
}

// summarizerFailureSeeds is how often a drawn program has a collapse's
// summarizer answer with a failure (every eleventh seed from 7, not the
// golden traces' seed 1).
const summarizerFailureSeeds = 11

// drawSummarizerFailures has such a program begin, from a generator of
// its own, with two turns of the root and then a collapse of it whose
// summarizer is answered with a failure, a rate limit or a cut answer:
// a rate limit waits to retry, the others settle the collapse failed
// (a-retry-follows-a-rate-limit), which random programs line up only when
// a failing answer happens to reach a summarizer.
func drawSummarizerFailures(p *program, seed uint64) {
	if seed%summarizerFailureSeeds != 7 {
		return
	}
	rng := seededRNG(seed, "summarizer failures")
	keep := rng.IntN(20)
	answer := progLine{op: "respond", args: []string{[]string{"fail", "fail", "rate-limited", "aborted"}[rng.IntN(4)]}}
	p.lines = append(collapseAfterTwoTurns(keep, answer), p.lines...)
}

// collapseAfterTwoTurns is two turns of the root, then a collapse of it,
// keeping keep recent tokens, whose summarizer gets answer. Its one
// collapse line is at collapseLine.
func collapseAfterTwoTurns(keep int, answer progLine) []progLine {
	return []progLine{
		{op: "respond", args: []string{"text", "done"}}, {op: "respond", args: []string{"text", "done again"}},
		{op: "accept", args: []string{"c0", "first"}}, {op: "drive", args: []string{"c0"}},
		{op: "accept", args: []string{"c0", "second"}}, {op: "drive", args: []string{"c0"}},
		// Keep only the newest turn, so that there is something to sum up.
		{op: "value", args: []string{"c0", agent.CollapseKeepRecentValue.Namespace, "rewind", "set", strconv.Itoa(keep)}},
		answer,
		{op: "collapse", args: []string{"c0"}}, {op: "drive", args: []string{"c0"}},
	}
}

// collapseLine is the index of collapseAfterTwoTurns' collapse line.
const collapseLine = 8

// drawPairedCollapses has half the programs whose model names each two
// calls of an answer by one id (pairedIDSeeds), from a generator of their
// own, begin with a collapse of the root after two turns, the first of
// which calls two tools under one id: the collapse's cut must count that
// id's one result as the answer's whole, not wait for a second.
func drawPairedCollapses(p *program, seed uint64) {
	if seed%reusedIDSeeds != 0 || seed/reusedIDSeeds%pairedIDSeeds != 2 || seededRNG(seed, "paired collapses").IntN(2) != 0 {
		return
	}
	block := collapseAfterTwoTurns(1, progLine{op: "respond", args: []string{"text", "summed up"}})
	block = slices.Insert(block, 0, progLine{op: "respond", args: []string{"calls", "a,b"}})
	p.lines = append(block, p.lines...)
}
