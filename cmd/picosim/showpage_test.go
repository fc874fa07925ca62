package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// pageTrace is the golden trace the page tests draw: a crash, a restart,
// a fault, host actions, events and a time move, nine actors.
var pageTrace = filepath.Join("..", "..", "fixtures", "traces", "provider-clear.crash.jsonl")

// hostileAction and hostileActor are trace text that must reach a reader
// as text: markup, a script's end, quotes, an ampersand.
const (
	hostileAction = `</script><script>window.pwned = 1</script><b>bold</b> & "quoted" 'too'`
	hostileActor  = `<i>actor</i>"'&`
)

// traceWith is pageTrace's lines, each edit applied: a line number (1 on)
// and the line that replaces it, or that goes after it when insert.
type traceEdit struct {
	line   int
	text   string
	insert bool
}

func traceWith(t *testing.T, edits ...traceEdit) [][]byte {
	t.Helper()
	data, err := os.ReadFile(pageTrace)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := traceLines(data)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(edits, func(a, b traceEdit) int { return b.line - a.line }) // from the end, so numbers hold
	for _, e := range edits {
		if e.insert {
			lines = slices.Insert(lines, e.line, []byte(e.text))
		} else {
			lines[e.line-1] = []byte(e.text)
		}
	}
	return lines
}

// failedCheck makes pageTrace's check (line 139, main at step 82) fail.
var failedCheck = traceEdit{line: 139, text: `{"k":"check","step":82,"actor":"main","atMs":1025,"detail":{"error":"the watch fold differs from a fresh capture","ok":false}}`}

// hostile adds a host action whose text is markup after line 37 (main's
// host action at step 19), so that it is line 38, and an event of an actor
// whose name is markup after line 38.
var hostile = []traceEdit{
	{line: 37, insert: true, text: fmt.Sprintf(`{"k":"host","step":19,"actor":"main","atMs":1025,"detail":{"index":9,"action":%q}}`, hostileAction)},
	{line: 38, insert: true, text: fmt.Sprintf(`{"k":"event","step":19,"actor":%q,"atMs":1025,"detail":{"type":%q}}`, hostileActor, hostileAction)},
}

// drawnMark is a mark as the page's markup has it.
type drawnMark struct {
	lane, class, kind string
	i, step, line     int
}

var (
	laneMarkup = regexp.MustCompile(`^ class="(lane[^"]*)" data-actor="([^"]*)">`)
	markMarkup = regexp.MustCompile(`<button type="button" class="(mark[^"]*)" data-i="(\d+)" data-kind="([^"]*)" data-step="(\d+)" data-line="(\d+)"`)
	dataBlock  = regexp.MustCompile(`(?s)<script type="application/json" id="trace-data">(.*?)</script>`)
)

// drawn reads a page's lanes (by their actors, in order) and marks (in
// the order of their records) from its markup, and the records its
// script shows.
func drawn(t *testing.T, page string) (lanes []string, marks []drawnMark, recs []pageRecord) {
	t.Helper()
	for _, chunk := range strings.Split(page, `<div class="lane`)[1:] {
		m := laneMarkup.FindStringSubmatch(" class=\"lane" + chunk)
		if m == nil {
			t.Fatalf("a lane without its actor: %.200s", chunk)
		}
		lane := html.UnescapeString(m[2])
		lanes = append(lanes, lane)
		for _, mm := range markMarkup.FindAllStringSubmatch(chunk, -1) {
			i, _ := strconv.Atoi(mm[2])
			step, _ := strconv.Atoi(mm[4])
			line, _ := strconv.Atoi(mm[5])
			marks = append(marks, drawnMark{lane: lane, class: mm[1], kind: html.UnescapeString(mm[3]), i: i, step: step, line: line})
		}
	}
	slices.SortFunc(marks, func(a, b drawnMark) int { return a.i - b.i })
	for n, m := range marks {
		if m.i != n {
			t.Fatalf("marks number their records %v; want 0 to %d, once each", marks, len(marks)-1)
		}
	}
	if got := strings.Count(page, `<button type="button" class="mark`); got != len(marks) {
		t.Fatalf("%d marks on the page, %d of them in a lane", got, len(marks))
	}
	block := dataBlock.FindStringSubmatch(page)
	if block == nil {
		t.Fatal("the page has no trace-data block")
	}
	if err := json.Unmarshal([]byte(block[1]), &recs); err != nil {
		t.Fatalf("the trace-data block is not JSON: %v", err)
	}
	if len(recs) != len(marks) {
		t.Fatalf("%d records for %d marks", len(recs), len(marks))
	}
	return lanes, marks, recs
}

