package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Fixed lines: the peer's as bench.mjs prints them (turn latencies as
// strings, no disk fields on memory, a "node" field we do not read), ours
// as picosim bench --json does, with the figures of issue 20's table.
const (
	comparePeerLines = `{"impl":"pico3@pi-agent-core-0.87.1","node":"v20.20.2","backend":"memory","fsync":false,"turns":200,"toolsPerTurn":2,"resetEvery":0,"done":200,"providerCalls":400,"toolCalls":400,"wallMs":2746,"cpuUserMs":2500,"cpuSysMs":100,"turnMs":{"p50":"12.500","p90":"30.000","p99":"40.000","max":"75.549"},"rssMB":110.5,"heapUsedMB":34,"contextEntries":1001}

{"impl":"pico3@pi-agent-core-0.87.1","node":"v20.20.2","backend":"jsonl","fsync":false,"turns":2000,"toolsPerTurn":2,"resetEvery":50,"done":2000,"providerCalls":4000,"toolCalls":4000,"wallMs":27802,"cpuUserMs":25000,"cpuSysMs":2000,"turnMs":{"p50":"12.000","p90":"30.000","p99":"50.000","max":"90.000"},"rssMB":120,"heapUsedMB":40,"contextEntries":251,"diskBytes":10000000,"diskFiles":2,"reopenMs":493}
`
	compareOurLines = `{"impl":"pico-go","backend":"jsonl","fsync":false,"turns":2000,"toolsPerTurn":2,"resetEvery":50,"done":2000,"providerCalls":4000,"toolCalls":4000,"wallMs":3078,"cpuUserMs":2800,"cpuSysMs":400,"turnMs":{"p50":1.4,"p90":2,"p99":4,"max":9},"rssMB":45,"heapUsedMB":3,"contextEntries":251,"diskBytes":15000000,"diskFiles":2,"reopenMs":418,"allocsPerTurn":3467}
{"impl":"pico-go","backend":"sqlite","fsync":false,"turns":200,"toolsPerTurn":2,"resetEvery":0,"done":200,"providerCalls":400,"toolCalls":400,"wallMs":1404,"cpuUserMs":1000,"cpuSysMs":300,"turnMs":{"p50":6,"p90":8,"p99":12,"max":20},"rssMB":50,"heapUsedMB":3,"contextEntries":1001,"diskBytes":3000000,"diskFiles":3,"reopenMs":20}
{"impl":"pico-go","backend":"sqlite","fsync":false,"turns":2000,"toolsPerTurn":2,"resetEvery":50,"done":2000,"providerCalls":4000,"toolCalls":4000,"wallMs":7695,"cpuUserMs":6000,"cpuSysMs":1500,"turnMs":{"p50":3,"p90":5,"p99":9,"max":20},"rssMB":30,"heapUsedMB":3,"contextEntries":251,"diskBytes":12000000,"diskFiles":3,"reopenMs":8}
{"impl":"pico-go","backend":"memory","fsync":false,"turns":200,"toolsPerTurn":2,"resetEvery":0,"done":200,"providerCalls":400,"toolCalls":400,"wallMs":195,"cpuUserMs":180,"cpuSysMs":10,"turnMs":{"p50":0.9,"p90":1.2,"p99":2.5,"max":3},"rssMB":40,"heapUsedMB":3,"contextEntries":1001,"diskBytes":0,"diskFiles":0,"reopenMs":0}
`
	compareTable = `| workload | TS pico3 | pico-go | ratio |
|---|---|---|---|
| 200 turns × 2 tools, memory | 2,746 ms | 195 ms | 14.1× faster |
| 200 turns × 2 tools, memory: CPU user+sys | 2,600 ms | 190 ms | 13.7× faster |
| 200 turns × 2 tools, memory: turn p50 | 12.5 ms | 0.90 ms | 13.9× faster |
| 200 turns × 2 tools, memory: turn p99 | 40.0 ms | 2.50 ms | 16.0× faster |
| 200 turns × 2 tools, memory: RSS | 110.5 MB | 40.0 MB | 2.8× smaller |
| 200 turns × 2 tools, SQLite | (none) | 1,404 ms | 7.2× slower than our memory |
| 2,000 turns × 2 tools, reset every 50, JSONL | 27,802 ms | 3,078 ms | 9.0× faster |
| 2,000 turns × 2 tools, reset every 50, JSONL: CPU user+sys | 27,000 ms | 3,200 ms | 8.4× faster |
| 2,000 turns × 2 tools, reset every 50, JSONL: turn p50 | 12.0 ms | 1.40 ms | 8.6× faster |
| 2,000 turns × 2 tools, reset every 50, JSONL: turn p99 | 50.0 ms | 4.00 ms | 12.5× faster |
| 2,000 turns × 2 tools, reset every 50, JSONL: RSS | 120.0 MB | 45.0 MB | 2.7× smaller |
| 2,000 turns × 2 tools, reset every 50, JSONL: bytes per turn on disk | 5.0 KB | 7.5 KB | 1.5× larger |
| 2,000 turns × 2 tools, reset every 50, JSONL: cold reopen | 493 ms | 418 ms | 1.2× faster |
| 2,000 turns × 2 tools, reset every 50, SQLite | (none) | 7,695 ms | 2.5× slower than our JSONL |
`
)

