package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// readHeader finds a trace's header record.
func readHeader(data []byte) (traceHeader, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		var rec struct {
			K      string          `json:"k"`
			Detail json.RawMessage `json:"detail"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return traceHeader{}, fmt.Errorf("line %d is not a trace record: %v", n, err)
		}
		if rec.K != "header" {
			continue
		}
		var h traceHeader
		if err := json.Unmarshal(rec.Detail, &h); err != nil {
			return h, fmt.Errorf("line %d: header: %v", n, err)
		}
		if h.Format != traceFormat {
			return h, fmt.Errorf("line %d: trace format %d; this picosim reads format %d", n, h.Format, traceFormat)
		}
		return h, nil
	}
	return traceHeader{}, fmt.Errorf("no header record")
}

// replayMain re-runs a trace and compares the new trace line by line.
func replayMain(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, "usage: picosim replay TRACE\n\nRe-runs the run a trace records and prints identical, or the first line that differs.\n")
		if len(args) == 1 {
			return 0
		}
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "picosim: replay:", err)
		return 2
	}
	h, err := readHeader(data)
	if err != nil {
		fmt.Fprintf(stderr, "picosim: replay: %s: %v\n", args[0], err)
		return 2
	}
	sc, ok := findScenario(h.Scenario)
	if !ok {
		fmt.Fprintf(stderr, "picosim: replay: %s: unknown scenario %q\n", args[0], h.Scenario)
		return 2
	}
	var again bytes.Buffer
	if err := h.Faults.Validate(); err != nil {
		fmt.Fprintf(stderr, "picosim: replay: %s: header: %v\n", args[0], err)
		return 2
	}
	spec := runSpec{sc: sc, seed: h.Seed, backend: h.Backend, strategy: h.Strategy, plan: h.Faults, drop: h.Drop}
	if _, err := runScenario(spec, &again); err != nil {
		fmt.Fprintf(stderr, "picosim: replay: %s: %v\n", args[0], err)
		return 2
	}
	was, now := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")), bytes.Split(bytes.TrimRight(again.Bytes(), "\n"), []byte("\n"))
	for i := 0; i < max(len(was), len(now)); i++ {
		var a, b []byte
		if i < len(was) {
			a = was[i]
		}
		if i < len(now) {
			b = now[i]
		}
		if !bytes.Equal(a, b) {
			fmt.Fprintf(stdout, "line %d differs\n  trace:  %s\n  replay: %s\n", i+1, orEnd(a), orEnd(b))
			return 1
		}
	}
	fmt.Fprintln(stdout, "identical")
	return 0
}

func orEnd(line []byte) string {
	if line == nil {
		return "(end of trace)"
	}
	return string(line)
}
