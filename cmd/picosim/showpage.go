package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"strings"
)

// picosim show --html draws a trace as one self-contained page: a lane per
// actor, a mark per record in its actor's lane. Virtual time stands still
// for most of a run (a turn's hundred records can share one millisecond),
// so the page's x axis is the trace's order: each record shown has a
// column of its own, left to right as the run went, and the axis above
// the lanes labels the steps and the virtual time wherever it moves.
//
// The marks are drawn here, as HTML; the page's script only shows a
// clicked mark's record, which the page carries as JSON, and scrolls the
// failure into view. What the details say (a commit's writes labelled and
// indented, a failure's whole message) is decided here too.

const (
	// pageColumnPx is the width of a record's column.
	pageColumnPx = 14
	// pageStepLabelGapColumns is the least distance between two step
	// labels on the axis, so that they do not overlap.
	pageStepLabelGapColumns = 6
	// pageTimeLabelGapColumns is the most distance between two virtual
	// time labels: where time stands still the axis says so again, for
	// a reader scrolled away from where it last moved.
	pageTimeLabelGapColumns = 40
)

// schedulerLane holds the records no actor made: the simulator's own,
// such as time moving.
const schedulerLane = "(scheduler)"

//go:embed showpage.html
var showPageText string

var showPageTemplate = template.Must(template.New("page").Parse(showPageText))

// page is what the page template draws.
type page struct {
	Title   string
	Verdict pageVerdict
	Filters string // the filters that left records out, "" for none
	Steps   []axisLabel
	Times   []axisLabel
	Moves   []int // where virtual time moves: the left of the column
	Lanes   []pageLane
	Legend  []legendItem
	WidthPx int
	// FailurePx is the middle of the failing record's column, -1 when
	// the page does not show it.
	FailurePx int
	Records   []pageRecord // by mark, embedded as JSON
}

// pageVerdict is what the run came to, said at the top of the page.
type pageVerdict struct {
	Failed, Passed bool
	Step           int
	Actor          string
	Message        string // its first line
	Shown          bool   // the filters kept the failing record
}

type axisLabel struct {
	LeftPx int
	Text   string
}

type pageLane struct {
	Actor   string
	Failing bool // the failure's mark is in this lane
	Lives   []span
	Marks   []pageMark
}

// span is a stretch of a lane where its actor is alive.
type span struct{ LeftPx, WidthPx int }

type pageMark struct {
	I, Step, Line int
	CenterPx      int // the middle of its column
	Kind, Summary string
	Failure       bool
}

type legendItem struct {
	Kind, Meaning string
	Count         int
}

// pageRecord is what the details panel shows of a mark's record.
type pageRecord struct {
	Summary  string        `json:"summary"`
	Where    string        `json:"where"`
	Sections []pageSection `json:"sections"`
	Line     string        `json:"line"` // the trace line as it stands
}

