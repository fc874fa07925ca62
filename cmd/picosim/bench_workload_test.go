package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// workloadCounts are what a workload of n turns must have done, whatever
// the machine: turns, provider and tool calls (the bench's own tools,
// not the built-in subagent tool), and the workload's own counts.
type workloadCounts struct {
	turns, providerCalls, toolCalls, forks, historicalReads, children, jobs, cancelled, collapses, history int
}

func wantCounts(name string, n int) workloadCounts {
	switch name {
	case "short":
		return workloadCounts{turns: n, providerCalls: n}
	case "short-tools":
		return workloadCounts{turns: n, providerCalls: 2 * n, toolCalls: 2 * n}
	case "parallel-tools":
		return workloadCounts{turns: n, providerCalls: 2 * n, toolCalls: 4 * n}
	case "sequential-tools":
		return workloadCounts{turns: n, providerCalls: 5 * n, toolCalls: 4 * n}
	case "streaming":
		return workloadCounts{turns: n, providerCalls: 2 * n, toolCalls: n}
	case "deep-forks":
		return workloadCounts{turns: n, providerCalls: 2 * n, toolCalls: 2 * n, forks: n - 2, historicalReads: 3 * n}
	case "children": // the root's call and answer, the child's answer
		return workloadCounts{turns: n, providerCalls: 3 * n, children: n, jobs: childrenLiveJobs}
	case "live-jobs":
		return workloadCounts{turns: n, providerCalls: 2 * n, toolCalls: 2 * n, jobs: liveJobsPerTurn * n}
	case "queued": // the tools, the answer after the steer, the followUp's answer
		return workloadCounts{turns: n, providerCalls: 3 * n, toolCalls: 2 * n, cancelled: 2 * n}
	case "collapse":
		c := (n - 1) / collapseEveryDefault
		return workloadCounts{turns: n, providerCalls: 2*n + c, toolCalls: 2 * n, collapses: c}
	case "history-growth": // to n and to 10n, growthSteadyTurns after each
		t := growthFactor*n + growthSteadyTurns
		return workloadCounts{turns: t, providerCalls: 2 * t, toolCalls: 2 * t, history: 2}
	}
	return workloadCounts{}
}

// workloadTestTurns are the turns each workload runs in the tests: few,
// so that go test stays quick; collapse needs two periods, and one
// streaming turn is 128 KB of output.
func workloadTestTurns(name string) int {
	switch name {
	case "collapse":
		return 2*collapseEveryDefault + 1
	case "history-growth":
		return 2
	case "streaming":
		return 1
	}
	return 4
}

func runWorkloadJSON(t *testing.T, args ...string) benchResult {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), append(args, "--json"), &out, &errOut); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
	}
	var got benchResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	return got
}

func TestEveryWorkloadDoesItsCountsOnEveryBackend(t *testing.T) {
	for _, w := range workloads {
		if w.name == workloadTurns {
			continue // TestBenchRunsThePeerWorkloadAndPrintsThePeerFields
		}
		for _, backend := range backends {
			t.Run(w.name+"/"+backend, func(t *testing.T) {
				if backendAvailable(backend) != nil {
					t.Skip("no cgo: no sqlite")
				}
				n := workloadTestTurns(w.name)
				got := runWorkloadJSON(t, "--workload", w.name, "--turns", strconv.Itoa(n), "--backend", backend)
				c := workloadCounts{turns: got.Turns, providerCalls: got.ProviderCalls, toolCalls: got.ToolCalls, forks: got.Forks,
					historicalReads: got.HistoricalReads, children: got.Children, jobs: got.Jobs, cancelled: got.Cancelled,
					collapses: got.Collapses, history: len(got.History)}
				if want := wantCounts(w.name, n); c != want || got.Done != got.Turns || got.Workload != w.name {
					t.Fatalf("counts %+v (done %d, workload %q); want %+v", c, got.Done, got.Workload, want)
				}
				if got.Queries == 0 || got.Rows == 0 || got.Commits == 0 || got.Writes < got.Commits || got.AllocsPerTurn <= 0 {
					t.Fatalf("storage counts %+v, %.0f allocations per turn; want some of each", got.storeCounts, got.AllocsPerTurn)
				}
				if backend != "memory" && (got.DiskBytesOpen <= 0 || got.DiskBytes <= 0 || got.ReopenQueries == 0) {
					t.Fatalf("disk %d open, %d closed, reopen %d queries; want some of each", got.DiskBytesOpen, got.DiskBytes, got.ReopenQueries)
				}
			})
		}
	}
}

