package jsonl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
)

// The rules of DESIGN §9a for files on disk: one writer per session, never
// modify a file that is not ours, and a failed open changes nothing.

const helperEnv = "PICO_JSONL_TEST_HOLD"

// TestMain lets the test binary be the second process: with helperEnv set
// it opens that session, says "held" and keeps it until its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		s, err := jsonl.Open(context.Background(), path, jsonl.Options{})
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(3)
		}
		fmt.Println("held")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		s.Close(context.Background())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestASecondWriterInThisProcessIsRefusedNamingTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 1)
	before, _ := os.ReadFile(path)
	_, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	var le *storage.LockedError
	if !errors.Is(err, storage.ErrLocked) || !errors.As(err, &le) || le.Session != path || le.Holder != fmt.Sprintf("pid %d", os.Getpid()) {
		t.Fatalf("second open = %v; want a LockedError naming %s and this pid", err, path)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the refused open changed the file")
	}
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: "user"}}}})
	s.Close(context.Background())
	r := open(t, path)
	if r.LastSeq() != 6 {
		t.Fatalf("after the holder closed, reopen sees lastSeq %d; want 6", r.LastSeq())
	}
	r.Close(context.Background())
}

// Two processes: while another process holds the session, this one is
// refused with its pid; once that process is killed (no close, no
// cleanup), the kernel has released the lock and the session opens.
func TestASecondProcessIsRefusedUntilTheHolderDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 1)
	s.Close(context.Background())

	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("the holder said %q; want held", line)
	}
	_, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	var le *storage.LockedError
	if !errors.As(err, &le) || le.Holder != fmt.Sprintf("pid %d", holder.Process.Pid) {
		t.Fatalf("open beside a live holder = %v; want a LockedError naming pid %d", err, holder.Process.Pid)
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	r := open(t, path)
	if r.LastSeq() != 5 {
		t.Fatalf("after the holder died, lastSeq %d; want 5", r.LastSeq())
	}
	r.Close(context.Background())

	// And the other way round: this process holds, the other is refused.
	r = open(t, path)
	defer r.Close(context.Background())
	out, err := exec.Command("env", helperEnv+"="+path, os.Args[0], "-test.run=^$").CombinedOutput()
	if code := exitCode(err); code != 3 || !strings.Contains(string(out), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("the second process exited %d with %q; want 3 and a refusal naming pid %d", code, out, os.Getpid())
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestACompleteFinalLineMissingOnlyItsNewlineIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 0)
	commit(t, s, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "user"}}}})
	want := view(t, s)
	s.Close(context.Background())
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-1], 0o600)
	r := open(t, path)
	if got := view(t, r); got != want {
		t.Fatalf("a batch missing only its newline was lost:\ngot  %s\nwant %s", got, want)
	}
	if len(r.TornTails()) != 0 {
		t.Fatalf("torn tails %+v; want none", r.TornTails())
	}
	r.Close(context.Background())
	if after, _ := os.ReadFile(path); string(after) != string(data) {
		t.Fatal("the kept line was not ended with its newline")
	}
}

func TestAFileThatIsNotASessionIsRefusedAndNeverModified(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"notes":         `{"title":"groceries"}` + "\n" + `{"item":"milk"}` + "\n",
		"legacy":        `{"first":1,"writes":[{"type":"createConversation","conversation":{"id":1}}]}` + "\n",
		"empty":         "",
		"torn header":   `{"pico":"sess`,
		"other version": `{"pico":"session","format":99}` + "\n",
		"a scratch":     `{"pico":"scratch","format":1,"task":2}` + "\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".jsonl")
		os.WriteFile(path, []byte(content), 0o644)
		_, err := jsonl.Open(context.Background(), path, jsonl.Options{})
		var fe *jsonl.FileError
		if !errors.As(err, &fe) || fe.Path != path || fe.Line != 1 {
			t.Errorf("%s: open = %v; want a FileError at line 1", name, err)
		}
		if name != "other version" && !errors.Is(err, jsonl.ErrNotSession) {
			t.Errorf("%s: open = %v; want ErrNotSession", name, err)
		}
		after, _ := os.ReadFile(path)
		info, _ := os.Stat(path)
		if string(after) != content || info.Mode().Perm() != 0o644 {
			t.Errorf("%s: the refused file was modified", name)
		}
		if _, err := os.Stat(strings.TrimSuffix(path, ".jsonl") + ".scratch"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: open left a scratch directory", name)
		}
	}
}

