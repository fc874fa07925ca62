package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// transcriptGen draws a context as turns make them: an input, the system
// entry of its first attempt, exchanges whose parallel calls get their
// results in any order (the newest exchange may still wait for some), writes
// placed between exchanges, a final answer; sometimes after an old head,
// sometimes with an edit entry.
func transcriptGen(t *rapid.T) *core.Context {
	cx := &core.Context{}
	id := storage.ID(0)
	add := func(kind storage.Kinder, key string, msg *ai.Message) *storage.Entry {
		id += storage.ID(rapid.IntRange(1, 3).Draw(t, "gap"))
		e := &storage.Entry{ID: id, Kind: kind.Kind(), Key: key}
		ce := core.ContextEntry{Entry: e}
		if msg != nil {
			e.Model = []ai.Message{*msg}
			ce.Messages = e.Model
		}
		cx.Entries = append(cx.Entries, ce)
		return e
	}
	text := func(role ai.Role, n int) *ai.Message {
		return &ai.Message{Role: role, Content: ai.PlainText(strings.Repeat("x", n))}
	}
	if rapid.Bool().Draw(t, "head") {
		cx.Head = add(core.SummaryKind, "", text(ai.RoleUser, 40))
	}
	calls := 0
	turns := rapid.IntRange(1, 6).Draw(t, "turns")
	for turn := range turns {
		add(core.UserKind, "", text(ai.RoleUser, rapid.IntRange(1, 400).Draw(t, "input")))
		if rapid.Bool().Draw(t, "system") {
			add(core.SystemKind, "", &ai.Message{Role: ai.RoleSystem, Content: ai.PlainText("sys")})
		}
		exchanges := rapid.IntRange(0, 3).Draw(t, "exchanges")
		for x := range exchanges {
			n := rapid.IntRange(1, 3).Draw(t, "calls")
			m := text(ai.RoleAssistant, rapid.IntRange(0, 200).Draw(t, "reply"))
			var ids []string
			for range n {
				calls++
				ids = append(ids, fmt.Sprintf("c%d", calls))
				m.Content.Blocks = append(m.Content.Blocks, ai.ToolCall(ids[len(ids)-1], "t", []byte(`{}`)))
			}
			add(core.AssistantKind, "", m)
			newest := turn == turns-1 && x == exchanges-1
			order := rapid.Permutation(ids).Draw(t, "order")
			for i, call := range order {
				if newest && i > 0 && rapid.Bool().Draw(t, "still running") {
					break // the newest exchange's other tools have not returned
				}
				add(core.ToolResultKind, call, &ai.Message{Role: ai.RoleToolResult, ToolCallID: call, Content: ai.PlainText(strings.Repeat("r", rapid.IntRange(1, 300).Draw(t, "result")))})
			}
			if newest {
				break
			}
			if rapid.IntRange(0, 3).Draw(t, "write") == 0 {
				add(core.NoticeKind, "", text(ai.RoleUser, 20))
			}
			if rapid.IntRange(0, 3).Draw(t, "delta") == 0 {
				add(core.SystemKind, "", &ai.Message{Role: ai.RoleSystem, Content: ai.PlainText("delta")})
			}
		}
		if turn < turns-1 || exchanges == 0 {
			add(core.AssistantKind, "", text(ai.RoleAssistant, rapid.IntRange(1, 300).Draw(t, "answer")))
		}
	}
	if n := len(cx.Entries); n > 2 && rapid.IntRange(0, 4).Draw(t, "edit") == 0 {
		target := cx.Entries[rapid.IntRange(0, n-1).Draw(t, "target")].Entry.ID
		e := add(core.NoticeKind, "", nil)
		e.Edits = []storage.ContextEdit{{Target: target, Action: storage.EditOmit}}
	}
	return cx
}