// The counting store counts each read as a query and each record it
// returns as a row: the deep-forks workload reads every entry of its
// forks' transcripts, so its rows are at least the entries it paged.
func TestDeepForksRowsCountTheHistoryItRead(t *testing.T) {
	got := runWorkloadJSON(t, "--workload", "deep-forks", "--turns", "6")
	if got.HistoricalEntries == 0 || got.Rows < got.HistoricalEntries {
		t.Fatalf("%d rows decoded, %d historical entries paged; want rows ≥ entries > 0", got.Rows, got.HistoricalEntries)
	}
}

func TestBenchWorkloadListNamesEveryWorkload(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--workload", "list"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(workloads) {
		t.Fatalf("%d lines for %d workloads:\n%s", len(lines), len(workloads), out.String())
	}
	for i, w := range workloads {
		if !strings.HasPrefix(lines[i], w.name+" ") {
			t.Errorf("line %d %q; want it to name %s", i+1, lines[i], w.name)
		}
	}
}

func TestBenchWorkloadMistakesAreTypedAndExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "bogus"}, `picosim: bench: --workload: unknown workload "bogus" (picosim bench --workload list names them)`},
		{[]string{"--workload", "short", "--tools", "2"}, "picosim: bench: --tools: the short workload fixes it"},
		{[]string{"--workload", "collapse", "--reset-every", "5"}, "picosim: bench: --reset-every: the collapse workload fixes it"},
		{[]string{"--workload", "history-growth", "--turns", "200000"}, "picosim: bench: --turns 200000: history-growth runs 10 times that; want at most 100000"},
	} {
		var out, errOut bytes.Buffer
		if code := benchMain(context.Background(), c.args, &out, &errOut); code != 2 || errOut.String() != c.want+"\n" {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
	_, err := parseBench([]string{"--workload", "bogus"}, &bytes.Buffer{})
	var ue *UnknownWorkloadError
	if !errors.As(err, &ue) || ue.Name != "bogus" {
		t.Fatalf("error %v; want an *UnknownWorkloadError naming bogus", err)
	}
}

func TestBenchTextNamesTheWorkloadAllocationsAndStorageCounts(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--workload", "history-growth", "--turns", "2", "--backend", "jsonl"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"history-growth: 30 turns on jsonl", "allocations per turn ", " queries (", " rows decoded (", " commits (",
		"bytes open (scratch and WAL included)", "history of 2 turns: rss ", "history of 20 turns: rss ", "as history grew 10×"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// BenchmarkWorkloads runs every §10.3 workload (bench_workload.go, the
// runner `picosim bench --workload` uses) at its default size on every
// backend and reports per turn: wall ms, allocations, queries, rows
// decoded, commits and closed bytes on disk, and the p50 and p99 turn
// latency.
//
//	go test ./cmd/picosim -run XXX -bench Workloads -benchtime 1x
//	go test ./cmd/picosim -run XXX -bench 'Workloads/deep-forks/sqlite' -benchtime 1x
func BenchmarkWorkloads(b *testing.B) {
	b.Cleanup(setGCPercent(goDefaultGCPercent)) // as picosim bench measures
	for _, w := range workloads {
		for _, backend := range backends {
			b.Run(w.name+"/"+backend, func(b *testing.B) {
				if backendAvailable(backend) != nil {
					b.Skip("no cgo: no sqlite")
				}
				c, err := parseBench([]string{"--workload", w.name, "--backend", backend}, &bytes.Buffer{})
				if err != nil {
					b.Fatal(err)
				}
				var sum benchResult
				var p50, p99 float64
				for range b.N {
					r, err := runBench(context.Background(), c)
					if err != nil {
						b.Fatalf("%s on %s: %v", w.name, backend, err)
					}
					sum.Turns += r.Turns
					sum.WallMs += r.WallMs
					sum.AllocsPerTurn += r.AllocsPerTurn * float64(r.Turns)
					sum.Queries += r.Queries
					sum.Rows += r.Rows
					sum.Commits += r.Commits
					sum.DiskBytes += r.DiskBytes
					p50, p99 = p50+r.TurnMs.P50, p99+r.TurnMs.P99
					for _, h := range r.History {
						b.ReportMetric(h.RssMB, "rssMB@"+strconv.Itoa(h.Turns))
					}
				}
				turns, n := float64(sum.Turns), float64(b.N)
				b.ReportMetric(sum.WallMs/turns, "ms/turn")
				b.ReportMetric(sum.AllocsPerTurn/turns, "allocs/turn")
				b.ReportMetric(float64(sum.Queries)/turns, "queries/turn")
				b.ReportMetric(float64(sum.Rows)/turns, "rows/turn")
				b.ReportMetric(float64(sum.Commits)/turns, "commits/turn")
				if backend != "memory" {
					b.ReportMetric(float64(sum.DiskBytes)/turns, "bytes/turn")
				}
				b.ReportMetric(p50/n, "p50-ms")
				b.ReportMetric(p99/n, "p99-ms")
			})
		}
	}
}
