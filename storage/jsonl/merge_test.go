package jsonl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
)

// toolStates are a tool task's states as the kinds write them: planned
// from a struct (its fields' order), then patched and settled from maps
// (sorted), each repeating what came before; the last drops a member.
var toolStates = []json.RawMessage{
	json.RawMessage(`{"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"assistant":18,"offered":true,"budgetMs":180000,"limits":{}}`),
	json.RawMessage(`{"args":{"v":"a"},"assistant":18,"budgetMs":180000,"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"limits":{},"offered":true,"replay":"safe"}`),
	json.RawMessage(`{"args":{"v":"a"},"assistant":18,"budgetMs":180000,"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"limits":{},"offered":true,"output":{"content":[{"type":"text","text":"a"}]},"replay":"safe","result":25}`),
	json.RawMessage(`{"args":{"v":"a"},"assistant":18,"budgetMs":180000,"call":{"type":"toolCall","id":"call_1_0","name":"a","arguments":{"v":"a"}},"limits":{},"output":{"content":[{"type":"text","text":"a"}]},"result":25}`),
}

// toolSession commits a conversation and a tool task that goes through
// toolStates, with a scratch frame while it runs.
func toolSession(t *testing.T, s storage.Storage) {
	t.Helper()
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteTask, Task: &storage.Task{ID: 2, ConversationID: 1, Kind: "tool", Status: "planned", Role: storage.RoleStart, State: toolStates[0]}},
	}})
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 2, Status: "running", Role: storage.RoleInflight, State: toolStates[1]}}})
	f := frames(2)
	commit(t, s, storage.CommitBatch{Kind: storage.BatchScratch, Task: 2, Writes: []storage.Write{{Type: storage.WriteListAppend, Addr: &f, Value: raw("x")}}})
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WritePatch, ID: 2, State: toolStates[2]}}})
}

func taskState(t *testing.T, s storage.Storage, id storage.ID) json.RawMessage {
	t.Helper()
	got, err := s.GetTasks(context.Background(), []storage.ID{id})
	if err != nil || got[id] == nil {
		t.Fatalf("task %d: %v", id, err)
	}
	return got[id].State
}

// A patch or settle that repeats most of its task's state is written as a
// merge over the state before (and a drop of what went), and replays to
// the very bytes committed.
func TestPatchesAndSettlesAreWrittenAsMergesAndReplayWhole(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	toolSession(t, s)
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteSettle, ID: 2, Status: "done", Role: storage.RoleTerminal, State: toolStates[3]}}})
	want := view(t, s)
	s.Close(ctx)
	data, _ := os.ReadFile(path)
	for _, part := range []string{`"stateMerge":{"args":{"v":"a"},"replay":"safe"}`, `"stateMerge":{"output":{"content":[{"type":"text","text":"a"}]},"result":25}`, `"stateMerge":{},"stateDrop":["offered","replay"]`} {
		if !strings.Contains(string(data), part) {
			t.Errorf("the file does not hold %s:\n%s", part, data)
		}
	}
	r := open(t, path)
	defer r.Close(ctx)
	if got := view(t, r); got != want {
		t.Fatalf("reopened state differs:\n%s", cmp.Diff(want, got))
	}
	if got := taskState(t, r, 2); !bytes.Equal(got, toolStates[3]) {
		t.Fatalf("reopened state %s; want %s", got, toolStates[3])
	}
}

// A session in format 1 is read, and written on in format 1: no merges,
// its scratch files' headers in format 1 too, so an older build still
// reads what this one added.
func TestAFormat1SessionIsWrittenOnInFormat1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	header := `{"pico":"session","format":1}` + "\n"
	os.WriteFile(path, []byte(header), 0o600)
	s := open(t, path)
	toolSession(t, s)
	scratch, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "s.scratch", "2"))
	if !strings.HasPrefix(string(scratch), `{"pico":"scratch","format":1,"task":2}`+"\n") {
		t.Errorf("the scratch file of a format-1 session starts %q", scratch)
	}
	want := view(t, s)
	s.Close(ctx)
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), header) || strings.Contains(string(data), "stateMerge") {
		t.Fatalf("a format-1 session was written on otherwise:\n%s", data)
	}
	r := open(t, path)
	defer r.Close(ctx)
	if got := view(t, r); got != want {
		t.Fatalf("reopened state differs:\n%s", cmp.Diff(want, got))
	}
}

