package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// otelSpan is the part of the stdout exporter's span object the tests read.
type otelSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	StartTime string
	Events    []struct{ Name, Time string }
}

func readSpans(t *testing.T, path string) []otelSpan {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []otelSpan
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var s otelSpan
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	return out
}

// run --otel writes the run's spans: a pico.turn per input group with the
// turn's invocations directly under it, in virtual time, the same bytes
// for the same run.
func TestRunWritesTheRunsSpans(t *testing.T) {
	// The machine's zone must not show: every time is the runtime's.
	local := time.Local
	time.Local = time.FixedZone("UTC-8", -8*3600)
	t.Cleanup(func() { time.Local = local })
	dir := t.TempDir()
	var paths []string
	for i := range 2 {
		path := filepath.Join(dir, "spans"+string(rune('a'+i))+".json")
		var out, errb bytes.Buffer
		if code := runMain(context.Background(), []string{"input-while-busy", "--seed", "3", "--otel", path}, &out, &errb); code != 0 {
			t.Fatalf("run exited %d: %s%s", code, out.String(), errb.String())
		}
		paths = append(paths, path)
	}
	a, _ := os.ReadFile(paths[0])
	b, _ := os.ReadFile(paths[1])
	if !bytes.Equal(a, b) {
		t.Fatal("the same run wrote different spans")
	}
	spans := readSpans(t, paths[0])
	byID := map[string]otelSpan{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID] = s
	}
	var turns, invocations int
	for _, s := range spans {
		if !strings.HasPrefix(s.StartTime, "2026-01-01T") {
			t.Fatalf("%s starts at %s; want the simulated clock's day", s.Name, s.StartTime)
		}
		switch {
		case s.Name == "pico.turn":
			turns++
		case strings.HasPrefix(s.Name, "pico.task."):
			invocations++
			if p, ok := byID[s.Parent.SpanID]; ok && p.Name != "pico.turn" {
				t.Fatalf("%s is under %s; an invocation is under its turn or a root", s.Name, p.Name)
			}
		}
	}
	if turns < 2 || invocations < turns {
		t.Fatalf("%d turns, %d invocations; the scenario queues input that makes turns of its own", turns, invocations)
	}
}

// A --otel file that cannot be made is a mistake of use naming the flag,
// and nothing runs.
func TestRunRefusesAnUnwritableOTelFile(t *testing.T) {
	var out, errb bytes.Buffer
	path := filepath.Join(t.TempDir(), "missing", "spans.json")
	if code := runMain(context.Background(), []string{"basic-turn", "--otel", path}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d; want %d", code, exitUsage)
	}
	if !strings.Contains(errb.String(), "--otel") || out.Len() != 0 {
		t.Fatalf("stderr %q stdout %q; want an error naming --otel and no run", errb.String(), out.String())
	}
}

// A run whose commit fails records the failure on the commit's span, and
// that event too carries the runtime's time.
func TestRunSpansOfAFailedCommitAreInVirtualTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	var out, errb bytes.Buffer
	plan := `{"faults":[{"name":"f","kind":"fail","commit":6}]}`
	if code := runMain(context.Background(), []string{"parallel-tools", "--faults", plan, "--otel", path}, &out, &errb); code != 0 {
		t.Fatalf("run exited %d: %s%s", code, out.String(), errb.String())
	}
	var events int
	for _, s := range readSpans(t, path) {
		for _, e := range s.Events {
			events++
			if !strings.HasPrefix(e.Time, "2026-01-01T") {
				t.Fatalf("%s's event %s at %s; want the simulated clock's day", s.Name, e.Name, e.Time)
			}
		}
	}
	if events == 0 {
		t.Fatal("no span recorded the failed commit")
	}
}
