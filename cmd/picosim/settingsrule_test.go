package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A program's settings lines run and hold: a value the session takes, one
// its rules refuse, a name no kind declares; the first read back after
// the turn that follows it.
func TestSettingsLinesRunAndHold(t *testing.T) {
	text := strings.Join([]string{
		"picosim program 1",
		"swarm tail=2 shell=false",
		"respond text \"fine\"",
		`settings c0 generation thinking "\"high\""`,
		"settings c0 collapse keepRecent 0",
		"settings c0 collapse threshold 2",
		"settings c0 generation temperature 1",
		"accept c0 \"hello\"",
		"drive c0",
		"settings c0 generation budgetMs 30000",
	}, "\n") + "\n"
	_, _, data := runProgramFile(t, text, 3)
	for _, want := range []string{`"action":"settings c0 collapse keepRecent 0"`, `"action":"settings c0 generation budgetMs 30000"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the trace has no %s", want)
		}
	}
	if bytes.Contains(data, []byte(`"k":"refused"`)) {
		t.Errorf("a settings line was refused: %s", data[bytes.Index(data, []byte(`"k":"refused"`)):][:200])
	}
}

// The rule holds a quiet Get to the store and to the value just set; a
// Get another commit may have raced, or after a refused value, only as
// far as it can.
func TestSettingsReadAsTheStoreHoldsThem(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	line := func(kind, name, value string) progLine {
		return progLine{op: "settings", args: []string{"c0", kind, name, value}}
	}
	for _, tc := range []struct {
		name      string
		l         progLine
		got, held map[string]json.RawMessage
		quiet     bool
		broken    bool
	}{
		{"as held", line("generation", "thinking", `"low"`), map[string]json.RawMessage{"thinking": raw(`"low"`)}, map[string]json.RawMessage{"thinking": raw(`"low"`)}, true, false},
		{"spaced alike", line("collapse", "keepRecent", "7"), map[string]json.RawMessage{"keepRecent": raw(`7`), "threshold": raw(`0.5`)}, map[string]json.RawMessage{"keepRecent": raw(` 7`), "threshold": raw(`0.50`)}, true, false},
		{"one missing", line("collapse", "keepRecent", "7"), map[string]json.RawMessage{"keepRecent": raw(`7`)}, map[string]json.RawMessage{"keepRecent": raw(`7`), "threshold": raw(`0.5`)}, true, true},
		{"one more", line("collapse", "keepRecent", "7"), map[string]json.RawMessage{"keepRecent": raw(`7`), "threshold": raw(`0.5`)}, map[string]json.RawMessage{"keepRecent": raw(`7`)}, true, true},
		{"the store's, not the value set", line("generation", "thinking", `"low"`), map[string]json.RawMessage{"thinking": raw(`"high"`)}, map[string]json.RawMessage{"thinking": raw(`"high"`)}, true, true},
		{"raced", line("generation", "thinking", `"low"`), map[string]json.RawMessage{}, map[string]json.RawMessage{"thinking": raw(`"high"`)}, false, false},
		{"a refused threshold", line("collapse", "threshold", "2"), map[string]json.RawMessage{"threshold": raw(`0.5`)}, map[string]json.RawMessage{"threshold": raw(`0.5`)}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var value any
			_ = json.Unmarshal([]byte(tc.l.args[3]), &value)
			holdsOrBreaks(t, newOracle().settingsRead(tc.l, tc.got, tc.held, tc.l.args[2], value, tc.quiet), ruleSettings, tc.broken)
		})
	}
}
