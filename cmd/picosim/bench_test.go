package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage/jsonl"
)

func TestBenchRunsThePeerWorkloadAndPrintsThePeerFields(t *testing.T) {
	for _, backend := range []string{"memory", "jsonl", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := benchMain(context.Background(), []string{"--turns", "20", "--reset-every", "7", "--backend", backend, "--json"}, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			var got map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("output %q: %v", out.String(), err)
			}
			for _, field := range []string{"impl", "backend", "fsync", "turns", "toolsPerTurn", "resetEvery", "done", "providerCalls", "toolCalls",
				"wallMs", "cpuUserMs", "cpuSysMs", "turnMs", "rssMB", "heapUsedMB", "contextEntries", "diskBytes", "diskFiles", "reopenMs"} {
				if _, ok := got[field]; !ok {
					t.Errorf("field %q missing from %s", field, out.String())
				}
			}
			// Two resets (after turns 7 and 14) leave the last six turns of five
			// entries each, the reset and a new baseline in context.
			if got["done"] != 20.0 || got["providerCalls"] != 40.0 || got["toolCalls"] != 40.0 || got["contextEntries"] != 32.0 {
				t.Fatalf("counts in %s; want 20 done, 40 provider calls, 40 tool calls, 32 context entries", out.String())
			}
			if backend != "memory" && (got["diskBytes"].(float64) <= 0 || got["reopenMs"].(float64) <= 0) {
				t.Fatalf("a disk backend reported no bytes or no reopen: %s", out.String())
			}
		})
	}
}

// --cpuprofile and --memprofile write pprof profiles (gzipped protocol
// buffers) of the run, the allocation one naming the harness's functions.
func TestBenchWritesItsProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--turns", "20", "--cpuprofile", cpu, "--memprofile", mem}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, p := range []string{cpu, mem} {
		data, err := os.ReadFile(p)
		if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Fatalf("%s: %d bytes, %v; want a gzipped profile", p, len(data), err)
		}
	}
	data, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(raw); err != nil || !bytes.Contains(body, []byte("github.com/pico-go/pico/core.")) {
		t.Fatalf("the allocation profile (%v) names no function of the harness", err)
	}
}

// §10.3's frequent compaction plus cold reopen: every collapse lands a
// summary before the next turn, the context stays short, and the session
// reopens cold from its files.
func TestBenchCollapsesEveryNTurnsAndReopens(t *testing.T) {
	for _, backend := range []string{"jsonl", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := benchMain(context.Background(), []string{"--turns", "25", "--collapse-every", "5", "--backend", backend, "--json"}, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			var got benchResult
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("output %q: %v", out.String(), err)
			}
			// Four collapses (before turns 5, 10, 15, 20), each a summarizer
			// call; after the last the context is the summary, the turn it
			// kept, its fresh baseline and the four turns since.
			if got.Done != 25 || got.Collapses != 4 || got.ProviderCalls != 54 || got.ContextEntries > 30 || got.ReopenMs <= 0 {
				t.Fatalf("result %s; want 25 turns, 4 collapses, 54 provider calls, a short context and a reopen", out.String())
			}
		})
	}
}

func TestBenchMistakesAreOneLineAndExitTwo(t *testing.T) {
	for _, args := range [][]string{{"--tools", "9"}, {"--backend", "postgres"}, {"--turns", "0"}, {"--collapse-every", "-1"}, {"--fsync"}, {"--bogus"}, {"extra"}} {
		var out, errOut bytes.Buffer
		code := benchMain(context.Background(), args, &out, &errOut)
		if code != 2 || strings.Count(errOut.String(), "\n") != 1 || !strings.HasPrefix(errOut.String(), "picosim: bench:") && !strings.HasPrefix(errOut.String(), "picosim: flag") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut.String())
		}
	}
	var out bytes.Buffer
	if code := benchMain(context.Background(), []string{"--help"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "usage: picosim bench") {
		t.Fatalf("--help: exit %d, %q", code, out.String())
	}
}

// BenchmarkScenarioRuns measures what one fuzzed run costs: every scenario
// once per iteration on memory, with the seed's drawn fault plan, as fuzz
// runs them. runs/s is fuzz's schedules per second on one core.
func BenchmarkScenarioRuns(b *testing.B) {
	batches := map[string]int{}
	for _, sc := range scenarios {
		res, err := runScenario(context.Background(), runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}, nil)
		if err != nil || !res.OK {
			b.Fatalf("%s: %v %s", sc.name, err, res.Error)
		}
		batches[sc.name] = res.Batches
	}
	b.ResetTimer()
	for i := range b.N {
		for _, sc := range scenarios {
			spec := fuzzSpec(sc, uint64(i+1), "memory", batches[sc.name])
			if res, err := runScenario(context.Background(), spec, nil); err != nil || !res.OK {
				b.Fatalf("%s: %v %s", spec.command(), err, res.Error)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(scenarios))/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkGeneratedRuns runs generated programs on memory, one seed an
// iteration, as fuzz does (no replay): runs/s per core.
//
//	go test ./cmd/picosim -run XXX -bench GeneratedRuns
func BenchmarkGeneratedRuns(b *testing.B) {
	sc, _ := findScenario("generated")
	for i := range b.N {
		seed := uint64(i + 1)
		if _, err := runScenario(context.Background(), fuzzSpec(sc, seed, "memory", 40), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkColdOpenJSONL opens the files of 2,000 bounded faux turns (the
// issue's cold-reopen row, about 15 MB) cold, store alone: replay time and
// MB/s.
//
//	go test ./cmd/picosim -run XXX -bench ColdOpenJSONL -count 5
func BenchmarkColdOpenJSONL(b *testing.B) {
	b.Cleanup(setGCPercent(goDefaultGCPercent)) // as picosim bench measures
	dir := b.TempDir()
	c, err := parseBench([]string{"--turns", "2000", "--reset-every", "50", "--backend", "jsonl", "--dir", dir}, &bytes.Buffer{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := runBench(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "session.jsonl")
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Size())
	b.ResetTimer()
	for b.Loop() {
		s, err := jsonl.Open(context.Background(), path, jsonl.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBasicTurnRuns is issue 20's measure of the simulated runtime:
// fuzzed runs of basic-turn alone on memory, runs/s on one core.
//
//	go test ./cmd/picosim -run XXX -bench BasicTurnRuns -cpu 1
func BenchmarkBasicTurnRuns(b *testing.B) {
	sc, _ := findScenario("basic-turn")
	res, err := runScenario(context.Background(), runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}, nil)
	if err != nil || !res.OK {
		b.Fatalf("basic-turn: %v %s", err, res.Error)
	}
	b.ResetTimer()
	for i := range b.N {
		spec := fuzzSpec(sc, uint64(i+1), "memory", res.Batches)
		if res, err := runScenario(context.Background(), spec, nil); err != nil || !res.OK {
			b.Fatalf("%s: %v %s", spec.command(), err, res.Error)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
