package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/clock"
	"github.com/pico-go/pico/storage"
)

// Bounds of a trace file. A run's records are a few kilobytes at most (the
// final view) and its trace a few megabytes, so anything larger is not a
// trace; replay holds the file and the new run's trace in memory.
const (
	traceLineBytesMax = 64 << 20
	traceBytesMax     = 1 << 30
)

// damaged is a trace file that is not a whole trace, which replay cannot
// compare with a run: exit 2, not a difference.
func damaged(format string, args ...any) error {
	return usagef("damaged trace: "+format, args...)
}

// readTrace reads a trace file and checks it is whole as far as the file
// alone tells: at most traceBytesMax, every line a trace record of at most
// traceLineBytesMax, the last one ended by its newline (a cut mid-line has
// none). It returns the lines and the header record.
func readTrace(path string) ([][]byte, traceHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, traceHeader{}, &usageError{err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, traceBytesMax+1))
	switch {
	case err != nil:
		return nil, traceHeader{}, &usageError{err.Error()}
	case len(data) > traceBytesMax:
		return nil, traceHeader{}, damaged("larger than %d MiB, which no run writes", traceBytesMax>>20)
	case len(data) > 0 && data[len(data)-1] != '\n':
		return nil, traceHeader{}, damaged("line %d is cut short: the file does not end with a newline", bytes.Count(data, []byte("\n"))+1)
	}
	lines, err := traceLines(data)
	if err != nil {
		return nil, traceHeader{}, err
	}
	h, err := findHeader(lines)
	return lines, h, err
}

// traceLines splits a trace, which ends with a newline, into its lines,
// each a JSON trace record.
func traceLines(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	lines := bytes.Split(data[:len(data)-1], []byte("\n"))
	for n, line := range lines {
		if len(line) > traceLineBytesMax {
			return nil, damaged("line %d is longer than the %d MiB a trace record may take", n+1, traceLineBytesMax>>20)
		}
		var rec struct {
			K string `json:"k"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, damaged("line %d is not a trace record: %v", n+1, err)
		}
	}
	return lines, nil
}

// findHeader decodes a trace's header record.
func findHeader(lines [][]byte) (traceHeader, error) {
	for n, line := range lines {
		var rec struct {
			K      string          `json:"k"`
			Detail json.RawMessage `json:"detail"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.K != "header" {
			continue
		}
		var h traceHeader
		if err := json.Unmarshal(rec.Detail, &h); err != nil {
			return h, damaged("line %d: header: %v", n+1, err)
		}
		if h.Format != traceFormat {
			return h, usagef("line %d: trace format %d; this picosim reads format %d", n+1, h.Format, traceFormat)
		}
		return h, nil
	}
	return traceHeader{}, damaged("no header record in %d lines", len(lines))
}

// headerSpec is the run a header describes, refused as run refuses its
// flags (runSpec.check) when no run can carry it out.
func headerSpec(h traceHeader) (runSpec, error) {
	sc, ok := findScenario(h.Scenario)
	if !ok {
		return runSpec{}, usagef("invalid trace header: unknown scenario %q", h.Scenario)
	}
	spec := runSpec{sc: sc, seed: h.Seed, backend: h.Backend, strategy: h.Strategy, plan: h.Faults, drop: h.Drop}
	if h.Program != "" {
		p, err := parseProgram(h.Program)
		if err != nil {
			return spec, usagef("invalid trace header: %v", err)
		}
		spec.program = p
	}
	if _, err := spec.check(); err != nil {
		return spec, asHeader(err)
	}
	return spec, nil
}

// asHeader says a spec's refused field is the trace header's.
func asHeader(err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &fieldError{"invalid trace header: " + fe.field, fe.err}
	}
	return err
}

const replayHelp = `usage: picosim replay TRACE [--until STEP]

Re-runs the run a trace records and prints identical, or the first line that differs (exit 1). A
trace that is not whole (cut short, a line that is no record, a header no run can carry out) is
refused as damaged (exit 2).

  --until STEP   also print the run's state at scheduling step STEP (picosim show gives the steps):
                 virtual time, the live tasks with their status and running method, the root's
                 queued inbox, the last commit and the root watch's folded view
`