// A merge the file cannot hold fails open with a FileError naming the file
// and line (a *jsonl.MergeError naming the task, where it is about one),
// and open changes nothing.
func TestAMalformedMergeFailsOpenNamingFileAndLine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	s := open(t, path)
	toolSession(t, s)
	s.Close(ctx)
	good, _ := os.ReadFile(path)
	lines := strings.Count(string(good), "\n")
	for name, c := range map[string]struct {
		line string
		task storage.ID // the MergeError's, 0 when there is none
		says string
	}{
		"no such task":      {`{"first":9,"writes":[{"type":"patch","id":7,"stateMerge":{"a":1}}]}`, 7, "no such task"},
		"state and merge":   {`{"first":9,"writes":[{"type":"patch","id":2,"state":{},"stateMerge":{"a":1}}]}`, 2, "both a state and a state merge"},
		"drop alone":        {`{"first":9,"writes":[{"type":"patch","id":2,"stateDrop":["args"]}]}`, 2, "without a stateMerge"},
		"drop of a missing": {`{"first":9,"writes":[{"type":"patch","id":2,"stateMerge":{},"stateDrop":["nope"]}]}`, 2, `drops "nope"`},
		"merge not object":  {`{"first":9,"writes":[{"type":"patch","id":2,"stateMerge":[1]}]}`, 2, "not a compact object"},
		"merge null":        {`{"first":9,"writes":[{"type":"patch","id":2,"stateMerge":null}]}`, 2, "not a compact object"},
		"after a write":     {`{"first":9,"writes":[{"type":"patch","id":2,"state":{}},{"type":"patch","id":2,"stateMerge":{"a":1}}]}`, 2, "an earlier write of its batch"},
		"on an entry":       {`{"first":9,"writes":[{"type":"entry","entry":{"id":9,"conversationId":1,"kind":"user"},"stateMerge":{"a":1}}]}`, 0, "only a patch or settle"},
	} {
		content := string(good) + c.line + "\n"
		os.WriteFile(path, []byte(content), 0o600)
		_, err := jsonl.Open(ctx, path, jsonl.Options{})
		var fe *jsonl.FileError
		if !errors.As(err, &fe) || fe.Path != path || fe.Line != lines+1 {
			t.Errorf("%s: open = %v; want a FileError naming %s line %d", name, err, path, lines+1)
		}
		if !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("%s: open = %v; want it to say %q", name, err, c.says)
		}
		var me *jsonl.MergeError
		if c.task != 0 && (!errors.As(err, &me) || me.Task != c.task) {
			t.Errorf("%s: open = %v; want a MergeError naming task %d", name, err, c.task)
		}
		if after, _ := os.ReadFile(path); string(after) != content {
			t.Errorf("%s: the refused open changed the file", name)
		}
	}
	// Nor may a format-1 file or a scratch file hold a merge.
	v1 := strings.Replace(string(good), `"format":2`, `"format":1`, 1) + `{"first":9,"writes":[{"type":"patch","id":2,"stateMerge":{"a":1}}]}` + "\n"
	os.WriteFile(path, []byte(v1), 0o600)
	if _, err := jsonl.Open(ctx, path, jsonl.Options{}); err == nil || !strings.Contains(err.Error(), "format 1") {
		t.Errorf("a merge in a format-1 file: open = %v; want it refused", err)
	}
	os.WriteFile(path, good, 0o600)
	scratchPath := filepath.Join(dir, "s.scratch", "2")
	scratch, _ := os.ReadFile(scratchPath)
	os.WriteFile(scratchPath, append(scratch, `{"first":20,"task":2,"writes":[{"type":"list.append","addr":{"scope":{"scratch":2},"namespace":"frames"},"value":1,"stateMerge":{}}]}`+"\n"...), 0o600)
	var fe *jsonl.FileError
	if _, err := jsonl.Open(ctx, path, jsonl.Options{}); !errors.As(err, &fe) || fe.Path != scratchPath || !strings.Contains(err.Error(), "scratch files do not have") {
		t.Errorf("a merge in a scratch file: open = %v; want a FileError naming it", err)
	}
}
