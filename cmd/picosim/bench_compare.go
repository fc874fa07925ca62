package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// `picosim bench --compare PEER.json` (issue 20): the peer's benchmark
// lines (shared/peer/bench.mjs) beside ours, run now with each line's
// settings or read from --ours, as the ratio table.

// compareLinesMax bounds the lines a comparison file may hold; compareLineBytesMax
// one line (a bench line is a few hundred bytes).
const (
	compareLinesMax     = 1000
	compareLineBytesMax = 64 << 10
)

// benchLine is one JSON line of bench.mjs or of `picosim bench --json`:
// what the comparison reads. Line is where it was in its file.
type benchLine struct {
	Impl         string   `json:"impl"`
	Backend      string   `json:"backend"`
	Fsync        bool     `json:"fsync"`
	Turns        int      `json:"turns"`
	ToolsPerTurn int      `json:"toolsPerTurn"`
	ResetEvery   int      `json:"resetEvery"`
	Done         int      `json:"done"`
	WallMs       float64  `json:"wallMs"`
	CPUUserMs    float64  `json:"cpuUserMs"`
	CPUSysMs     float64  `json:"cpuSysMs"`
	TurnMs       lineMs   `json:"turnMs"`
	RssMB        float64  `json:"rssMB"`
	DiskBytes    *int64   `json:"diskBytes"`
	ReopenMs     *float64 `json:"reopenMs"`
	Workload     string   `json:"workload"`
	Line         int      `json:"-"`
	// Runs is how many lines of one file with these settings this line is
	// the median of (medianLines); 1 for a line alone.
	Runs int `json:"-"`
}

type lineMs struct {
	P50 flexFloat `json:"p50"`
	P99 flexFloat `json:"p99"`
}

// flexFloat is a number that bench.mjs prints as a string ("22.040", from
// toFixed) and we print as a number.
type flexFloat float64

func (f *flexFloat) UnmarshalJSON(raw []byte) error {
	s := string(raw)
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("%s is not a number", raw)
	}
	*f = flexFloat(v)
	return nil
}

// benchLineFields are the fields a line must have to be compared; the
// peer leaves diskBytes and reopenMs out on memory.
var benchLineFields = []string{"impl", "backend", "fsync", "turns", "toolsPerTurn", "resetEvery", "done", "wallMs", "cpuUserMs", "cpuSysMs", "turnMs", "rssMB"}

// BenchLineError is a line of a comparison file that is not a bench
// line: not JSON, a field missing, a value out of range (Line 0: the
// file holds none).
type BenchLineError struct {
	File string
	Line int
	Err  error
}

func (e *BenchLineError) Error() string {
	if e.Line == 0 { // the file as a whole
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: line %d: %v", e.File, e.Line, e.Err)
}
func (e *BenchLineError) Unwrap() error { return e.Err }

// CompareMismatchError is a peer line that no line of ours matches in
// the settings the two must share.
type CompareMismatchError struct {
	Ours string
	Peer benchLine
	// Near is the line of ours with the peer's backend and turns whose
	// other settings differ, when there is one; Field names the first
	// that differs.
	Near  *benchLine
	Field string
}

func (e *CompareMismatchError) Error() string {
	msg := fmt.Sprintf("%s: no line has the settings of the peer's line %d (%s)", e.Ours, e.Peer.Line, e.Peer.settings())
	if e.Near != nil {
		msg += fmt.Sprintf("; line %d differs in %s", e.Near.Line, e.Field)
	}
	return msg
}

func (l benchLine) settings() string {
	return fmt.Sprintf("backend %s, fsync %t, %d turns, %d tools, reset every %d", l.Backend, l.Fsync, l.Turns, l.ToolsPerTurn, l.ResetEvery)
}

// differs names the first setting in which l and m differ ("" if none).
func (l benchLine) differs(m benchLine) string {
	switch {
	case l.Backend != m.Backend:
		return "backend"
	case l.Fsync != m.Fsync:
		return "fsync"
	case l.Turns != m.Turns:
		return "turns"
	case l.ToolsPerTurn != m.ToolsPerTurn:
		return "toolsPerTurn"
	case l.ResetEvery != m.ResetEvery:
		return "resetEvery"
	}
	return ""
}

// readBenchLines reads a file of bench lines, one JSON object a line;
// blank lines are skipped.
func readBenchLines(path string) ([]benchLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseBenchLines(path, f)
}

func parseBenchLines(name string, r io.Reader) ([]benchLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), compareLineBytesMax)
	var lines []benchLine
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if len(lines) == compareLinesMax {
			return nil, &BenchLineError{name, n, fmt.Errorf("more than %d lines", compareLinesMax)}
		}
		l, err := parseBenchLine(raw)
		if err != nil {
			return nil, &BenchLineError{name, n, err}
		}
		l.Line, l.Runs = n, 1
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, &BenchLineError{name, n + 1, err}
	}
	if len(lines) == 0 {
		return nil, &BenchLineError{name, 0, errors.New("no bench line")}
	}
	return lines, nil
}

