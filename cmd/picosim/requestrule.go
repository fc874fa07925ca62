package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The request rule: what a generation sends its model is its
// conversation's context (the context rule, contextrule.go, over the
// transcripts the oracle keeps from the batches) projected for a request
// (§3.2, §8.2), derived here on its own:
//   - the newest baseline system entry of the head's epoch (none older
//     than the head counts) goes first, and every system entry before it
//     in the context, or older than the head, is left out;
//   - an assistant message that ended in an error or was aborted is left
//     out, and every tool result where it stands;
//   - after each assistant message come the results of its calls, in call
//     order: a result answers the newest assistant message before it that
//     called its id and has no result for it yet (an id may come back in a
//     later answer), once; a call without one gets an error result saying
//     none was provided;
//   - a result whose call is not there is dropped;
//   - the tools are those the baseline and the system entries after it
//     add, less those they remove, each entry's removals before its
//     additions, a tool added again keeping its place.
//
// The projection is taken at the commit that starts the attempt (the
// generation's patch to streaming, not a deferred answer's fetch), over
// the context through that commit, and the request the provider then
// receives for the conversation must be it, followed by the note of each
// request hook (hooks.go) of a set that may have run, in handler order.

// ruleRequest: a generation's request is its context projected by the
// rule above.
const ruleRequest oracleRule = "request-projects-the-context"

// noResultText is the text of the result a request supplies for a call
// without one.
const noResultText = "No result provided"

// newTranscripts is an empty set of transcripts, for the oracle to fill
// from the batches.
func newTranscripts() *transcripts {
	return &transcripts{convs: map[storage.ID]storage.Conversation{}, own: map[storage.ID][]*storage.Entry{}, deleted: map[storage.ID]bool{}}
}

// record adds a batch's conversations and entries to the transcripts.
func (t *transcripts) record(b storage.CommitBatch) {
	for _, w := range b.Writes {
		switch {
		case w.Type == storage.WriteCreateConversation && w.Conversation != nil:
			t.convs[w.Conversation.ID] = *w.Conversation
		case w.Type == storage.WriteDeleteConversation:
			delete(t.convs, w.ID)
			t.deleted[w.ID] = true
		case w.Type == storage.WriteEntry && w.Entry != nil:
			t.own[w.Entry.ConversationID] = append(t.own[w.Entry.ConversationID], w.Entry)
		}
	}
}

// entry is the entry id of conversation conv's history, nil if none.
func (t *transcripts) entry(conv, id storage.ID) *storage.Entry {
	for c := conv; ; {
		for _, e := range t.own[c] {
			if e.ID == id {
				return e
			}
		}
		rec, ok := t.convs[c]
		if !ok || rec.Parent == nil {
			return nil
		}
		c = rec.Parent.ConversationID
	}
}

// projectRequest is the rule's request of conv's context at through; false
// when the context rule cannot say (a deleted conversation in its history).
func (t *transcripts) projectRequest(conv, through storage.ID) ([]ai.Message, []ai.Tool, bool) {
	cx, ok := t.derive(conv, through)
	if !ok {
		return nil, nil, false
	}
	return t.project(conv, cx)
}