// replayMain re-runs a trace and compares the new trace line by line.
func replayMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("replay", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	until := fl.Int("until", 0, "print the run's state at this scheduling step")
	pos, err := parseAnywhere(fl, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, replayHelp)
		return 0
	case err != nil:
		return fail(stderr, "replay", err)
	case len(pos) == 0:
		return fail(stderr, "replay", usagef("missing TRACE; usage: picosim replay TRACE"))
	case len(pos) > 1:
		return fail(stderr, "replay", usagef("unexpected argument %q", pos[1]))
	}
	var state string
	diff, err := replayInspecting(ctx, pos[0], func(e *env, step int) {
		if *until > 0 && step == *until {
			state = e.stateAt(step)
		}
	})
	if err != nil {
		return fail(stderr, "replay", fmt.Errorf("%s: %w", pos[0], err))
	}
	if *until > 0 {
		if state == "" {
			return fail(stderr, "replay", usagef("--until %d: the run does not reach that step", *until))
		}
		fmt.Fprint(stdout, state)
	}
	if diff != "" {
		fmt.Fprint(stdout, diff)
		return exitFailed
	}
	fmt.Fprintln(stdout, "identical")
	return 0
}

// replay re-runs the trace at path and returns where the new trace first
// differs, or "" when it is identical.
func replay(ctx context.Context, path string) (string, error) {
	return replayInspecting(ctx, path, nil)
}

// replayInspecting is replay calling inspect after every scheduling
// decision of the re-run.
func replayInspecting(ctx context.Context, path string, inspect func(e *env, step int)) (string, error) {
	was, h, err := readTrace(path)
	if err != nil {
		return "", err
	}
	spec, err := headerSpec(h)
	if err != nil {
		return "", err
	}
	spec.inspect = inspect
	var again bytes.Buffer
	if _, err := runScenario(ctx, spec, &again); err != nil {
		return "", asHeader(err)
	}
	return compareTraces(was, bytes.Split(bytes.TrimSuffix(again.Bytes(), []byte("\n")), []byte("\n")))
}

// compareTraces finds the first line where the recorded trace and the
// replay differ. A recorded trace that is the replay's beginning, and no
// more, lost its end: damage, not a difference.
func compareTraces(was, now [][]byte) (string, error) {
	for i := range max(len(was), len(now)) {
		var a, b []byte
		if i < len(was) {
			a = was[i]
		}
		if i < len(now) {
			b = now[i]
		}
		switch {
		case a == nil && b != nil:
			return "", damaged("it ends after line %d, but the run it records goes on to line %d: records are missing", len(was), len(now))
		case !bytes.Equal(a, b):
			return fmt.Sprintf("line %d differs\n  trace:  %s\n  replay: %s\n", i+1, orEnd(a), orEnd(b)), nil
		}
	}
	return "", nil
}

func orEnd(line []byte) string {
	if line == nil {
		return "(end of trace)"
	}
	return string(line)
}

// stateAt describes the run as it stands at a scheduling step, for replay
// --until: read from the store and the process's own indexes, without
// waiting on anything (it runs inside the scheduler).
func (e *env) stateAt(step int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "at step %d, virtual time %s\n", step, e.s.Now().Sub(clock.Epoch))
	if e.h == nil {
		b.WriteString("no session is open\n")
		return b.String()
	}
	ctx := context.Background()
	store := e.h.Store()
	live := true
	tasks, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: c, Live: &live})
	})
	b.WriteString("live tasks:\n")
	switch {
	case err != nil:
		fmt.Fprintf(&b, "  (unreadable: %v)\n", err)
	case len(tasks) == 0:
		b.WriteString("  none\n")
	}
	for _, t := range tasks {
		running := "not running"
		if m, ok := e.oracle.active[t.ID]; ok {
			running = string(m) + " running"
		}
		mark := ""
		if t.Abort {
			mark = ", marked for abort"
		}
		bg := ""
		if t.Background {
			bg = ", background"
		}
		fmt.Fprintf(&b, "  %d %s in conversation %d: %s (%s%s%s)\n", t.ID, t.Kind, t.ConversationID, t.Status, running, mark, bg)
	}
	inbox, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return store.ReadList(ctx, agent.InboxList.In(root).Address, storage.ListQuery{Cursor: c})
	})
	b.WriteString("queued inbox of the root:\n")
	if err == nil && len(inbox) == 0 {
		b.WriteString("  empty\n")
	}
	for _, el := range inbox {
		var item agent.InboxItem
		_ = json.Unmarshal(el.Value, &item)
		fmt.Fprintf(&b, "  %d %s\n", el.ID, item.Mode)
	}
	if e.last != nil {
		fmt.Fprintf(&b, "last commit: %s\n", describeCommit(e.last))
	} else {
		b.WriteString("last commit: none\n")
	}
	if e.watch != nil {
		view, _ := json.Marshal(e.watch.View())
		fmt.Fprintf(&b, "root view: %s\n", view)
	}
	return b.String()
}
