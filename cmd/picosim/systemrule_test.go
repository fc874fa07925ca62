package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A generation's system entry is the change from what the context told to
// what it tells after it: a baseline only without one, a delta never
// empty, sections changed in place or, where the order differs, removed
// and added again from the first difference on, tools removed and added
// only when they changed; and its model message carries that change.
func TestSystemEntrySaysWhatChanged(t *testing.T) {
	text := func(s string) *string { return &s }
	sec := func(key, s string) core.SystemSection { return core.SystemSection{Key: key, Text: text(s)} }
	gone := func(key string) core.SystemSection { return core.SystemSection{Key: key} }
	a := ai.Tool{Name: "a", Description: "echo a"}
	a2 := ai.Tool{Name: "a", Description: "echo a, as hook 4 says"}
	b := ai.Tool{Name: "b", Description: "echo b"}
	baseline := core.SystemData{Baseline: true, Sections: []core.SystemSection{sec("x", "X"), sec("y", "Y"), sec("z", "Z")}, ToolsAdded: []ai.Tool{a, b}}
	cases := []struct {
		name   string
		before *core.SystemData // the context's baseline (nil: none)
		entry  core.SystemData
		msg    func(*ai.Message) // spoils the rendered message
		broken bool
	}{
		{name: "a first baseline", entry: baseline},
		{name: "a delta without a baseline", entry: core.SystemData{Sections: []core.SystemSection{sec("x", "X")}}, broken: true},
		{name: "a second baseline", before: &baseline, entry: baseline, broken: true},
		{name: "an empty delta", before: &baseline, entry: core.SystemData{}, broken: true},
		{name: "a text changed in place", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{sec("y", "Y2")}}},
		{name: "a text told again unchanged", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{sec("y", "Y")}}, broken: true},
		{name: "a section removed", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("x")}}},
		{name: "an absent section removed", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("w"), sec("y", "Y2")}}, broken: true},
		{name: "a reorder from the first difference", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("y"), gone("z"), sec("z", "Z"), sec("y", "Y")}}},
		{name: "a reorder from the start", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("x"), gone("y"), gone("z"), sec("x", "X"), sec("z", "Z"), sec("y", "Y")}}, broken: true},
		{name: "a reorder and a change in place", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{sec("x", "X2"), gone("y"), gone("z"), sec("z", "Z"), sec("y", "Y")}}},
		{name: "a change in place after a reorder", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("y"), gone("z"), sec("z", "Z"), sec("y", "Y"), sec("x", "X2")}}, broken: true},
		{name: "a tool redefined", before: &baseline, entry: core.SystemData{ToolsAdded: []ai.Tool{a2}}},
		{name: "a tool added again unchanged", before: &baseline, entry: core.SystemData{ToolsAdded: []ai.Tool{a2, b}}, broken: true},
		{name: "a tool removed", before: &baseline, entry: core.SystemData{ToolsRemoved: []ai.Tool{b}}},
		{name: "an absent tool removed", before: &baseline, entry: core.SystemData{ToolsRemoved: []ai.Tool{{Name: "c"}}, ToolsAdded: []ai.Tool{a2}}, broken: true},
		{name: "a message without the removed tool", before: &baseline, entry: core.SystemData{ToolsRemoved: []ai.Tool{b}},
			msg: func(m *ai.Message) { m.ToolsRemoved = nil }, broken: true},
		{name: "a message without the added tool", before: &baseline, entry: core.SystemData{ToolsAdded: []ai.Tool{a2}},
			msg: func(m *ai.Message) { m.ToolsAdded = nil }, broken: true},
		{name: "a message keeping a removed section", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{gone("x")}},
			msg: func(m *ai.Message) { m.Sections["x"] = text("X") }, broken: true},
		{name: "a delta message not naming its change", before: &baseline, entry: core.SystemData{Sections: []core.SystemSection{sec("y", "Y2")}},
			msg: func(m *ai.Message) { m.Content = ai.PlainText("Something changed.") }, broken: true},
		{name: "a baseline message without its last section", entry: baseline,
			msg: func(m *ai.Message) { m.Content = ai.PlainText("X") }, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			writes := []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}
			if tc.before != nil {
				writes = append(writes, systemEntryWrite(t, 2, *tc.before, nil))
			}
			o.transcripts.record(storage.CommitBatch{Writes: writes})
			o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
			w := systemEntryWrite(t, 10, tc.entry, tc.msg)
			o.transcripts.record(storage.CommitBatch{Writes: []storage.Write{w}})
			inv := core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}
			holdsOrBreaks(t, o.systemEntryChecked(inv, true, w, storage.Range{First: 10, Last: 10}, "a test", 10), ruleSystemEntry, tc.broken)
		})
	}
}

// systemEntryWrite is the write of a system entry with data d and the
// message a generation renders for it, spoiled by spoil (nil: as it is).
func systemEntryWrite(t *testing.T, id storage.ID, d core.SystemData, spoil func(*ai.Message)) storage.Write {
	t.Helper()
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	m := renderSystemMessage(d)
	if spoil != nil {
		spoil(&m)
	}
	return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "system", ByTaskID: 9, Data: data, Model: []ai.Message{m}}}
}

// renderSystemMessage is a system message that carries d as the rule
// asks: sections by key, the tools, a baseline's texts, a delta's keys,
// texts and tool names.
func renderSystemMessage(d core.SystemData) ai.Message {
	m := ai.Message{Role: ai.RoleSystem, ToolsAdded: d.ToolsAdded}
	var parts []string
	for _, s := range d.Sections {
		if m.Sections == nil {
			m.Sections = map[string]*string{}
		}
		m.Sections[s.Key] = s.Text
		switch {
		case d.Baseline:
			parts = append(parts, *s.Text)
		case s.Text == nil:
			parts = append(parts, s.Key+" is gone")
		default:
			parts = append(parts, s.Key+": "+*s.Text)
		}
	}
	for _, r := range d.ToolsRemoved {
		m.ToolsRemoved = append(m.ToolsRemoved, ai.ToolRef{Name: r.Name})
	}
	if !d.Baseline {
		for _, tl := range append(append([]ai.Tool{}, d.ToolsAdded...), d.ToolsRemoved...) {
			parts = append(parts, "tool "+tl.Name)
		}
	}
	m.Content = ai.PlainText(strings.Join(parts, "\n\n"))
	return m
}