// project is the rule's request of cx, a context of conversation conv
// (or the part of one a collapse summarizes); false when an entry of it is
// not in the transcripts.
func (t *transcripts) project(conv storage.ID, cx []ruleEntry) ([]ai.Message, []ai.Tool, bool) {
	entries := make([]*storage.Entry, len(cx))
	for i, ce := range cx {
		if entries[i] = t.entry(conv, ce.ID); entries[i] == nil {
			return nil, nil, false
		}
	}
	baseline, _, tools := foldSystem(entries)
	system := func(e *storage.Entry) bool { return e.Kind == "system" }
	var epoch storage.ID
	if len(entries) > 0 && entries[0].IsHead() {
		epoch = entries[0].ID
	}
	// A result answers the newest answer before it that called its id and
	// has no result for it yet (a provider may use an id again in a later
	// answer); a call's answer is named by its entry and message index.
	type call struct {
		entry, msg int
		id         string
	}
	failed := func(m ai.Message) bool { return m.StopReason == ai.StopError || m.StopReason == ai.StopAborted }
	awaiting := map[string]call{}
	results := map[call]ai.Message{}
	for i, ce := range cx {
		for j, m := range ce.Messages {
			switch {
			case m.Role == ai.RoleAssistant && !failed(m):
				for _, b := range m.ToolCalls() {
					awaiting[b.ID] = call{i, j, b.ID}
				}
			case m.Role == ai.RoleToolResult:
				if c, ok := awaiting[m.ToolCallID]; ok {
					results[c] = m
					delete(awaiting, m.ToolCallID)
				}
			}
		}
	}
	var out []ai.Message
	if baseline >= 0 {
		out = append(out, cx[baseline].Messages...)
	}
	for i, ce := range cx {
		if e := entries[i]; i == baseline || system(e) && (e.ID < epoch || i < baseline) {
			continue
		}
		for j, m := range ce.Messages {
			if m.Role == ai.RoleToolResult || m.Role == ai.RoleAssistant && failed(m) {
				continue
			}
			out = append(out, m)
			if m.Role != ai.RoleAssistant {
				continue
			}
			used := map[string]bool{}
			for _, b := range m.Content.Blocks {
				if b.Type != ai.BlockToolCall {
					continue
				}
				if r, ok := results[call{i, j, b.ID}]; ok && !used[b.ID] {
					used[b.ID] = true
					out = append(out, r)
					continue
				}
				out = append(out, ai.Message{Role: ai.RoleToolResult, ToolCallID: b.ID, ToolName: b.Name,
					Content: ai.Blocks(ai.Text(noResultText)), IsError: ai.Bool(true), Timestamp: m.Timestamp})
			}
		}
	}
	return out, tools, true
}

// foldSystem folds the system entries of a context's entries: the
// newest baseline of the head's epoch (-1: none), and the sections and
// tools it and the system entries after it leave the model told. A delta
// replaces a section in place, appends a new one or, with no text, removes
// it; it removes tools before it adds them, a tool added again keeping its
// place.
func foldSystem(entries []*storage.Entry) (baseline int, sections []core.SystemSection, tools []ai.Tool) {
	var epoch storage.ID
	if len(entries) > 0 && entries[0].IsHead() {
		epoch = entries[0].ID
	}
	type systemData struct {
		Baseline     bool                 `json:"baseline"`
		Sections     []core.SystemSection `json:"sections"`
		ToolsAdded   []ai.Tool            `json:"toolsAdded"`
		ToolsRemoved []ai.Tool            `json:"toolsRemoved"`
	}
	data := make([]*systemData, len(entries))
	baseline = -1
	for i, e := range entries {
		var d systemData
		if e.Kind == "system" && e.ID >= epoch && json.Unmarshal(e.Data, &d) == nil {
			if data[i] = &d; d.Baseline {
				baseline = i
			}
		}
	}
	for i := max(baseline, 0); baseline >= 0 && i < len(entries); i++ {
		d := data[i]
		if d == nil {
			continue
		}
		for _, s := range d.Sections {
			at := slices.IndexFunc(sections, func(c core.SystemSection) bool { return c.Key == s.Key })
			switch {
			case s.Text == nil && at >= 0:
				sections = slices.Delete(sections, at, at+1)
			case s.Text == nil:
			case at >= 0:
				sections[at] = s
			default:
				sections = append(sections, s)
			}
		}
		for _, r := range d.ToolsRemoved {
			tools = slices.DeleteFunc(tools, func(t ai.Tool) bool { return t.Name == r.Name })
		}
		for _, a := range d.ToolsAdded {
			if at := slices.IndexFunc(tools, func(t ai.Tool) bool { return t.Name == a.Name }); at >= 0 {
				tools[at] = a
			} else {
				tools = append(tools, a)
			}
		}
	}
	return baseline, sections, tools
}

// attemptStarts notes, at a generation's patch to streaming that sends a
// request (not a fetch), the request the rule projects for it.
func (o *oracle) attemptStarts(w storage.Write, r storage.Range) {
	var st struct {
		Deferred json.RawMessage `json:"deferred"`
	}
	if w.Status != "streaming" || json.Unmarshal(w.State, &st) != nil || len(st.Deferred) > 0 && string(st.Deferred) != "null" {
		return
	}
	conv := o.convs[w.ID]
	want, tools, ok := o.transcripts.projectRequest(conv, r.Last)
	if !ok {
		delete(o.requests, conv)
		return
	}
	o.requests[conv] = expectedRequest{task: w.ID, at: r.Last, messages: want, tools: tools}
}

// expectedRequest is the request the rule projects for a conversation's
// newest attempt.
type expectedRequest struct {
	task, at storage.ID
	messages []ai.Message
	tools    []ai.Tool
}