func pageOf(t *testing.T, lines [][]byte, o showOptions) string {
	t.Helper()
	p, err := showPage(lines, o)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// The page of a trace draws a lane per actor, in order of appearance
// (and one for the simulator's own records, such as time moving), and a
// mark per record in the lane of its actor, carrying its kind, step and
// line; the details of each are its record's. It needs no network.
func TestShowPageDrawsALanePerActorAndAMarkPerRecord(t *testing.T) {
	lines := traceWith(t)
	tl, err := readTimeline(lines)
	if err != nil {
		t.Fatal(err)
	}
	p := pageOf(t, lines, showOptions{})
	lanes, marks, recs := drawn(t, p)
	if want := append([]string{schedulerLane}, tl.actors...); !slices.Equal(lanes, want) {
		t.Fatalf("lanes %q; want %q", lanes, want)
	}
	if len(marks) != len(lines) {
		t.Fatalf("%d marks for %d records", len(marks), len(lines))
	}
	steps := timelineSteps(t, lines, showOptions{})
	for n, m := range marks {
		r := tl.recs[n]
		lane := cmp.Or(r.Actor, schedulerLane)
		if m.line != n+1 || m.kind != r.Kind || m.lane != lane || m.step != steps[n] {
			t.Errorf("mark %d: line %d, %s in lane %q at step %d; want line %d, %s in lane %q at step %d (as show prints it)",
				n, m.line, m.kind, m.lane, m.step, n+1, r.Kind, lane, steps[n])
		}
		if recs[n].Summary != describe(r) || recs[n].Line != string(lines[n]) {
			t.Errorf("mark %d's details: %q, %q; want %q and the trace line", n, recs[n].Summary, recs[n].Line, describe(r))
		}
	}
	for _, want := range []string{`<p id="verdict" class="passed">`, `<ul id="legend">`, `<span class="swatch" data-kind="restart"></span>restart ×1`, `<aside id="details"`} {
		if !strings.Contains(p, want) {
			t.Errorf("the page has no %s", want)
		}
	}
	for _, external := range []string{"http:", "https:", "src=", "href=", "@import", "url("} {
		if strings.Contains(p, external) {
			t.Errorf("the page reaches out: it holds %q", external)
		}
	}
	if strings.Contains(p, "mark failure") {
		t.Error("a passing run's page marks a failure")
	}
}

// A commit's details are its writes, each labelled and laid out; an
// event's its payload.
func TestShowPageDetailsACommitsWritesAndAnEventsPayload(t *testing.T) {
	_, marks, recs := drawn(t, pageOf(t, traceWith(t), showOptions{}))
	var commit, event *pageRecord
	for n, m := range marks {
		switch {
		case m.kind == "commit" && m.step == 8:
			commit = &recs[n]
		case m.kind == "event" && event == nil:
			event = &recs[n]
		}
	}
	if commit == nil || event == nil {
		t.Fatal("no commit at step 8 or no event on the page")
	}
	var titles []string
	for _, s := range commit.Sections {
		titles = append(titles, s.Title)
	}
	want := []string{"write 1 of 5: list.append", "write 2 of 5: entry user", "write 3 of 5: list.remove", "write 4 of 5: value.set", "write 5 of 5: task generation"}
	if !slices.Equal(titles, want) || !strings.Contains(commit.Sections[1].Text, "\n        \"content\": \"explain everything\",") {
		t.Fatalf("the commit at step 8 details %q, its entry as %s; want %q, the entry indented", titles, commit.Sections[1].Text, want)
	}
	if len(event.Sections) != 1 || event.Sections[0].Title != "payload" || !strings.Contains(event.Sections[0].Text, `"type": "entry"`) {
		t.Fatalf("the first event details %+v; want its payload", event.Sections)
	}
}

// The failure is highlighted and named at the top with its step and
// actor: the run's failing check, or a failure record, which names no
// actor and is put in the lane of the actor that ran last. Filters that
// leave it out say so.
func TestShowPageHighlightsTheFailure(t *testing.T) {
	deadlock := traceEdit{line: 101, insert: true, text: `{"k":"failure","error":"deadlock at 1.025s:\n  main waits on the line"}`}
	for _, tc := range []struct {
		name    string
		edits   []traceEdit
		o       showOptions
		verdict string
		kind    string // of the failure's mark, "" for none
		lane    string
		line    int
	}{
		{"a failing check", []traceEdit{failedCheck}, showOptions{},
			"failed at step 82 in actor main: the watch fold differs from a fresh capture", "check", "main", 139},
		{"a failure record", []traceEdit{deadlock}, showOptions{},
			"failed at step 60 in actor task23.execute: deadlock at 1.025s:", "failure", "task23.execute", 102},
		{"a failure the filters leave out", []traceEdit{failedCheck}, showOptions{kinds: []string{"commit"}},
			"failed at step 82 in actor main: the watch fold differs from a fresh capture (the filters leave its record out)", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pageOf(t, traceWith(t, tc.edits...), tc.o)
			if want := `<p id="verdict" class="failed">` + tc.verdict + "</p>"; !strings.Contains(p, want) {
				t.Errorf("the page does not open with %s", want)
			}
			_, marks, recs := drawn(t, p)
			var failures []drawnMark
			for _, m := range marks {
				if strings.Contains(m.class, "failure") {
					failures = append(failures, m)
				}
			}
			if tc.kind == "" {
				if len(failures) != 0 || strings.Contains(p, `<div class="failure-band"`) {
					t.Fatalf("failure marks %v; want none", failures)
				}
				return
			}
			if len(failures) != 1 || failures[0].kind != tc.kind || failures[0].lane != tc.lane || failures[0].line != tc.line {
				t.Fatalf("failure marks %v; want one, the %s of line %d in lane %s", failures, tc.kind, tc.line, tc.lane)
			}
			if !strings.Contains(p, `<div class="lane failing" data-actor="`+tc.lane+`">`) || !strings.Contains(p, `<div class="failure-band"`) {
				t.Error("the failing lane or column is not highlighted")
			}
			if s := recs[failures[0].i].Sections; len(s) == 0 || s[0].Class != "message" {
				t.Errorf("the failure's details %+v; want its message first", s)
			}
		})
	}
}

