package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// Generation hook points (§8.7).
const (
	HookSystemInstructions = "system_instructions"
	HookBeforeRequest      = "before_request"
	HookAfterResponse      = "after_response"
	HookOnYield            = "on_yield"
)

// SystemInstructionsInput is what a system_instructions handler sees: the
// conversation, the generation's config, and the output merged so far.
type SystemInstructionsInput struct {
	ConversationID storage.ID
	Config         GenerationConfig
	Sections       []core.SystemSection
	Tools          []ai.Tool
}

// SystemInstructionsOutput is a handler's answer. Sections merge by key
// across handlers: a new key is appended in the order given, a known key is
// replaced in place, and a nil Text removes the key. Tools, when not nil,
// replace the tool definitions merged so far.
type SystemInstructionsOutput struct {
	Sections []core.SystemSection
	Tools    []ai.Tool
}

// desiredSystem is what the host wants the model to have been told now.
type desiredSystem struct {
	sections []core.SystemSection
	tools    []ai.Tool
}

// systemInstructions runs the system_instructions handlers for the task's
// conversation. Without a handler that names tools, the tools are the
// catalogue's selection by the config. A failing handler is reported and
// skipped.
func (c *config) systemInstructions(ctx context.Context, rt *core.TaskRuntime, cfg GenerationConfig) (desiredSystem, error) {
	in := SystemInstructionsInput{ConversationID: rt.ConversationID(), Config: cfg}
	toolsSet := false
	in, err := core.RunHookChain(ctx, rt, generationHooks, HookSystemInstructions, in,
		func(in SystemInstructionsInput, out SystemInstructionsOutput, ok bool, err error) SystemInstructionsInput {
			if err != nil {
				if !plant.On("system-hook-failure-unreported") {
					rt.Report(&core.HookError{Kind: GenerationKindName, Point: HookSystemInstructions, Task: rt.TaskID(), Err: err})
				}
				return in
			}
			if ok {
				in.Sections = core.FoldSections(slices.Clone(in.Sections), out.Sections)
				if out.Tools != nil {
					in.Tools, toolsSet = slices.Clone(out.Tools), true
				}
			}
			return in
		})
	if err != nil {
		return desiredSystem{}, err
	}
	if !toolsSet {
		in.Tools = c.tools.definitions(cfg.SelectedTools)
	}
	return desiredSystem{sections: in.Sections, tools: in.Tools}, nil
}

// generationHooks names the generation kind for hook routing, whatever
// implementation is registered under the name.
var generationHooks = kindName(GenerationKindName)

// systemChange is what a generation must append so that the model has been
// told what the host wants: a baseline when the context has none, a delta
// with what changed, or nothing (ok false).
func systemChange(sent core.SystemFold, want desiredSystem) (core.SystemData, bool) {
	if sent.Baseline == nil {
		return core.SystemData{Baseline: true, Sections: slices.Clone(want.sections), ToolsAdded: slices.Clone(want.tools)}, true
	}
	var d core.SystemData
	d.Sections = sectionChanges(sent.Sections, want.sections)
	for _, t := range sent.Tools {
		if !slices.ContainsFunc(want.tools, func(w ai.Tool) bool { return w.Name == t.Name }) {
			d.ToolsRemoved = append(d.ToolsRemoved, t)
		}
	}
	for _, w := range want.tools {
		i := slices.IndexFunc(sent.Tools, func(t ai.Tool) bool { return t.Name == w.Name })
		if i < 0 || !sameTool(sent.Tools[i], w) && !plant.On("system-tool-redefined-kept") {
			d.ToolsAdded = append(d.ToolsAdded, w)
		}
	}
	return d, len(d.Sections) > 0 || len(d.ToolsAdded) > 0 || len(d.ToolsRemoved) > 0
}

// sectionChanges lists the section writes that fold cur into want. Texts
// change in place; removed keys are removed; where the order differs, every
// section from the first difference on is removed and added again in the
// wanted order, because a fold can only append.
func sectionChanges(cur, want []core.SystemSection) []core.SystemSection {
	var out []core.SystemSection
	has := func(list []core.SystemSection, key string) bool {
		return slices.ContainsFunc(list, func(s core.SystemSection) bool { return s.Key == key })
	}
	if plant.On("system-sections-append-only") {
		for _, s := range cur {
			if !has(want, s.Key) {
				out = append(out, core.SystemSection{Key: s.Key})
			}
		}
		for _, s := range want {
			if !has(cur, s.Key) {
				out = append(out, s)
			}
		}
		return out
	}
	var kept []core.SystemSection
	for _, s := range cur {
		if has(want, s.Key) {
			kept = append(kept, s)
		} else {
			out = append(out, core.SystemSection{Key: s.Key})
		}
	}
	split := 0
	for split < len(kept) && kept[split].Key == want[split].Key && !plant.On("system-reorder-from-start") {
		split++
	}
	for i := 0; i < split; i++ {
		if *kept[i].Text != *want[i].Text && !plant.On("system-section-text-unchanged") {
			out = append(out, want[i])
		}
	}
	for _, s := range kept[split:] {
		out = append(out, core.SystemSection{Key: s.Key})
	}
	return append(out, want[split:]...)
}

// foldedTools is the tool set after change lands on top of sent: what the
// request offers in the turn that appends change.
func foldedTools(sent core.SystemFold, change core.SystemData) []ai.Tool {
	if change.Baseline {
		return slices.Clone(change.ToolsAdded)
	}
	return core.FoldTools(slices.Clone(sent.Tools), change.ToolsRemoved, change.ToolsAdded)
}

func sameTool(a, b ai.Tool) bool {
	if plant.On("system-tool-readded-unchanged") {
		return false
	}
	return a.Name == b.Name && a.Description == b.Description &&
		sameJSON(a.Parameters, b.Parameters) && sameJSON(a.ConstrainedSampling, b.ConstrainedSampling)
}

func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// systemMessage materializes a system entry's message: a baseline's content
// is the prompt, its sections rendered in order; a delta's content says what
// changed. Sections, toolsAdded and toolsRemoved follow the message shape
// (a removed section is null, a removed tool is its name).
func systemMessage(d core.SystemData, ts int64) ai.Message {
	m := ai.Message{Role: ai.RoleSystem, Timestamp: ts, ToolsAdded: d.ToolsAdded}
	if len(d.Sections) > 0 {
		m.Sections = map[string]*string{}
	}
	var text []string
	for _, s := range d.Sections {
		m.Sections[s.Key] = s.Text
		switch {
		case d.Baseline:
			text = append(text, *s.Text)
		case s.Text == nil:
			text = append(text, "The "+s.Key+" section no longer applies.")
		default:
			text = append(text, "The "+s.Key+" section now reads:\n"+*s.Text)
		}
	}
	for _, t := range d.ToolsRemoved {
		if plant.On("system-message-drops-removed-tools") {
			break
		}
		m.ToolsRemoved = append(m.ToolsRemoved, ai.ToolRef{Name: t.Name})
	}
	if !d.Baseline {
		if names := toolNames(d.ToolsAdded); names != "" {
			text = append(text, "Tools now available: "+names+".")
		}
		if names := toolNames(d.ToolsRemoved); names != "" {
			text = append(text, "Tools no longer available: "+names+".")
		}
	}
	m.Content = ai.PlainText(strings.Join(text, "\n\n"))
	return m
}

func toolNames(ts []ai.Tool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}