func parseBenchLine(raw []byte) (benchLine, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return benchLine{}, fmt.Errorf("not a JSON object: %v", err)
	}
	for _, f := range benchLineFields {
		if _, ok := fields[f]; !ok {
			return benchLine{}, fmt.Errorf("no %q field", f)
		}
	}
	var l benchLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return benchLine{}, err
	}
	switch {
	case !slices.Contains(backends, l.Backend):
		return l, fmt.Errorf("backend %q: want memory, jsonl or sqlite", l.Backend)
	case l.Turns < 1 || l.Turns > benchTurnsMax:
		return l, fmt.Errorf("turns %d: want 1 to %d", l.Turns, benchTurnsMax)
	case l.ToolsPerTurn < 0 || l.ToolsPerTurn > benchToolsMax:
		return l, fmt.Errorf("toolsPerTurn %d: want 0 to %d", l.ToolsPerTurn, benchToolsMax)
	case l.ResetEvery < 0:
		return l, fmt.Errorf("resetEvery %d: want 0 or more", l.ResetEvery)
	case l.Done != l.Turns:
		return l, fmt.Errorf("done %d of %d turns: an unfinished run does not compare", l.Done, l.Turns)
	case l.Workload != "" && l.Workload != workloadTurns:
		return l, fmt.Errorf("workload %q: only the peer's workload compares", l.Workload)
	}
	return l, nil
}

// medianLines reduces each run of lines with the same settings to one
// line, its measures each the median of theirs (the mean of the middle two
// for an even count), in the order the settings first appear: a file of
// repeated runs (compare-bench.sh's REPEAT) compares as its medians, which
// a noisy machine moves less than any one run. A byte count or a reopen
// time is the median of the lines that have one.
func medianLines(lines []benchLine) []benchLine {
	var out []benchLine
	var groups [][]benchLine
	for _, l := range lines {
		i := slices.IndexFunc(out, func(o benchLine) bool { return o.differs(l) == "" })
		if i < 0 {
			out, groups = append(out, l), append(groups, nil)
			i = len(out) - 1
		}
		groups[i] = append(groups[i], l)
	}
	for i, g := range groups {
		m := &out[i]
		m.Runs = len(g)
		measure := func(f func(benchLine) float64) float64 {
			vs := make([]float64, len(g))
			for j, l := range g {
				vs[j] = f(l)
			}
			return median(vs)
		}
		m.WallMs = measure(func(l benchLine) float64 { return l.WallMs })
		m.CPUUserMs = measure(func(l benchLine) float64 { return l.CPUUserMs })
		m.CPUSysMs = measure(func(l benchLine) float64 { return l.CPUSysMs })
		m.TurnMs.P50 = flexFloat(measure(func(l benchLine) float64 { return float64(l.TurnMs.P50) }))
		m.TurnMs.P99 = flexFloat(measure(func(l benchLine) float64 { return float64(l.TurnMs.P99) }))
		m.RssMB = measure(func(l benchLine) float64 { return l.RssMB })
		var disk, reopen []float64
		for _, l := range g {
			if l.DiskBytes != nil {
				disk = append(disk, float64(*l.DiskBytes))
			}
			if l.ReopenMs != nil {
				reopen = append(reopen, *l.ReopenMs)
			}
		}
		if len(disk) > 0 {
			d := int64(math.Round(median(disk)))
			m.DiskBytes = &d
		}
		if len(reopen) > 0 {
			r := median(reopen)
			m.ReopenMs = &r
		}
	}
	return out
}