// Trace text is text on the page, wherever it lands: in a lane's name, a
// mark's title, the verdict, and the JSON the script reads, which still
// decodes to the very text.
func TestShowPageEscapesHostileText(t *testing.T) {
	failing := failedCheck
	failing.text = strings.Replace(failing.text, "the watch fold differs from a fresh capture", strings.ReplaceAll(hostileAction, `"`, `\"`), 1)
	p := pageOf(t, traceWith(t, append(hostile, failing)...), showOptions{})
	if n, m := strings.Count(p, "<script"), strings.Count(p, "</script>"); n != 2 || m != 2 {
		t.Fatalf("%d script starts and %d ends; want the page's own two", n, m)
	}
	for _, raw := range []string{"<b>bold", "<i>actor", `window.pwned = 1</script>`} {
		if strings.Contains(p, raw) {
			t.Errorf("the page holds %q as markup", raw)
		}
	}
	lanes, marks, recs := drawn(t, p)
	if !slices.Contains(lanes, hostileActor) {
		t.Errorf("lanes %q; want one for %q", lanes, hostileActor)
	}
	found := 0
	for n, m := range marks {
		if m.kind == "host" && recs[n].Summary == "host #9: "+hostileAction {
			found++
		}
		if m.lane == hostileActor && strings.Contains(recs[n].Sections[0].Text, strings.ReplaceAll(hostileAction, `"`, `\"`)) {
			found++
		}
	}
	if found != 2 {
		t.Errorf("the hostile host action and event read back %d times of 2 from the page's data", found)
	}
	title := regexp.MustCompile(`data-kind="host" data-step="19" data-line="38" style="[^"]*" title="([^"]*)"`).FindStringSubmatch(p)
	if title == nil || html.UnescapeString(title[1]) != "step 19: host #9: "+hostileAction {
		t.Errorf("the hostile host mark's title is %q", title)
	}
	if !strings.Contains(p, html.EscapeString(hostileAction)+"</p>") {
		t.Error("the verdict does not name the hostile failure, escaped")
	}
}