// request holds a request a generation sends to what the rule projected
// at the commit that started its attempt.
func (o *oracle) request(req ai.Request) error {
	id, ok := strings.CutPrefix(req.SessionID, "conversation-")
	if !ok {
		return nil
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	want, ok := o.requests[storage.ID(n)]
	if !ok {
		return nil
	}
	if !o.requestHooked(req.Messages, storage.ID(n), want) {
		return o.fail(broke(ruleRequest, "generation %d sent conversation %d's model %s; its context at %d projects to %s%s",
			want.task, n, describeMessages(req.Messages), want.at, describeMessages(want.messages), firstDifference(req.Messages, want.messages)))
	}
	if !sameOrEmpty(req.Tools, want.tools) {
		return o.fail(broke(ruleRequest, "generation %d offered conversation %d's model the tools %v; its context at %d folds to %v",
			want.task, n, toolNames(req.Tools), want.at, toolNames(want.tools)))
	}
	return o.modelAsked(want.task, req)
}

// requestHooked reports whether msgs are want's messages followed by the
// notes of the request hooks of a set that may have run for want's
// generation (hookrule.go), in handler order.
func (o *oracle) requestHooked(msgs []ai.Message, conv storage.ID, want expectedRequest) bool {
	var spans []hookSpan
	var sure []bool
	if from, started := o.hooks.invokedAt[want.task]; started && len(o.hooks.spans) > 0 {
		spans, sure = o.handlers(conv, from, func(s hookSpan) bool { return s.effect == "request" })
	}
	return possibleRuns(spans, sure, func(run []hookSpan) bool {
		hooked := slices.Clone(want.messages)
		for _, s := range run {
			hooked = append(hooked, hookNote(s.id))
		}
		return sameMessages(msgs, hooked)
	})
}

// sameMessages reports whether a and b are the same messages as a provider
// receives them: deeply equal, or encoding to the same JSON (a list that
// one backend reads back empty and another nil is the same list).
func sameMessages(a, b []ai.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if reflect.DeepEqual(a[i], b[i]) {
			continue
		}
		x, errX := json.Marshal(a[i])
		y, errY := json.Marshal(b[i])
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// firstDifference shows the first message where sent and want differ,
// whole, when their descriptions alone may not ("" when none does).
func firstDifference(sent, want []ai.Message) string {
	for i := range min(len(sent), len(want)) {
		if !sameMessages(sent[i:i+1], want[i:i+1]) {
			a, _ := json.Marshal(sent[i])
			b, _ := json.Marshal(want[i])
			return fmt.Sprintf("; message %d was sent as %s, and projects to %s", i, a, b)
		}
	}
	return ""
}

// sameOrEmpty reports whether a and b are deeply equal, nil and empty
// alike.
func sameOrEmpty[T any](a, b []T) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

func toolNames(ts []ai.Tool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// describeMessages lists messages by role, a tool result with its call, an
// assistant's calls, and a text's first words.
func describeMessages(ms []ai.Message) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		s := string(m.Role)
		switch {
		case m.Role == ai.RoleToolResult:
			s += "(" + m.ToolCallID + ")"
		case m.Role == ai.RoleAssistant:
			var calls []string
			for _, b := range m.Content.Blocks {
				if b.Type == ai.BlockToolCall {
					calls = append(calls, b.ID)
				}
			}
			if len(calls) > 0 {
				s += "(" + strings.Join(calls, ",") + ")"
			}
		}
		if text := messageText(m); text != "" {
			if len(text) > 12 {
				text = text[:12] + "…"
			}
			s += fmt.Sprintf("%q", text)
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// messageText is a message's first text block's text.
func messageText(m ai.Message) string {
	for _, b := range m.Content.Blocks {
		if b.Type == ai.BlockText {
			return b.Text
		}
	}
	return ""
}

// checkedProvider is the run's faux provider with every request a
// generation sends held to the request rule first, and every request a
// summarizer sends to the summarizer rule (summarizerrule.go).
type checkedProvider struct {
	*faux.Provider
	o *oracle
}

func (p checkedProvider) Stream(ctx context.Context, req ai.Request) ai.Stream {
	_ = p.o.request(req) // a violation is the oracle's first failure, which ends the run
	_ = p.o.summarizerRequest(req)
	return p.Provider.Stream(ctx, req)
}