// median is the middle of vs (the mean of the middle two for an even
// count); it sorts vs.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// comparison is a peer line, ours with its settings and, for a memory
// line when asked, ours on SQLite.
type comparison struct {
	peer, ours benchLine
	sqlite     *benchLine
}

// matchOurs pairs every peer line with the line of ours that has its
// settings, and also with our SQLite line of the same settings when there
// is one (a memory line's SQLite run syncs nothing, a JSONL line's syncs as
// it does).
func matchOurs(oursName string, peer, ours []benchLine) ([]comparison, error) {
	var out []comparison
	for _, p := range peer {
		i := slices.IndexFunc(ours, func(o benchLine) bool { return p.differs(o) == "" })
		if i < 0 {
			e := &CompareMismatchError{Ours: oursName, Peer: p}
			if j := slices.IndexFunc(ours, func(o benchLine) bool { return o.Backend == p.Backend && o.Turns == p.Turns }); j >= 0 {
				e.Near, e.Field = &ours[j], p.differs(ours[j])
			}
			return nil, e
		}
		cmp := comparison{peer: p, ours: ours[i]}
		want := p
		want.Backend = "sqlite"
		if j := slices.IndexFunc(ours, func(o benchLine) bool { return want.differs(o) == "" }); j >= 0 {
			cmp.sqlite = &ours[j]
		}
		out = append(out, cmp)
	}
	return out, nil
}

// compareMain is `picosim bench --compare PEER.json [--ours OURS.json]`.
func compareMain(ctx context.Context, c benchConfig, stdout, stderr io.Writer) int {
	peer, err := readBenchLines(c.Compare)
	if err != nil {
		return fail(stderr, "bench", compareInputError("--compare", err))
	}
	peer = medianLines(peer)
	var cmps []comparison
	if c.Ours != "" {
		ours, err := readBenchLines(c.Ours)
		if err != nil {
			return fail(stderr, "bench", compareInputError("--ours", err))
		}
		if cmps, err = matchOurs(c.Ours, peer, medianLines(ours)); err != nil {
			return fail(stderr, "bench", &fieldError{"--ours", err})
		}
	} else if cmps, err = runOurs(ctx, c, peer, stderr); err != nil {
		return fail(stderr, "bench", benchError(ctx, err))
	}
	if err := printComparison(stdout, cmps); err != nil {
		return exitFailed
	}
	return 0
}

// compareInputError is a comparison file that cannot be read or is not
// bench lines: a mistake of use, exit 2, naming the flag and the file.
func compareInputError(flagName string, err error) error {
	return &fieldError{flagName, err}
}