// A torn tail is cut only once every batch before it is good: an open that
// fails on an earlier line leaves the file exactly as it was.
func TestAnOpenThatFailsCutsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 2)
	s.Close(context.Background())
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	f.WriteString(`{"first":7,"writes":[{"type":"entry","entry":{"id":7,"conv`)
	f.Close()
	scratch := filepath.Join(filepath.Dir(path), "s.scratch", "2")
	g, _ := os.OpenFile(scratch, os.O_WRONLY|os.O_APPEND, 0o600)
	g.WriteString(`{"first":8,"task":2,"wri`)
	g.Close()
	mainBefore, _ := os.ReadFile(path)
	scratchBefore, _ := os.ReadFile(scratch)
	refuse := errors.New("refused by the verifier")
	_, err := jsonl.Open(context.Background(), path, jsonl.Options{Verify: func(_ context.Context, _ storage.Storage, b storage.CommitBatch) error {
		if b.Kind == storage.BatchScratch {
			return refuse
		}
		return nil
	}})
	if !errors.Is(err, refuse) {
		t.Fatalf("open = %v; want the verifier's refusal", err)
	}
	mainAfter, _ := os.ReadFile(path)
	scratchAfter, _ := os.ReadFile(scratch)
	if string(mainAfter) != string(mainBefore) || string(scratchAfter) != string(scratchBefore) {
		t.Fatal("a failed open cut a torn tail")
	}
	r := open(t, path)
	defer r.Close(context.Background())
	tails := r.TornTails()
	if len(tails) != 2 || tails[0].Path != path || tails[0].Offset != int64(strings.LastIndexByte(string(mainBefore), '\n')+1) {
		t.Fatalf("torn tails %+v; want the main file's and the scratch file's, at their offsets", tails)
	}
}

// A batch in the main file that reuses a sequence a live scratch file
// holds is corruption (§7.4 step 3): each file alone looks fine.
func TestReplayRefusesASequenceUsedInTwoFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 1) // main 1–4, scratch 5
	s.Close(context.Background())
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	f.WriteString(`{"first":5,"writes":[{"type":"entry","entry":{"id":5,"conversationId":1,"kind":"user"}}]}` + "\n")
	f.Close()
	before, _ := os.ReadFile(path)
	_, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	var fe *jsonl.FileError
	scratch := filepath.Join(filepath.Dir(path), "s.scratch", "2")
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "overlaps") ||
		!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), scratch) {
		t.Fatalf("open = %v; want a FileError naming both files of the shared sequence", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the refused open changed the file")
	}
}

func TestAScratchFileCarriesItsTasksHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s := open(t, path)
	session(t, s, 1)
	s.Close(context.Background())
	scratch := filepath.Join(filepath.Dir(path), "s.scratch", "2")
	data, _ := os.ReadFile(scratch)
	if !strings.HasPrefix(string(data), fmt.Sprintf(`{"pico":"scratch","format":%d,"task":2}`+"\n", jsonl.FormatVersion)) {
		t.Fatalf("scratch file starts %q; want its header", data)
	}
	os.WriteFile(scratch, []byte(strings.Replace(string(data), `"task":2}`, `"task":3}`, 1)), 0o600)
	var fe *jsonl.FileError
	if _, err := jsonl.Open(context.Background(), path, jsonl.Options{}); !errors.As(err, &fe) || fe.Path != scratch || fe.Line != 1 {
		t.Fatalf("open with another task's header in the scratch file = %v; want a FileError at its line 1", err)
	}
}
