package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// replayOutcome is everything a replay of one file shows: the batches it
// applied (as Verify saw them), the error it ended in, the session it
// left, and the file after its repairs.
type replayOutcome struct {
	Batches []string
	Err     string
	LastSeq storage.ID
	Torn    []TornTail
	File    string
}

// replayOf opens a copy of the main file text in dir and says what the
// replay did.
func replayOf(t *testing.T, dir string, text []byte) replayOutcome {
	t.Helper()
	path := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(path, text, fileMode); err != nil {
		t.Fatal(err)
	}
	var out replayOutcome
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Verify: func(_ context.Context, _ storage.Storage, b storage.CommitBatch) error {
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		out.Batches = append(out.Batches, string(raw))
		if bytes.Contains(raw, []byte(`"refuse me"`)) {
			return errors.New("the verifier refuses this batch")
		}
		return nil
	}})
	if err != nil {
		out.Err = strings.ReplaceAll(err.Error(), dir, "DIR")
	} else {
		out.LastSeq, out.Torn = s.LastSeq(), s.TornTails()
		for i := range out.Torn {
			out.Torn[i].Path = strings.ReplaceAll(out.Torn[i].Path, dir, "DIR")
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := os.ReadFile(path)
	out.File = string(after)
	return out
}

// parsingAhead makes every replay of the test parse ahead in chunks of n
// lines, on at least two cores.
func parsingAhead(t *testing.T, n int) {
	oldMin, oldLines := parallelParseMin, chunkLines
	parallelParseMin, chunkLines = 0, n
	if runtime.GOMAXPROCS(0) < 2 {
		old := runtime.GOMAXPROCS(2)
		t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	}
	t.Cleanup(func() { parallelParseMin, chunkLines = oldMin, oldLines })
}

// sessionLines commits a conversation and n batches of an entry and a
// value, and returns the main file's header and batch lines.
func sessionLines(t *testing.T, n int) (header string, lines []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	addr := storage.ConversationValue[int]("n", storage.Rewind).In(1).Address
	for i := range n {
		model := []ai.Message{ai.UserText(fmt.Sprintf("message %d", i), int64(i))}
		if _, err := s.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteValueSet, Addr: &addr, Value: json.RawMessage(fmt.Sprint(i))},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: s.LastSeq() + 2, ConversationID: 1, Kind: "user", Model: model}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	return all[0] + "\n", all[1:]
}