// runOurs runs, for every peer line, our bench with its settings (and on
// SQLite for a memory line when asked), one after the other.
func runOurs(ctx context.Context, c benchConfig, peer []benchLine, stderr io.Writer) ([]comparison, error) {
	var cmps []comparison
	for _, p := range peer {
		if p.Fsync && p.Backend == "memory" {
			return nil, &fieldError{"--compare", &BenchLineError{c.Compare, p.Line, errors.New("fsync applies to the jsonl backend only")}}
		}
		if err := backendAvailable(p.Backend); err != nil {
			return nil, err
		}
		ours, err := runLike(ctx, p, p.Backend, p.Fsync, stderr)
		if err != nil {
			return nil, err
		}
		cmp := comparison{peer: p, ours: ours}
		if c.CompareSQLite {
			if err := backendAvailable("sqlite"); err != nil {
				return nil, err
			}
			sq, err := runLike(ctx, p, "sqlite", p.Fsync, stderr)
			if err != nil {
				return nil, err
			}
			cmp.sqlite = &sq
		}
		cmps = append(cmps, cmp)
	}
	return cmps, nil
}

// runLike runs our bench with the settings of peer line p on backend.
func runLike(ctx context.Context, p benchLine, backend string, fsync bool, stderr io.Writer) (benchLine, error) {
	c := benchConfig{Turns: p.Turns, Tools: p.ToolsPerTurn, ResetEvery: p.ResetEvery, Backend: backend, Fsync: fsync}
	var turns atomic.Int64
	c.progress = func(done, _ int) { turns.Store(int64(done)) }
	stop := startProgress(stderr, "bench", func() string {
		return fmt.Sprintf("%s: %d/%d turns", c.Backend, turns.Load(), c.Turns)
	})
	r, err := runBench(ctx, c)
	stop()
	if err != nil {
		return benchLine{}, fmt.Errorf("our run for the peer's line %d: %w", p.Line, err)
	}
	// Ours goes through its own JSON, so that a line read back with
	// --ours compares exactly as one run now.
	raw, err := json.Marshal(r)
	if err != nil {
		return benchLine{}, err
	}
	l, err := parseBenchLine(raw)
	l.Runs = 1
	return l, err
}

// compareRow is one row of the table: a measure of one workload on both
// sides, formatted, with the ratio in words.
type compareRow struct{ workload, peer, ours, ratio string }

// comparisonRows are the rows for each comparison: wall time,
// CPU, turn latency p50 and p99, RSS, and on a durable backend bytes per
// turn on disk and the cold reopen; then our SQLite against our memory.
func comparisonRows(cmps []comparison) []compareRow {
	var rows []compareRow
	for _, c := range cmps {
		p, o := c.peer, c.ours
		label := p.label()
		rows = append(rows,
			compareRow{label, fmtMs(p.WallMs), fmtMs(o.WallMs), timeRatio(p.WallMs, o.WallMs)},
			compareRow{label + ": CPU user+sys", fmtMs(p.CPUUserMs + p.CPUSysMs), fmtMs(o.CPUUserMs + o.CPUSysMs), timeRatio(p.CPUUserMs+p.CPUSysMs, o.CPUUserMs+o.CPUSysMs)},
			compareRow{label + ": turn p50", fmtMs(float64(p.TurnMs.P50)), fmtMs(float64(o.TurnMs.P50)), timeRatio(float64(p.TurnMs.P50), float64(o.TurnMs.P50))},
			compareRow{label + ": turn p99", fmtMs(float64(p.TurnMs.P99)), fmtMs(float64(o.TurnMs.P99)), timeRatio(float64(p.TurnMs.P99), float64(o.TurnMs.P99))},
			compareRow{label + ": RSS", fmtMB(p.RssMB), fmtMB(o.RssMB), sizeRatio(p.RssMB, o.RssMB)},
		)
		if p.DiskBytes != nil && o.DiskBytes != nil {
			pb, ob := float64(*p.DiskBytes)/float64(p.Turns), float64(*o.DiskBytes)/float64(o.Turns)
			rows = append(rows, compareRow{label + ": bytes per turn on disk", fmtKB(pb), fmtKB(ob), sizeRatio(pb, ob)})
		}
		if p.ReopenMs != nil && o.ReopenMs != nil {
			rows = append(rows, compareRow{label + ": cold reopen", fmtMs(*p.ReopenMs), fmtMs(*o.ReopenMs), timeRatio(*p.ReopenMs, *o.ReopenMs)})
		}
		if s := c.sqlite; s != nil {
			rows = append(rows, compareRow{s.label(), "(none)", fmtMs(s.WallMs), timeRatio(o.WallMs, s.WallMs) + " than our " + backendName[o.Backend]})
		}
	}
	return rows
}

