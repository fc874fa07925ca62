package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// A settings line has the host write one value of a kind's configuration
// through its typed view (core.Config, §5.2) and read the whole view back:
//
//	settings CONV KIND NAME JSON
//
// KIND is generation or collapse. The settings rule holds the view to the
// store:
//
//   - Set of a name the kind does not declare fails naming it and writes
//     nothing; Set of a value the session's rules refuse (a collapse
//     threshold above 1) fails with that rule; any other Set commits;
//   - Get right after names exactly the declared values the store holds
//     for the conversation, each as the store has it, and, when nothing
//     else committed since the Set, the value just set.

// ruleSettings: a kind's configuration reads and writes as its store holds it.
const ruleSettings oracleRule = "settings-read-as-the-store-holds-them"

// settingsKinds are the kinds a settings line may name.
var settingsKinds = map[string]core.TaskKind{"generation": agent.GenerationKind, "collapse": agent.CollapseKind}

// settingsLine runs a settings line in conversation conv and holds what it
// did to the settings rule.
func (e *env) settingsLine(ctx context.Context, conv storage.ID, l progLine) error {
	c, err := e.h.Conversation(ctx, conv)
	if err != nil {
		return err
	}
	kind := settingsKinds[l.args[1]]
	cfg, err := c.Config(kind)
	if err != nil {
		return err
	}
	name := l.args[2]
	var value any
	if err := json.Unmarshal([]byte(l.args[3]), &value); err != nil {
		return fmt.Errorf("settings: value %q: %v", l.args[3], err)
	}
	declared := kind.(core.ConfigDeclarer).Config()
	store := e.h.Store()
	before := store.LastSeq()
	err = cfg.Set(ctx, map[string]any{name: value})
	_, known := declared[name]
	refusedBy := settingRefused(l.args[1], name, value)
	switch {
	case err != nil && sessionGone(ctx, err):
		return err
	case !known:
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			return e.oracle.fail(broke(ruleSettings, "%s: setting %s, which kind %s does not declare, returned %v; want an error naming it", l, name, l.args[1], err))
		}
		if store.LastSeq() != before {
			return e.oracle.fail(broke(ruleSettings, "%s: a refused setting committed (the store went from %d to %d)", l, before, store.LastSeq()))
		}
		err = nil
	case refusedBy != "":
		if rule := core.RuleOf(err); rule != refusedBy {
			return e.oracle.fail(broke(ruleSettings, "%s returned %v; want it refused by %s", l, err, refusedBy))
		}
		err = nil
	case err != nil:
		return e.oracle.fail(broke(ruleSettings, "%s failed: %v", l, err))
	}
	set := store.LastSeq()
	got, err := cfg.Get(ctx)
	switch {
	case err != nil && sessionGone(ctx, err):
		return err
	case err != nil:
		return e.oracle.fail(broke(ruleSettings, "%s: Get failed: %v", l, err))
	}
	read := store.LastSeq()
	held := map[string]json.RawMessage{}
	for _, n := range slices.Sorted(maps.Keys(declared)) {
		a := declared[n]
		a.Scope.ID = conv
		v, ok, err := store.GetValue(ctx, a, 0)
		if err != nil {
			return err
		}
		if ok {
			held[n] = v.Value
		}
	}
	return e.oracle.settingsRead(l, got, held, name, value, known && set == before+1 && read == set && store.LastSeq() == read)
}

// sessionGone reports whether err is the session failing or ending under
// a host call (a fault, a commit whose persistence failed, a crashed or stopped
// process's closed store, the run's end) rather than the call's own
// failure.
func sessionGone(ctx context.Context, err error) bool {
	var pe *core.PersistenceError
	return isSessionFault(err) || errors.As(err, &pe) || errors.Is(err, core.ErrClosed) || errors.Is(err, storage.ErrClosed) ||
		errors.Is(err, fault.ErrCrashed) || ctx.Err() != nil
}

// settingRefused is the rule that refuses setting name of kind to value,
// or "" for a value the session takes.
func settingRefused(kind, name string, value any) core.Rule {
	if f, ok := value.(float64); ok && kind == "collapse" && name == "threshold" && (f < 0 || f > 1) {
		return agent.RuleCollapseSetting
	}
	return ""
}

// settingsRead holds a Get's answer to what the store held after it, when
// quiet (nothing committed from the Set on but the Set), and to the value
// just set.
func (o *oracle) settingsRead(l progLine, got, held map[string]json.RawMessage, name string, value any, quiet bool) error {
	if !quiet {
		return nil
	}
	if !sameJSONMembers(got, held) {
		return o.fail(broke(ruleSettings, "%s: Get read %s; the store holds %s", l, membersText(got), membersText(held)))
	}
	if settingRefused(l.args[1], name, value) != "" {
		return nil
	}
	var v any
	if raw, ok := got[name]; !ok || json.Unmarshal(raw, &v) != nil || !reflect.DeepEqual(v, value) {
		return o.fail(broke(ruleSettings, "%s: Get read %s = %s right after setting it to %s", l, name, got[name], l.args[3]))
	}
	return nil
}

// sameJSONMembers reports whether a and b have the same names with values
// that decode the same.
func sameJSONMembers(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for n, ra := range a {
		rb, ok := b[n]
		var va, vb any
		if !ok || json.Unmarshal(ra, &va) != nil || json.Unmarshal(rb, &vb) != nil || !reflect.DeepEqual(va, vb) {
			return false
		}
	}
	return true
}