// pageSection is a titled block of the details: a commit's write, an
// event's payload, a failure's message, a record's detail.
type pageSection struct {
	Class string `json:"class"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// kindMeaning says what each record kind the legend may show is.
var kindMeaning = map[string]string{
	"run":        "a scheduling decision: the actor runs on from a point",
	"commit":     "a batch committed, with its writes",
	"event":      "an event a watcher received",
	"host":       "a host action of the program",
	"refused":    "a host action the harness refused",
	"fault":      "an injected fault firing",
	"restart":    "the session reopened after a crash",
	"failure":    "the simulator failing the run (panic, deadlock, step limit)",
	"check":      "the run's verdict",
	"spawn":      "an actor starting",
	"exit":       "an actor ending",
	"time":       "virtual time moving",
	"faux.call":  "a call to the faux model",
	"faux.fetch": "the faux model fetching its answer",
	"faux.end":   "the faux model's stream ending",
	"proc.start": "a fake process starting",
	"proc.exit":  "a fake process exiting",
	"proc.kill":  "a fake process killed",
	"proc.crash": "a fake process crashing",
	"header":     "the run's identity",
	"program":    "the program the run plays",
	"view":       "the watcher's final view",
}

// showPage renders a trace's lines as the page, keeping the records o
// keeps.
func showPage(lines [][]byte, o showOptions) ([]byte, error) {
	t, err := readTimeline(lines)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := showPageTemplate.Execute(&buf, buildPage(t, lines, o)); err != nil {
		panic("show: the page template does not take its page: " + err.Error())
	}
	return buf.Bytes(), nil
}

func buildPage(t timeline, lines [][]byte, o showOptions) page {
	p := page{Title: strings.TrimSuffix(showHeader(t.recs), "\n"), Filters: o.String(), FailurePx: -1}
	failing, message := failingRecord(t.recs)
	p.Verdict.Failed, p.Verdict.Message = failing >= 0, firstLine(message)
	// The lanes: one per actor --actor keeps, by the actor's column, and
	// the scheduler's for records no actor made.
	lanes := make([]*pageLane, len(t.actors))
	for c, a := range t.actors {
		if strings.Contains(a, o.actor) {
			lanes[c] = &pageLane{Actor: a}
		}
	}
	scheduler := &pageLane{Actor: schedulerLane}
	lives := newLifelines(len(t.actors))
	var ax axis
	count := map[string]int{}
	var kinds []string
	lastRan := ""
	t.walk(func(i int, r showRecord, m moment) {
		if r.Kind == "run" {
			lastRan = r.Actor
		}
		if c, ok := checkOf(r); ok && c.OK {
			p.Verdict.Passed = failing < 0
		}
		// A failure record names no actor: it goes in the lane of the
		// actor that had the baton (the last to run), the one that
		// panicked if one did.
		actor, who := r.Actor, r.Actor
		if r.Kind == "failure" && actor == "" && lastRan != "" {
			actor, who = lastRan, lastRan+" (the last to run: the record names no actor)"
		}
		if i == failing {
			p.Verdict.Step, p.Verdict.Actor = m.step, actor
		}
		kept := r
		kept.Actor = actor
		if !o.keep(kept, m.step) {
			return
		}
		col := len(p.Records)
		ax.column(col, m)
		lives.column(col, m.alive, lanes)
		lane := scheduler
		if c, has := t.col[actor]; has {
			lane = lanes[c]
		} else {
			who = "no actor: the simulator's own"
		}
		mark := pageMark{I: col, Step: m.step, Line: i + 1, CenterPx: col*pageColumnPx + pageColumnPx/2, Kind: r.Kind, Summary: describe(r), Failure: i == failing}
		if mark.Failure {
			p.Verdict.Shown, p.FailurePx, lane.Failing = true, mark.CenterPx, true
		}
		lane.Marks = append(lane.Marks, mark)
		if count[r.Kind] == 0 {
			kinds = append(kinds, r.Kind)
		}
		count[r.Kind]++
		p.Records = append(p.Records, pageRecord{
			Summary:  mark.Summary,
			Where:    fmt.Sprintf("line %d · step %d · %s · virtual time %s", i+1, m.step, who, showTime(m.now)),
			Sections: sections(r),
			Line:     string(lines[i]),
		})
	})
	lives.end(lanes)
	if len(scheduler.Marks) > 0 {
		p.Lanes = append(p.Lanes, *scheduler)
	}
	for _, l := range lanes {
		if l != nil {
			p.Lanes = append(p.Lanes, *l)
		}
	}
	for _, k := range kinds {
		p.Legend = append(p.Legend, legendItem{Kind: k, Meaning: kindMeaning[k], Count: count[k]})
	}
	p.Steps, p.Times, p.Moves = ax.steps, ax.times, ax.moves
	p.WidthPx = (len(p.Records) + 1) * pageColumnPx
	return p
}

// axis labels the columns: a step where a new one starts (if the last
// label is far enough back), the virtual time where it moves (and again
// every pageTimeLabelGapColumns).
type axis struct {
	steps, times         []axisLabel
	moves                []int
	step                 int
	now                  int64
	stepLabel, timeLabel int // the columns of the last labels
}

func (a *axis) column(col int, m moment) {
	left := col * pageColumnPx
	if col == 0 || m.step != a.step && col-a.stepLabel >= pageStepLabelGapColumns {
		a.steps = append(a.steps, axisLabel{left, strconv.Itoa(m.step)})
		a.stepLabel = col
	}
	if col > 0 && m.now != a.now {
		a.moves = append(a.moves, left)
	}
	if col == 0 || m.now != a.now || col-a.timeLabel >= pageTimeLabelGapColumns {
		a.times = append(a.times, axisLabel{left, showTime(m.now)})
		a.timeLabel = col
	}
	a.step, a.now = m.step, m.now
}

// lifelines draws the spans of each lane where its actor is alive,
// column by column.
type lifelines struct {
	open []int // the column an actor's span began at, by actor; -1: none open
	last []int // the last column it was alive in
}

func newLifelines(actors int) *lifelines {
	l := &lifelines{open: make([]int, actors), last: make([]int, actors)}
	for c := range l.open {
		l.open[c] = -1
	}
	return l
}

// column extends the spans of the actors alive at col and ends the others'.
func (l *lifelines) column(col int, alive []bool, lanes []*pageLane) {
	for c, lane := range lanes {
		switch {
		case lane == nil:
		case alive[c]:
			if l.open[c] < 0 {
				l.open[c] = col
			}
			l.last[c] = col
		case l.open[c] >= 0:
			lane.Lives = append(lane.Lives, life(l.open[c], l.last[c]))
			l.open[c] = -1
		}
	}
}

// end ends the spans still open after the last column.
func (l *lifelines) end(lanes []*pageLane) {
	for c, lane := range lanes {
		if lane != nil && l.open[c] >= 0 {
			lane.Lives = append(lane.Lives, life(l.open[c], l.last[c]))
		}
	}
}

// life is the span from the middle of column from to that of column to.
func life(from, to int) span {
	return span{LeftPx: from*pageColumnPx + pageColumnPx/2, WidthPx: (to - from) * pageColumnPx}
}

// failingRecord is the record that failed the run and its message: the
// first failure record (the simulator's own: a panic, a deadlock, the step
// limit) or else the first check that did not hold; -1 when none did.
func failingRecord(recs []showRecord) (int, string) {
	for i, r := range recs {
		if r.Kind == "failure" {
			return i, r.Error
		}
	}
	for i, r := range recs {
		if msg, failed := checkFailed(r); failed {
			return i, msg
		}
	}
	return -1, ""
}

// checkDetail is a check record's detail: whether the run's checks held.
type checkDetail struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// checkOf decodes a check record; false when r is none.
func checkOf(r showRecord) (checkDetail, bool) {
	var c checkDetail
	return c, r.Kind == "check" && json.Unmarshal(r.Detail, &c) == nil
}

// checkFailed reports whether r is a check that did not hold, and why.
func checkFailed(r showRecord) (string, bool) {
	c, ok := checkOf(r)
	return c.Error, ok && !c.OK
}

// sections are what the details show of a record besides its line: a
// commit's writes, each labelled; an event's payload; a failure's whole
// message; a program's text; any other record's detail.
func sections(r showRecord) []pageSection {
	s := []pageSection{} // a JSON array, never null, for the script
	if r.Error != "" {
		s = append(s, pageSection{"message", "message", r.Error})
	}
	if msg, failed := checkFailed(r); failed {
		s = append(s, pageSection{"message", "the check that failed", msg})
	}
	var c commitDetail
	var program string
	switch {
	case len(r.Detail) == 0:
	case r.Kind == "commit" && json.Unmarshal(r.Detail, &c) == nil:
		for j, w := range c.Writes {
			s = append(s, pageSection{"write", fmt.Sprintf("write %d of %d: %s", j+1, len(c.Writes), writeLabel(w)), indented(w)})
		}
	case r.Kind == "event":
		s = append(s, pageSection{"payload", "payload", indented(r.Detail)})
	case r.Kind == "program" && json.Unmarshal(r.Detail, &program) == nil:
		s = append(s, pageSection{"program", "program", program})
	default:
		s = append(s, pageSection{"detail", "detail", indented(r.Detail)})
	}
	return s
}

// indented is JSON laid out two spaces an indent, as it stands when it
// does not parse. The page indents here, not in its script, so that
// numbers stay exact: a seed is a uint64, beyond a JavaScript number.
func indented(raw []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// String is the filters as their flags, "" for none.
func (o showOptions) String() string {
	var f []string
	if o.actor != "" {
		f = append(f, "--actor "+o.actor)
	}
	if o.from != 0 {
		f = append(f, "--from "+strconv.Itoa(o.from))
	}
	if o.to != 0 {
		f = append(f, "--to "+strconv.Itoa(o.to))
	}
	if len(o.kinds) > 0 {
		f = append(f, "--kinds "+strings.Join(o.kinds, ","))
	}
	return strings.Join(f, " ")
}