// The cut never divides what belongs together, whatever the transcript and
// keepRecent: an exchange and its results, a system entry and what follows
// it, an input and its answer; a call still
// waiting for a result stays kept; and the newest entry is always kept.
func TestTheCutNeverSplitsAnExchange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cx := transcriptGen(t)
		keepRecent := rapid.Int64Range(0, 2000).Draw(t, "keepRecent")
		c, ok := planCut(cx, keepRecent)
		if !ok {
			return
		}
		entries := cx.Entries
		if cx.Head != nil {
			entries = entries[1:]
		}
		at := slices.IndexFunc(entries, func(ce core.ContextEntry) bool { return ce.Entry.ID == c.firstRetained })
		if at <= 0 || entries[at-1].Entry.ID != c.through {
			t.Fatalf("cut %+v: through is not the entry right before the first kept one", c)
		}
		prefix, kept := entries[:at], entries[at:]
		owner := map[string]int{} // call id → index of its assistant
		answered := map[string]bool{}
		for i, ce := range entries {
			for _, m := range ce.Messages {
				for _, b := range m.ToolCalls() {
					owner[b.ID] = i
				}
			}
			if ce.Entry.Kind == core.ToolResultKind.Kind() {
				answered[ce.Entry.Key] = true
				if o, ok := owner[ce.Entry.Key]; ok && (o < at) != (i < at) {
					t.Fatalf("cut before %d separates result %s (entry %d) from its call (entry %d)", c.firstRetained, ce.Entry.Key, ce.Entry.ID, entries[o].Entry.ID)
				}
			}
		}
		for call, o := range owner {
			if o < at && !answered[call] && !slices.ContainsFunc(entries[o+1:], func(ce core.ContextEntry) bool {
				return len(ce.Messages) > 0 && len(ce.Messages[0].ToolCalls()) > 0
			}) {
				t.Fatalf("call %s still waits for its result in the newest exchange, and the cut summarizes it", call)
			}
		}
		last := prefix[len(prefix)-1].Entry
		first := kept[0].Entry
		switch {
		case last.Kind == core.SystemKind.Kind():
			t.Fatalf("system entry %d is summarized without what it governs", last.ID)
		case first.Kind == core.AssistantKind.Kind() && last.Kind == core.UserKind.Kind():
			t.Fatalf("answer %d is kept without its input %d", first.ID, last.ID)
		case first.Kind == core.ToolResultKind.Kind():
			t.Fatalf("the kept part starts with result %d", first.ID)
		}
	})
}

// Past keepRecent nothing is summarized: a context that fits is left
// alone, and one unit is always kept.
func TestTheCutKeepsWhatFitsAndSomethingAlways(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cx := transcriptGen(t)
		var total int64
		for _, ce := range cx.Entries {
			if cx.Head == nil || ce.Entry != cx.Head {
				total += EstimateTokens(ce.Messages...)
			}
		}
		if _, ok := planCut(cx, total); ok {
			t.Fatalf("a context of %d tokens was cut with keepRecent %d", total, total)
		}
		if c, ok := planCut(cx, 0); ok && c.firstRetained == 0 {
			t.Fatalf("cut %+v keeps nothing", c)
		}
	})
}

// An answer that names one id twice has one call of it, as its context
// has (the first call takes the result, the other an error): once that
// result has landed, the exchange is whole and may be summarized, even as
// the newest one; before, it may not.
func TestAnAnswerNamingAnIDTwiceIsWholeOnceItsResultLands(t *testing.T) {
	entry := func(id storage.ID, kind storage.Kinder, key string, m ai.Message) core.ContextEntry {
		e := &storage.Entry{ID: id, Kind: kind.Kind(), Key: key, Model: []ai.Message{m}}
		return core.ContextEntry{Entry: e, Messages: e.Model}
	}
	text := func(role ai.Role, s string) ai.Message { return ai.Message{Role: role, Content: ai.PlainText(s)} }
	twice := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c1", "t", []byte(`{}`)), ai.ToolCall("c1", "t", []byte(`{}`)))}
	result := ai.Message{Role: ai.RoleToolResult, ToolCallID: "c1", Content: ai.PlainText("r")}
	for _, results := range []int{0, 1, 2} {
		cx := &core.Context{Entries: []core.ContextEntry{
			entry(1, core.UserKind, "", text(ai.RoleUser, strings.Repeat("look ", 50))),
			entry(2, core.AssistantKind, "", twice),
		}}
		for i := range results {
			cx.Entries = append(cx.Entries, entry(storage.ID(3+i), core.ToolResultKind, "c1", result))
		}
		cx.Entries = append(cx.Entries,
			entry(5, core.AssistantKind, "", text(ai.RoleAssistant, "done")),
			entry(6, core.UserKind, "", text(ai.RoleUser, "again")),
			entry(7, core.AssistantKind, "", text(ai.RoleAssistant, "ok")))
		c, ok := planCut(cx, 0)
		if want := results > 0; ok != want || ok && (c.through != 5 || c.firstRetained != 6) {
			t.Errorf("with %d results of c1: cut %+v, %v; want a cut after 5 keeping from 6: %v", results, c, ok, want)
		}
	}
}