func printComparison(w io.Writer, cmps []comparison) error {
	var b strings.Builder
	b.WriteString("| workload | TS pico3 | pico-go | ratio |\n|---|---|---|---|\n")
	for _, r := range comparisonRows(cmps) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.workload, r.peer, r.ours, r.ratio)
	}
	if runs := medianRuns(cmps); runs != "" {
		b.WriteString("\n" + runs + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// medianRuns says, under the table, how many runs its figures are the
// medians of, when any is of more than one: "" otherwise.
func medianRuns(cmps []comparison) string {
	var peer, ours []int
	for _, c := range cmps {
		peer = append(peer, c.peer.Runs)
		ours = append(ours, c.ours.Runs)
		if c.sqlite != nil {
			ours = append(ours, c.sqlite.Runs)
		}
	}
	if slices.Max(peer) <= 1 && slices.Max(ours) <= 1 {
		return ""
	}
	span := func(ns []int) string {
		lo, hi := slices.Min(ns), slices.Max(ns)
		if lo == hi {
			return strconv.Itoa(lo)
		}
		return fmt.Sprintf("%d to %d", lo, hi)
	}
	return fmt.Sprintf("Each figure is the median of the runs with its settings: %s of the peer's, %s of ours.", span(peer), span(ours))
}

// backendName is how the table names a backend.
var backendName = map[string]string{"memory": "memory", "jsonl": "JSONL", "sqlite": "SQLite"}

// label names a line's workload as the table does.
func (l benchLine) label() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s turns", group(int64(l.Turns)))
	if l.ToolsPerTurn > 0 {
		fmt.Fprintf(&b, " × %d tools", l.ToolsPerTurn)
	} else {
		b.WriteString(", no tools")
	}
	if l.ResetEvery > 0 {
		fmt.Fprintf(&b, ", reset every %d", l.ResetEvery)
	}
	b.WriteString(", " + backendName[l.Backend])
	if l.Fsync {
		b.WriteString(" (fsync)")
	}
	return b.String()
}

// timeRatio says how ours compares with the peer's time: a shorter time
// is faster.
func timeRatio(peer, ours float64) string {
	switch {
	case peer <= 0 || ours <= 0:
		return "—"
	case peer >= ours:
		return fmtRatio(peer/ours) + " faster"
	}
	return fmtRatio(ours/peer) + " slower"
}

// sizeRatio says how ours compares with the peer's size.
func sizeRatio(peer, ours float64) string {
	switch {
	case peer <= 0 || ours <= 0:
		return "—"
	case ours > peer:
		return fmtRatio(ours/peer) + " larger"
	}
	return fmtRatio(peer/ours) + " smaller"
}

// fmtRatio prints a ratio with one decimal below 100 (9.0×, 11.7×) and
// whole above (140×).
func fmtRatio(r float64) string {
	if r >= 99.95 {
		return group(int64(math.Round(r))) + "×"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "×"
}

// fmtMs prints milliseconds: whole with thousands grouped from 100 ms,
// one decimal from 10, two below.
func fmtMs(ms float64) string {
	switch {
	case ms >= 99.95:
		return group(int64(math.Round(ms))) + " ms"
	case ms >= 9.995:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
}

func fmtMB(mb float64) string { return strconv.FormatFloat(mb, 'f', 1, 64) + " MB" }

// fmtKB prints bytes in kilobytes of 1,000 bytes, one decimal.
func fmtKB(b float64) string { return strconv.FormatFloat(b/1000, 'f', 1, 64) + " KB" }

// group prints n with commas between thousands.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
