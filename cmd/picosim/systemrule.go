package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The system-entry rule: a generation appends a system entry only to tell
// its model what the context has not told it yet (§3.2), and the entry
// says exactly that. The system the context told before the entry (the
// fold of the request rule, requestrule.go, over the context the oracle
// derives through the commit before) and the one it tells after fix the
// entry on their own:
//   - with no baseline in the head's epoch, a baseline: sections with
//     text, tools added, nothing removed;
//   - otherwise a delta, never empty: first each section the new system
//     lacks, removed, in the old order; then each section kept in place
//     (the longest common prefix of the kept keys and the new ones) whose
//     text changed, with its new text; then, where the order differs,
//     every kept section from the first difference on removed and every
//     new section from there on added, in the new order (a fold can only
//     append); the tools the new system lacks, removed, in the old order;
//     and the tools it has that the old lacked or defined otherwise,
//     added;
//   - the entry's model message is a system message that carries the same
//     change: its sections map each key to its last text (none for a
//     removal), its tools added and removed are the entry's; a baseline's
//     content is its sections' texts, in order, and a delta's names every
//     section key and tool it changes.
//
// The fold the generation started from is the one the request rule
// derives; the hook rule (hookrule.go) holds the fold after the entry to
// what the hooks ask for. This rule holds the entry between them.

// ruleSystemEntry: a generation's system entry says what changed.
const ruleSystemEntry oracleRule = "a-system-entry-says-what-changed"

// systemEntryChecked holds a system entry a generation appended at seq to
// the rule.
func (o *oracle) systemEntryChecked(inv core.Invocation, ok bool, w storage.Write, r storage.Range, by string, seq storage.ID) error {
	e := w.Entry
	if !ok || e == nil || e.Kind != core.SystemKind.Kind() || o.kinds[inv.Task] != agent.GenerationKindName {
		return nil
	}
	conv := e.ConversationID
	cx, derived := o.transcripts.derive(conv, r.First-1)
	if !derived {
		return nil
	}
	entries := make([]*storage.Entry, 0, len(cx)+1)
	for _, ce := range cx {
		old := o.transcripts.entry(conv, ce.ID)
		if old == nil {
			return nil
		}
		entries = append(entries, old)
	}
	baseline, sections, tools := foldSystem(entries)
	var got core.SystemData
	if err := json.Unmarshal(e.Data, &got); err != nil {
		return o.fail(broke(ruleSystemEntry, "%s appended system entry %d to conversation %d at %d with data that does not decode: %v", by, e.ID, conv, seq, err))
	}
	_, wantSections, wantTools := foldSystem(append(entries, e))
	want := systemDelta(baseline >= 0, sections, tools, wantSections, wantTools)
	if problem := sameSystemData(got, want); problem != "" {
		return o.fail(broke(ruleSystemEntry, "%s appended system entry %d to conversation %d at %d: %s; the context told %s and tells %s after it, so the entry should be %s",
			by, e.ID, conv, seq, problem, describeSystem(sections, tools), describeSystem(wantSections, wantTools), describeSystemData(want)))
	}
	if problem := systemMessageProblem(got, e.Model); problem != "" {
		return o.fail(broke(ruleSystemEntry, "%s appended system entry %d to conversation %d at %d: its model message %s", by, e.ID, conv, seq, problem))
	}
	return nil
}

// systemDelta is the entry that takes a context telling (sections, tools),
// with a baseline or not (based), to telling (wantSections, wantTools).
// Its ToolsAdded are in no particular order: the fold keeps a redefined
// tool in its place, so the order the generation added them in is not
// the new system's.
func systemDelta(based bool, sections []core.SystemSection, tools []ai.Tool, wantSections []core.SystemSection, wantTools []ai.Tool) core.SystemData {
	if !based {
		return core.SystemData{Baseline: true, Sections: wantSections, ToolsAdded: wantTools}
	}
	var d core.SystemData
	inWant := func(k string) bool {
		return slices.ContainsFunc(wantSections, func(s core.SystemSection) bool { return s.Key == k })
	}
	var kept []core.SystemSection
	for _, s := range sections {
		if inWant(s.Key) {
			kept = append(kept, s)
		} else {
			d.Sections = append(d.Sections, core.SystemSection{Key: s.Key})
		}
	}
	same := 0
	for same < len(kept) && kept[same].Key == wantSections[same].Key {
		same++
	}
	for i := range same {
		if textOf(kept[i]) != textOf(wantSections[i]) {
			d.Sections = append(d.Sections, wantSections[i])
		}
	}
	for _, s := range kept[same:] {
		d.Sections = append(d.Sections, core.SystemSection{Key: s.Key})
	}
	d.Sections = append(d.Sections, wantSections[same:]...)
	for _, t := range tools {
		if !slices.ContainsFunc(wantTools, func(n ai.Tool) bool { return n.Name == t.Name }) {
			d.ToolsRemoved = append(d.ToolsRemoved, t)
		}
	}
	for _, t := range wantTools {
		i := slices.IndexFunc(tools, func(o ai.Tool) bool { return o.Name == t.Name })
		if i < 0 || toolJSON(tools[i]) != toolJSON(t) {
			d.ToolsAdded = append(d.ToolsAdded, t)
		}
	}
	return d
}

func textOf(s core.SystemSection) string {
	if s.Text == nil {
		return "\x00none"
	}
	return *s.Text
}

