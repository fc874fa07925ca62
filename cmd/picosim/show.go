package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// showRecord is the part of a trace record show reads.
type showRecord struct {
	Kind   string          `json:"k"`
	Step   int             `json:"step"`
	Actor  string          `json:"actor"`
	Point  string          `json:"point"`
	At     int64           `json:"atMs"`
	Error  string          `json:"error"`
	Detail json.RawMessage `json:"detail"`
}

// showOptions are picosim show's filters.
type showOptions struct {
	actor    string
	from, to int
	kinds    []string
}

const showHelp = `usage: picosim show TRACE [--actor NAME] [--from STEP] [--to STEP] [--kinds K1,K2] [--html FILE]

Prints a trace as a timeline: the actors as columns (a letter each, named in the legend), one line
per record — scheduling decision, commit, event, host action, fault, restart, model call, process
milestone, failure — with its step and virtual time. ● marks the actor of the line, │ the actors
alive then.

With --html, writes the trace instead as one self-contained page (no network) to FILE: the actors
as lanes, a mark per record in its actor's lane, a shape and colour per kind (the legend names
them), a column per record in the order the run went, under the step and virtual time it happened
at (virtual time stands still for most records, so it labels the axis rather than spacing it).
Clicking a mark shows its record: a commit's writes, an event's payload, a failure's message. The
failure (a failure record, or else the run's failing check) is named at the top, with its step
and actor, and is in view when the page opens.

  --actor NAME   only records of actors whose name contains NAME
  --from STEP    only records from scheduling step STEP on
  --to STEP      only records up to step STEP
  --kinds K,…    only these record kinds (run, commit, event, host, fault, restart, failure, time,
                 spawn, exit, faux.call, faux.end, proc.start, proc.exit, check, program, …)
  --html FILE    the page, to FILE (made 0600), instead of the timeline

Exit status: 0, 2 for a mistake of use, a damaged trace or a FILE that cannot be made, 3 when
writing FILE fails (a full disk).
`

func showMain(args []string, stdout, stderr io.Writer) int {
	var o showOptions
	fl := flag.NewFlagSet("show", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.StringVar(&o.actor, "actor", "", "only records of actors whose name contains this")
	fl.IntVar(&o.from, "from", 0, "first step")
	fl.IntVar(&o.to, "to", 0, "last step (0: the end)")
	kinds := fl.String("kinds", "", "record kinds, comma-separated")
	html := fl.String("html", "", "write the trace as an HTML page to this file instead")
	pos, err := parseAnywhere(fl, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, showHelp)
		return 0
	case err != nil:
		return fail(stderr, "show", err)
	case len(pos) != 1:
		return fail(stderr, "show", usagef("want one TRACE; usage: picosim show TRACE [FLAGS]"))
	}
	if *kinds != "" {
		o.kinds = strings.Split(*kinds, ",")
	}
	lines, _, err := readTrace(pos[0])
	if err != nil {
		return fail(stderr, "show", fmt.Errorf("%s: %w", pos[0], err))
	}
	if *html == "" {
		err = showTrace(stdout, lines, o)
	} else {
		var page []byte
		if page, err = showPage(lines, o); err == nil {
			if err := writePrivate(*html, page); err != nil {
				return fail(stderr, "show", &fieldError{"--html", err})
			}
		}
	}
	if err != nil {
		return fail(stderr, "show", fmt.Errorf("%s: %w", pos[0], err))
	}
	return 0
}

// timeline is a trace as show reads it: its records, and its actors in
// order of appearance.
type timeline struct {
	recs   []showRecord
	actors []string
	col    map[string]int // an actor's place in actors
}

func readTimeline(lines [][]byte) (timeline, error) {
	t := timeline{recs: make([]showRecord, len(lines)), col: map[string]int{}}
	for i, l := range lines {
		if err := json.Unmarshal(l, &t.recs[i]); err != nil {
			return t, damaged("line %d: %v", i+1, err)
		}
	}
	for _, r := range t.recs {
		if _, ok := t.col[r.Actor]; r.Actor != "" && !ok {
			t.col[r.Actor] = len(t.actors)
			t.actors = append(t.actors, r.Actor)
		}
	}
	return t, nil
}

// moment is where a record stands in its run. Spawns, exits, time moves
// and failures carry no step, and most records no time: they happened at
// the step and virtual time of the records before them.
type moment struct {
	step int
	now  int64
	// alive are the actors alive, by column, counting an actor that
	// spawns or runs in this record and one that exits in it: one slice,
	// changed between calls.
	alive []bool
}

// walk calls each with every record, in order, and its moment.
func (t timeline) walk(each func(i int, r showRecord, m moment)) {
	m := moment{alive: make([]bool, len(t.actors))}
	for i, r := range t.recs {
		if r.Step != 0 {
			m.step = r.Step
		}
		if r.At != 0 {
			m.now = r.At
		}
		c, has := t.col[r.Actor]
		if has && (r.Kind == "spawn" || r.Kind == "run") {
			m.alive[c] = true
		}
		each(i, r, m)
		if has && r.Kind == "exit" {
			m.alive[c] = false
		}
	}
}