// A replay that parses ahead, in chunks of any size, applies the same
// batches, fails with the same error at the same line, repairs the same
// torn tail and leaves the same file as one that parses line by line: on
// good files, and on every kind of bad line at every place, chunk
// boundaries included.
func TestParsingAheadReplaysAsParsingInline(t *testing.T) {
	header, lines := sessionLines(t, 9)
	joined := func(ls []string, tail string) []byte {
		return []byte(header + strings.Join(ls, "\n") + "\n" + tail)
	}
	with := func(at int, line string) []byte {
		ls := append([]string{}, lines...)
		ls[at] = line
		return joined(ls, "")
	}
	long := strings.Repeat("x", 600)
	files := map[string][]byte{
		"good":                 joined(lines, ""),
		"header only":          []byte(header),
		"torn tail":            joined(lines, lines[3][:17]),
		"last line unended":    []byte(header + strings.Join(lines, "\n")),
		"tail of a long line":  joined(lines, `{"first":`+long),
		"slow path line":       with(4, strings.Replace(lines[4], `"first"`, `"First"`, 1)),
		"line not a batch":     with(0, "not json"),
		"overlapping batch":    with(5, lines[4]),
		"batch of a task":      with(2, strings.Replace(lines[2], `{"first":`, `{"task":3,"first":`, 1)),
		"verifier refuses":     with(8, strings.Replace(lines[8], `message 7`, `refuse me`, 1)),
		"last line malformed":  with(len(lines)-1, "{"),
		"first line malformed": with(0, "{"),
	}
	for i := range lines {
		files[fmt.Sprintf("malformed line %d", i+2)] = with(i, lines[i][:len(lines[i])-1])
		files[fmt.Sprintf("long line %d", i+2)] = with(i, `{"first":`+long+`}`)
	}
	old := batchBytesMax
	batchBytesMax = 500 // lines[i] are shorter, long is not
	t.Cleanup(func() { batchBytesMax = old })
	for name, text := range files {
		want := replayOf(t, t.TempDir(), text)
		for _, n := range []int{1, 2, 3, 4, 256} {
			t.Run(fmt.Sprintf("%s/chunks of %d", name, n), func(t *testing.T) {
				parsingAhead(t, n)
				if got := replayOf(t, t.TempDir(), text); !cmp.Equal(want, got) {
					t.Fatalf("parsing ahead replays otherwise (-inline +ahead):\n%s", cmp.Diff(want, got))
				}
			})
		}
	}
	// The cases reach what they are named for.
	if got := replayOf(t, t.TempDir(), files["good"]); got.Err != "" || got.LastSeq != 19 || len(got.Batches) != 10 {
		t.Fatalf("good file: %+v", got)
	}
	if got := replayOf(t, t.TempDir(), files["torn tail"]); len(got.Torn) != 1 || got.File != string(files["good"]) {
		t.Fatalf("torn tail: %+v", got)
	}
	for name, line := range map[string]int{"malformed line 5": 5, "long line 7": 7, "verifier refuses": 10, "overlapping batch": 7} {
		if got := replayOf(t, t.TempDir(), files[name]); !strings.Contains(got.Err, fmt.Sprintf(":%d:", line)) &&
			!strings.Contains(got.Err, fmt.Sprintf("line %d", line)) {
			t.Fatalf("%s: error %q; want one at line %d", name, got.Err, line)
		}
	}
}

// A replay that ends early, at a bad line near the start of a large file,
// leaves no parsing goroutine behind.
func TestParsingAheadStopsWithTheReplay(t *testing.T) {
	header, lines := sessionLines(t, 40)
	parsingAhead(t, 1)
	before := runtime.NumGoroutine()
	ls := append([]string{"{"}, lines...)
	if got := replayOf(t, t.TempDir(), []byte(header+strings.Join(ls, "\n")+"\n")); got.Err == "" {
		t.Fatal("a malformed second line opened")
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Fatalf("%d goroutines after the failed open, %d before", after, before)
	}
}

// Options.ParseAhead parses a small file ahead, on two goroutines whatever
// the machine's cores, in chunks of its lines, and the replay is the one
// inline parsing makes.
func TestParseAheadOptionParsesAnyFileAhead(t *testing.T) {
	header, lines := sessionLines(t, 9)
	text := []byte(header + strings.Join(lines, "\n") + "\n")
	if r := newLineReader(text, 0); r.workers != nil {
		r.stop()
		t.Fatal("a small file is parsed ahead without the option")
	}
	r := newLineReader(text, 2)
	if len(r.workers) != parseWorkersMax || r.lines != 2 {
		t.Fatalf("with the option: %d workers, chunks of %d lines; want %d, 2", len(r.workers), r.lines, parseWorkersMax)
	}
	r.stop()
	ctx := context.Background()
	open := func(opts Options) (storage.ID, []string) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, text, fileMode); err != nil {
			t.Fatal(err)
		}
		var batches []string
		opts.Verify = func(_ context.Context, _ storage.Storage, b storage.CommitBatch) error {
			raw, _ := json.Marshal(b)
			batches = append(batches, string(raw))
			return nil
		}
		s, err := Open(ctx, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		return s.LastSeq(), batches
	}
	wantLast, want := open(Options{})
	for _, n := range []int{1, 3} {
		if last, got := open(Options{ParseAhead: n}); last != wantLast || !cmp.Equal(want, got) {
			t.Fatalf("ParseAhead %d replays to %d (%d batches); inline to %d (%d)", n, last, len(got), wantLast, len(want))
		}
	}
}