func writeLines(t *testing.T, name, lines string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBenchCompareMatchesOursToThePeersLinesAndPrintsTheRatios(t *testing.T) {
	peer, ours := writeLines(t, "peer.json", comparePeerLines), writeLines(t, "ours.json", compareOurLines)
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--compare", peer, "--ours", ours}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if out.String() != compareTable {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), compareTable)
	}
}

func TestBenchRatiosSayFasterSlowerLargerAndSmaller(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{timeRatio(2746, 195), "14.1× faster"},
		{timeRatio(195, 2746), "14.1× slower"},
		{timeRatio(27460, 195), "141× faster"},
		{timeRatio(1, 1234), "1,234× slower"},
		{timeRatio(100, 100), "1.0× faster"},
		{timeRatio(0, 100), "—"},
		{sizeRatio(5000, 7500), "1.5× larger"},
		{sizeRatio(7500, 5000), "1.5× smaller"},
		{fmtMs(0.123), "0.12 ms"},
		{fmtMs(12.34), "12.3 ms"},
		{fmtMs(21766), "21,766 ms"},
		{fmtKB(4960), "5.0 KB"},
	} {
		if c.got != c.want {
			t.Errorf("got %q; want %q", c.got, c.want)
		}
	}
}

// Without --ours, bench runs ours with each peer line's settings: the
// rows follow the line, whatever the figures.
func TestBenchCompareRunsOursWithThePeersSettings(t *testing.T) {
	line := `{"impl":"pico3","backend":"jsonl","fsync":false,"turns":5,"toolsPerTurn":2,"resetEvery":2,"done":5,"wallMs":100,"cpuUserMs":90,"cpuSysMs":5,"turnMs":{"p50":"20.0","p99":"30.0"},"rssMB":80,"diskBytes":25000,"reopenMs":10}`
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--compare", writeLines(t, "peer.json", line)}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var labels []string
	for _, row := range strings.Split(strings.TrimSpace(out.String()), "\n")[2:] {
		cells := strings.Split(row, " | ")
		labels = append(labels, strings.TrimPrefix(cells[0], "| "))
	}
	want := []string{"5 turns × 2 tools, reset every 2, JSONL", "5 turns × 2 tools, reset every 2, JSONL: CPU user+sys",
		"5 turns × 2 tools, reset every 2, JSONL: turn p50", "5 turns × 2 tools, reset every 2, JSONL: turn p99",
		"5 turns × 2 tools, reset every 2, JSONL: RSS", "5 turns × 2 tools, reset every 2, JSONL: bytes per turn on disk",
		"5 turns × 2 tools, reset every 2, JSONL: cold reopen"}
	if strings.Join(labels, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(labels, "\n"), strings.Join(want, "\n"))
	}
}

// With --sqlite, a synced JSONL line also runs ours on SQLite with
// synchronous=FULL, against our JSONL run.
func TestBenchCompareRunsASyncedJSONLLineOnSyncedSQLiteToo(t *testing.T) {
	line := `{"impl":"pico3","backend":"jsonl","fsync":true,"turns":3,"toolsPerTurn":1,"resetEvery":0,"done":3,"wallMs":100,"cpuUserMs":90,"cpuSysMs":5,"turnMs":{"p50":"20.0","p99":"30.0"},"rssMB":80,"diskBytes":25000,"reopenMs":10}`
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--compare", writeLines(t, "peer.json", line), "--sqlite"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := rows[len(rows)-1]
	if !strings.HasPrefix(last, "| 3 turns × 1 tools, SQLite (fsync) | (none) | ") || !strings.HasSuffix(last, " than our JSONL |") {
		t.Fatalf("last row %q; want our synced SQLite against our JSONL", last)
	}
	if !strings.HasPrefix(rows[2], "| 3 turns × 1 tools, JSONL (fsync) | ") {
		t.Fatalf("first row %q; want the synced JSONL line", rows[2])
	}
}

func TestBenchCompareRefusesBadLinesNamingFileAndLineAndExitsTwo(t *testing.T) {
	good := strings.SplitN(comparePeerLines, "\n", 2)[0]
	for _, c := range []struct {
		name, lines, want string
	}{
		{"not json", good + "\n{\"impl\":\n", "line 2: not a JSON object"},
		{"missing field", strings.Replace(good, `"wallMs":2746,`, "", 1), `line 1: no "wallMs" field`},
		{"unfinished", strings.Replace(good, `"done":200`, `"done":150`, 1), "line 1: done 150 of 200 turns"},
		{"bad backend", strings.Replace(good, `"memory"`, `"postgres"`, 1), `line 1: backend "postgres"`},
		{"bad latency", strings.Replace(good, `"12.500"`, `"fast"`, 1), `line 1: "fast" is not a number`},
		{"empty", "\n\n", "no bench line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeLines(t, "peer.json", c.lines)
			var out, errOut bytes.Buffer
			code := benchMain(context.Background(), []string{"--compare", path, "--ours", path}, &out, &errOut)
			if code != 2 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), path+": "+c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, errOut.String(), path+": "+c.want)
			}
			_, err := parseBenchLines(path, strings.NewReader(c.lines))
			var le *BenchLineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v; want a *BenchLineError", err)
			}
		})
	}
}