// toolJSON is a tool's definition as it is stored and sent.
func toolJSON(t ai.Tool) string {
	b, err := json.Marshal(t)
	if err != nil {
		return "\x00" + err.Error()
	}
	return string(b)
}

// sameSystemData says how got differs from want ("" when it does not):
// sections and removed tools in order, added tools as a set.
func sameSystemData(got, want core.SystemData) string {
	switch {
	case got.Baseline != want.Baseline && want.Baseline:
		return "it is a delta, though no baseline of the head's epoch is in the context"
	case got.Baseline != want.Baseline:
		return "it is a baseline, though the context has one in the head's epoch"
	case !got.Baseline && len(got.Sections)+len(got.ToolsAdded)+len(got.ToolsRemoved) == 0:
		return "it is an empty delta"
	}
	secs := func(ss []core.SystemSection) string {
		var parts []string
		for _, s := range ss {
			if s.Text == nil {
				parts = append(parts, s.Key+" removed")
			} else {
				parts = append(parts, fmt.Sprintf("%s=%q", s.Key, *s.Text))
			}
		}
		return strings.Join(parts, ", ")
	}
	tools := func(ts []ai.Tool, sorted bool) string {
		var parts []string
		for _, t := range ts {
			parts = append(parts, toolJSON(t))
		}
		if sorted {
			slices.Sort(parts)
		}
		return strings.Join(parts, ", ")
	}
	switch {
	case secs(got.Sections) != secs(want.Sections):
		return fmt.Sprintf("its sections are [%s]", secs(got.Sections))
	case tools(got.ToolsRemoved, false) != tools(want.ToolsRemoved, false):
		return fmt.Sprintf("it removes the tools %s", toolNamesOf(got.ToolsRemoved))
	case tools(got.ToolsAdded, true) != tools(want.ToolsAdded, true):
		return fmt.Sprintf("it adds the tools %s", toolNamesOf(got.ToolsAdded))
	case len(got.ToolsAdded) != len(slices.Compact(slices.Sorted(slices.Values(namesOf(got.ToolsAdded))))):
		return fmt.Sprintf("it adds a tool twice: %s", toolNamesOf(got.ToolsAdded))
	}
	return ""
}

func namesOf(ts []ai.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func toolNamesOf(ts []ai.Tool) string { return "[" + strings.Join(namesOf(ts), " ") + "]" }

func describeSystemData(d core.SystemData) string {
	if d.Baseline {
		return "a baseline"
	}
	if len(d.Sections)+len(d.ToolsAdded)+len(d.ToolsRemoved) == 0 {
		return "none at all"
	}
	var keys []string
	for _, s := range d.Sections {
		if s.Text == nil {
			keys = append(keys, "-"+s.Key)
		} else {
			keys = append(keys, s.Key)
		}
	}
	return fmt.Sprintf("a delta of sections %v, tools removed %s, added %s", keys, toolNamesOf(d.ToolsRemoved), toolNamesOf(d.ToolsAdded))
}

// systemMessageProblem says how msgs fails to carry d ("" when it does not).
func systemMessageProblem(d core.SystemData, msgs []ai.Message) string {
	if len(msgs) != 1 || msgs[0].Role != ai.RoleSystem {
		return fmt.Sprintf("is %d messages, not one system message", len(msgs))
	}
	m := msgs[0]
	var sections map[string]*string
	for _, s := range d.Sections {
		if sections == nil {
			sections = map[string]*string{}
		}
		sections[s.Key] = s.Text
	}
	if !maps.EqualFunc(sections, m.Sections, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
		return fmt.Sprintf("maps sections %v; the entry changes %v", sectionKeys(m.Sections), sectionKeys(sections))
	}
	var removed []string
	for _, t := range m.ToolsRemoved {
		removed = append(removed, t.Name)
	}
	if !slices.Equal(removed, namesOf(d.ToolsRemoved)) {
		return fmt.Sprintf("removes the tools %v; the entry removes %s", removed, toolNamesOf(d.ToolsRemoved))
	}
	if !slices.EqualFunc(m.ToolsAdded, d.ToolsAdded, func(a, b ai.Tool) bool { return toolJSON(a) == toolJSON(b) }) {
		return fmt.Sprintf("adds the tools %s; the entry adds %s", toolNamesOf(m.ToolsAdded), toolNamesOf(d.ToolsAdded))
	}
	text := m.Content.TextOf()
	if d.Baseline {
		var texts []string
		for _, s := range d.Sections {
			texts = append(texts, textOf(s))
		}
		if want := strings.Join(texts, "\n\n"); text != want {
			return fmt.Sprintf("says %q; a baseline's content is its sections' texts, %q", text, want)
		}
		return ""
	}
	for _, s := range d.Sections {
		if !strings.Contains(text, s.Key) || s.Text != nil && !strings.Contains(text, *s.Text) {
			return fmt.Sprintf("says %q, which does not tell the change of section %s", text, s.Key)
		}
	}
	for _, t := range append(slices.Clone(d.ToolsAdded), d.ToolsRemoved...) {
		if !strings.Contains(text, t.Name) {
			return fmt.Sprintf("says %q, which does not name the changed tool %s", text, t.Name)
		}
	}
	return ""
}

func sectionKeys(m map[string]*string) []string {
	return slices.Sorted(maps.Keys(m))
}