// showTrace writes the timeline of a trace's lines.
func showTrace(w io.Writer, lines [][]byte, o showOptions) error {
	t, err := readTimeline(lines)
	if err != nil {
		return err
	}
	fmt.Fprint(w, showHeader(t.recs))
	fmt.Fprintf(w, "actors:")
	for i, a := range t.actors {
		fmt.Fprintf(w, " %c=%s", columnLetter(i), a)
	}
	letters := make([]rune, len(t.actors))
	for i := range letters {
		letters[i] = columnLetter(i)
	}
	fmt.Fprintf(w, "\n\n%6s %9s  %s  %s\n", "step", "time", string(letters), "what")
	t.walk(func(_ int, r showRecord, m moment) {
		if !o.keep(r, m.step) {
			return
		}
		lanes := make([]rune, len(t.actors))
		for i := range lanes {
			lanes[i] = ' '
			if m.alive[i] {
				lanes[i] = '│'
			}
		}
		if c, has := t.col[r.Actor]; has {
			lanes[c] = '●'
		}
		fmt.Fprintf(w, "%6d %9s  %s  %s\n", m.step, showTime(m.now), string(lanes), describe(r))
	})
	return nil
}

func (o showOptions) keep(r showRecord, step int) bool {
	switch {
	case o.actor != "" && !strings.Contains(r.Actor, o.actor):
		return false
	case step < o.from:
		return false
	case o.to > 0 && step > o.to:
		return false
	case len(o.kinds) > 0 && !slices.Contains(o.kinds, r.Kind):
		return false
	}
	return true
}

// columnLetter names column i: a–z, then A–Z, then digits, then '+'.
func columnLetter(i int) rune {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	if i < len(letters) {
		return rune(letters[i])
	}
	return '+'
}

func showTime(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// showHeader is the trace's first line: what run it is.
func showHeader(recs []showRecord) string {
	for _, r := range recs {
		if r.Kind == "header" {
			var h traceHeader
			if json.Unmarshal(r.Detail, &h) == nil {
				return fmt.Sprintf("trace: %s seed %d on %s (%s), faults %s, %d records\n", h.Scenario, h.Seed, h.Backend, h.Strategy, h.Faults.String(), len(recs))
			}
		}
	}
	return fmt.Sprintf("trace: %d records\n", len(recs))
}

// describe is a record's line of text.
func describe(r showRecord) string {
	d := map[string]any{}
	_ = json.Unmarshal(r.Detail, &d)
	switch r.Kind {
	case "run":
		return "runs at " + r.Point
	case "spawn", "exit":
		return r.Kind + " " + r.Actor
	case "time":
		return "time moves to " + showTime(r.At)
	case "commit":
		return describeCommit(r.Detail)
	case "event":
		s := fmt.Sprintf("event %v", d["type"])
		if e, ok := d["entry"].(map[string]any); ok {
			s += fmt.Sprintf(" %v (%v)", e["id"], e["kind"])
		}
		if id, ok := d["taskId"]; ok {
			s += fmt.Sprintf(" task %v", id)
		}
		return s
	case "host":
		s := fmt.Sprintf("host #%v: %v", d["index"], d["action"])
		if d["dropped"] == true {
			s += " (dropped)"
		}
		return s
	case "refused":
		return fmt.Sprintf("refused: %v: %s", d["action"], firstLine(fmt.Sprint(d["error"])))
	case "failure":
		return "FAILURE: " + firstLine(r.Error)
	case "check":
		if d["ok"] == true {
			return "check: ok"
		}
		return "check: FAILED: " + firstLine(fmt.Sprint(d["error"]))
	case "program":
		var text string
		_ = json.Unmarshal(r.Detail, &text)
		return fmt.Sprintf("program of %d lines", strings.Count(text, "\n")-2)
	case "header":
		return "header"
	}
	raw := string(r.Detail)
	if len(raw) > 100 {
		raw = raw[:99] + "…"
	}
	if raw == "" {
		return r.Kind
	}
	return r.Kind + " " + raw
}

// commitDetail is the part of a commit record's detail show reads.
type commitDetail struct {
	First  int64             `json:"first"`
	Last   int64             `json:"last"`
	Task   int64             `json:"task"`
	Writes []json.RawMessage `json:"writes"`
}

// describeCommit summarizes a commit: its range, the task that wrote it
// (scratch), and its writes by type, entries and tasks by kind.
func describeCommit(raw json.RawMessage) string {
	var c commitDetail
	if json.Unmarshal(raw, &c) != nil {
		return "commit ?"
	}
	var parts []string
	count := map[string]int{}
	var order []string
	for _, w := range c.Writes {
		label := writeLabel(w)
		if count[label] == 0 {
			order = append(order, label)
		}
		count[label]++
	}
	for _, l := range order {
		if count[l] > 1 {
			l += " ×" + strconv.Itoa(count[l])
		}
		parts = append(parts, l)
	}
	where := ""
	if c.Task != 0 {
		where = fmt.Sprintf(" (scratch of task %d)", c.Task)
	}
	return fmt.Sprintf("commit %d–%d%s: %s", c.First, c.Last, where, strings.Join(parts, ", "))
}

// writeLabel names one write of a commit: its type, entries and tasks by
// kind, settles and patches by status, an abort mark as one.
func writeLabel(raw json.RawMessage) string {
	var w struct {
		Type  string `json:"type"`
		Entry *struct {
			Kind string `json:"kind"`
		} `json:"entry"`
		Task *struct {
			Kind string `json:"kind"`
		} `json:"task"`
		Status string `json:"status"`
		Abort  bool   `json:"abort"`
	}
	_ = json.Unmarshal(raw, &w)
	switch {
	case w.Entry != nil:
		return "entry " + w.Entry.Kind
	case w.Task != nil:
		return "task " + w.Task.Kind
	case w.Type == "settle":
		return "settle " + w.Status
	case w.Type == "patch" && w.Abort:
		return "abort mark"
	case w.Type == "patch" && w.Status != "":
		return "patch " + w.Status
	}
	return w.Type
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