func TestBenchCompareRefusesOursWithoutThePeersSettings(t *testing.T) {
	peer := writeLines(t, "peer.json", comparePeerLines)
	ours := writeLines(t, "ours.json", strings.Replace(compareOurLines, `"resetEvery":50`, `"resetEvery":0`, 1))
	var out, errOut bytes.Buffer
	code := benchMain(context.Background(), []string{"--compare", peer, "--ours", ours}, &out, &errOut)
	want := "--ours: " + ours + ": no line has the settings of the peer's line 3 (backend jsonl, fsync false, 2000 turns, 2 tools, reset every 50); line 1 differs in resetEvery"
	if code != 2 || errOut.String() != "picosim: bench: "+want+"\n" {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut.String(), want)
	}
	peerLines, _ := readBenchLines(peer)
	ourLines, _ := readBenchLines(ours)
	_, err := matchOurs(ours, peerLines, ourLines)
	var me *CompareMismatchError
	if !errors.As(err, &me) || me.Field != "resetEvery" {
		t.Fatalf("error %v; want a *CompareMismatchError in resetEvery", err)
	}
}

func TestBenchCompareFlagMistakesExitTwo(t *testing.T) {
	peer := writeLines(t, "peer.json", comparePeerLines)
	for _, args := range [][]string{
		{"--ours", peer},
		{"--sqlite"},
		{"--compare", peer, "--workload", "short"},
		{"--compare", peer, "--json"},
		{"--compare", peer, "--turns", "20"},
		{"--compare", peer, "--backend", "sqlite"},
		{"--compare", filepath.Join(t.TempDir(), "missing.json")},
	} {
		var out, errOut bytes.Buffer
		if code := benchMain(context.Background(), args, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut.String())
		}
	}
}

// Repeated runs with the same settings compare as their medians, each
// measure on its own (a middle one for an odd count, the mean of the middle
// two for an even one), and the table says of how many runs.
func TestBenchCompareTakesTheMedianOfRepeatedRuns(t *testing.T) {
	peerLine := func(wall, reopen float64) string {
		return strings.NewReplacer("WALL", strconv.FormatFloat(wall, 'f', -1, 64), "REOPEN", strconv.FormatFloat(reopen, 'f', -1, 64)).Replace(
			`{"impl":"pico3","backend":"jsonl","fsync":false,"turns":200,"toolsPerTurn":2,"resetEvery":0,"done":200,"wallMs":WALL,"cpuUserMs":WALL,"cpuSysMs":0,"turnMs":{"p50":"1","p99":"2"},"rssMB":100,"diskBytes":1000000,"reopenMs":REOPEN}`)
	}
	ourLine := func(wall float64, disk int) string {
		return strings.NewReplacer("WALL", strconv.FormatFloat(wall, 'f', -1, 64), "DISK", strconv.Itoa(disk)).Replace(
			`{"impl":"pico-go","backend":"jsonl","fsync":false,"turns":200,"toolsPerTurn":2,"resetEvery":0,"done":200,"wallMs":WALL,"cpuUserMs":WALL,"cpuSysMs":0,"turnMs":{"p50":0.1,"p99":0.2},"rssMB":20,"diskBytes":DISK,"reopenMs":5}`)
	}
	peer := writeLines(t, "peer.json", strings.Join([]string{peerLine(3000, 40), peerLine(1000, 60), peerLine(2000, 50)}, "\n"))
	ours := writeLines(t, "ours.json", strings.Join([]string{ourLine(300, 1500000), ourLine(100, 1000000)}, "\n"))
	var out, errOut bytes.Buffer
	if code := benchMain(context.Background(), []string{"--compare", peer, "--ours", ours}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"| 200 turns × 2 tools, JSONL | 2,000 ms | 200 ms | 10.0× faster |",
		"| 200 turns × 2 tools, JSONL: CPU user+sys | 2,000 ms | 200 ms | 10.0× faster |",
		"| 200 turns × 2 tools, JSONL: bytes per turn on disk | 5.0 KB | 6.2 KB | 1.2× larger |",
		"| 200 turns × 2 tools, JSONL: cold reopen | 50.0 ms | 5.00 ms | 10.0× faster |",
		"Each figure is the median of the runs with its settings: 3 of the peer's, 2 of ours.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "| 200 turns × 2 tools, JSONL |"); n != 1 {
		t.Errorf("the workload has %d rows; want its runs in one", n)
	}
}