func membersText(m map[string]json.RawMessage) string {
	var b strings.Builder
	b.WriteString("{")
	for i, n := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", n, m[n])
	}
	return b.String() + "}"
}

// settingsSeeds is how often a drawn program writes settings through the
// typed view: every seventh seed from 5 (not the golden traces' seed 1).
const settingsSeeds = 7

// drawnSettings are what a settings line writes: values the session
// takes (among them models and narrowed tool selections, an empty one
// included, so that a model calls tools it was not offered), a threshold
// it refuses, and names the kinds do not declare.
var drawnSettings = [][3]string{
	{"generation", "thinking", `"low"`}, {"generation", "thinking", `"high"`},
	{"generation", "budgetMs", "30000"}, {"generation", "budgetMs", "120000"},
	{"collapse", "keepRecent", "20000"}, {"collapse", "keepRecent", "0"},
	{"collapse", "threshold", "0.9"}, {"collapse", "threshold", "2"},
	{"generation", "temperature", "1"}, {"collapse", "keep", "3"},
	{"generation", "model", `{"modelId":"faux-2"}`}, {"generation", "model", `{"provider":"faux","modelId":"faux-1"}`},
	{"generation", "model", `{"modelId":"faux-9"}`}, {"generation", "profile", `"terse"`},
	{"generation", "selectedTools", `["work","a"]`}, {"generation", "selectedTools", `["b"]`},
	{"generation", "selectedTools", `[]`},
}

// fauxModels are the models a generated run's provider serves: a settings
// line may name either, or one nobody serves (faux-9), whose turns fail.
var fauxModels = []ai.Model{{ID: faux.DefaultModelID}, {ID: "faux-2"}}

// drawSettings gives every settingsSeeds-th seed's program one to three
// settings lines at random places, from a generator of their own.
func drawSettings(p *program, seed uint64) {
	if seed%settingsSeeds != 5 {
		return
	}
	rng := seededRNG(seed, "settings")
	for range 1 + rng.IntN(3) {
		s := drawnSettings[rng.IntN(len(drawnSettings))]
		conv := []string{"c0", "c0", "c-1"}[rng.IntN(3)]
		lines := []progLine{{op: "settings", args: []string{conv, s[0], s[1], s[2]}}}
		if rng.IntN(2) == 0 {
			// Another value of the kind first, so that the read has more
			// than one to return.
			o := drawnSettings[rng.IntN(len(drawnSettings))]
			if o[0] == s[0] && o[1] != s[1] {
				lines = slices.Insert(lines, 0, progLine{op: "settings", args: []string{conv, o[0], o[1], o[2]}})
			}
		}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), lines...)
	}
	// Half of them, from a generator of their own, set the root's model to
	// the second one the provider serves, or to one nobody serves, and run
	// two turns and a collapse that keeps almost nothing: the turns and the
	// summarizer ask that model, or fail for want of it.
	if model := seededRNG(seed, "model turns"); model.IntN(2) == 0 {
		ref := []string{`{"modelId":"faux-2"}`, `{"modelId":"faux-9"}`}[model.IntN(2)]
		block := append([]progLine{{op: "settings", args: []string{"c0", "generation", "model", ref}}},
			collapseAfterTwoTurns(1, progLine{op: "respond", args: []string{"text", "summed up"}})...)
		if model.IntN(2) == 0 {
			// Another collapse while the first summarizes: refused,
			// naming the first.
			block = slices.Insert(block, 1+collapseLine+1, progLine{op: "collapse", args: []string{"c0"}})
		}
		p.lines = slices.Insert(p.lines, model.IntN(len(p.lines)), block...)
	}
	// Half of them, from a generator of their own, select two tools for
	// the root and then have a call add one: the next request offers the
	// selection and the added tool, not the whole catalogue.
	if add := seededRNG(seed, "added to a selection"); add.IntN(2) == 0 {
		p.lines = slices.Insert(p.lines, add.IntN(len(p.lines)),
			progLine{op: "settings", args: []string{"c0", "generation", "selectedTools", `["work","a"]`}},
			progLine{op: "respond", args: []string{"calls", "work:addTools"}}, progLine{op: "respond", args: []string{"text", "ok"}},
			progLine{op: "accept", args: []string{"c0", "add one"}}, progLine{op: "drive", args: []string{"c0"}})
	}
	// Half of them, from a generator of their own, begin with a turn under
	// a section hook of the root, then select tools for it: the section's
	// text counts the selection, so it changes in place, and the next turn
	// must tell it again. The selection and the hook are then taken off,
	// so that the program's other turns meet neither.
	if told := seededRNG(seed, "section told again"); told.IntN(2) == 0 {
		sel := []string{`["work","a"]`, `["b"]`, `[]`}[told.IntN(3)]
		p.lines = append([]progLine{{op: "hook", args: []string{"c0", "section"}},
			{op: "respond", args: []string{"text", "ok"}}, {op: "respond", args: []string{"text", "ok"}},
			{op: "accept", args: []string{"c0", "look"}}, {op: "drive", args: []string{"c0"}},
			{op: "settings", args: []string{"c0", "generation", "selectedTools", sel}},
			{op: "accept", args: []string{"c0", "again"}}, {op: "drive", args: []string{"c0"}},
			{op: "settings", args: []string{"c0", "generation", "selectedTools", "null"}},
			{op: "unhook", args: []string{"-1"}}}, p.lines...)
	}
}