// The page keeps the records text show keeps with the same filters, in
// the same order, at the same steps; a lane for each actor --actor names.
func TestShowPageKeepsWhatTheFiltersKeep(t *testing.T) {
	lines := traceWith(t)
	for _, o := range []showOptions{
		{kinds: []string{"commit", "host", "fault", "restart", "check"}, from: 10, to: 60},
		{actor: "main", kinds: []string{"host", "commit"}},
		{actor: "task", from: 20},
		{kinds: []string{"time"}},
	} {
		lanes, marks, recs := drawn(t, pageOf(t, lines, o))
		var text bytes.Buffer
		if err := showTrace(&text, lines, o); err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")[4:]
		steps := timelineSteps(t, lines, o)
		if len(marks) != len(rows) || len(marks) == 0 {
			t.Fatalf("%s: %d marks for the timeline's %d lines", o, len(marks), len(rows))
		}
		for n, m := range marks {
			if m.step != steps[n] || !strings.HasSuffix(rows[n], "  "+recs[n].Summary) || (o.kinds != nil && !slices.Contains(o.kinds, m.kind)) {
				t.Errorf("%s: mark %d, %s at step %d, %q; the timeline has %q", o, n, m.kind, m.step, recs[n].Summary, rows[n])
			}
		}
		for _, l := range lanes {
			if !strings.Contains(l, o.actor) && l != schedulerLane {
				t.Errorf("%s: a lane for %s", o, l)
			}
		}
	}
}

// timelineSteps are the steps text show prints for the records o keeps.
func timelineSteps(t *testing.T, lines [][]byte, o showOptions) []int {
	t.Helper()
	var text bytes.Buffer
	if err := showTrace(&text, lines, o); err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, row := range strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")[4:] {
		n, err := strconv.Atoi(strings.Fields(row)[0])
		if err != nil {
			t.Fatalf("timeline row %q: %v", row, err)
		}
		steps = append(steps, n)
	}
	return steps
}

// show --html writes the page, 0600, and prints nothing; a missing
// trace, a damaged one and a FILE that cannot be made are each one line
// naming the culprit, exit 2.
func TestShowHTMLWritesThePageAndRefusesMistakes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "page.html")
	var stdout, stderr bytes.Buffer
	if code := showMain([]string{pageTrace, "--html", out, "--kinds", "commit"}, &stdout, &stderr); code != 0 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := pageOf(t, traceWith(t), showOptions{kinds: []string{"commit"}}); string(written) != want || !utf8.Valid(written) {
		t.Fatal("show --html wrote another page than the trace's with its filters")
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != fileMode {
		t.Fatalf("the page's mode: %v %v; want %v", st.Mode(), err, os.FileMode(fileMode))
	}
	damaged := filepath.Join(dir, "damaged.jsonl")
	if err := os.WriteFile(damaged, []byte("{\"k\":\"run\"}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(dir, "missing.jsonl"), "--html", out}, "missing.jsonl"},
		{[]string{damaged, "--html", out}, "damaged.jsonl: damaged trace: line 2"},
		{[]string{pageTrace, "--html", filepath.Join(dir, "no", "such", "dir", "page.html")}, "--html: open " + filepath.Join(dir, "no", "such", "dir", "page.html")},
		{[]string{pageTrace, "--html"}, "flag needs an argument: -html"},
	} {
		stdout.Reset()
		stderr.Reset()
		code := showMain(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("show %q: exit %d, stderr %q; want exit 2 and one line naming %s", tc.args, code, stderr.String(), tc.want)
		}
	}
}
