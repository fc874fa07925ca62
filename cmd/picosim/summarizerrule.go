package main

import (
	"encoding/json"
	"fmt"
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
	cx, ok := o.transcripts.derive(conv, st.At)
	if !ok || len(cx) == 0 {
		return
	}
	headFirst := false
	if e := o.transcripts.entry(conv, cx[0].ID); e != nil && e.IsHead() {
		headFirst = true
	}
	n := -1
	for i, ce := range cx {
		if ce.ID == st.Through && (!headFirst || i > 0) {
			n = i + 1
			break
		}
	}
	if n < 0 {
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
	o.summaries[w.ID] = expectedSummary{task: w.ID, conv: conv, at: st.At, through: st.Through, messages: want, instructions: st.Instructions}
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
	case want.instructions != "" && !strings.Contains(ms[len(ms)-1].Content.TextOf(), want.instructions):
		return fmt.Sprintf("its request leaves out the instructions %q", want.instructions)
	}
	return ""
}
