package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/sqlite"
)

// checkMain is `picosim check SESSION`: it validates a JSONL session or a
// SQLite database without writing to it. The files are copied to a
// temporary directory and opened there, so the backend's own replay checks
// every batch (sequence ranges, references, roles, scratch ownership), a
// JSONL history batch by batch against the harness's rules too (heads,
// edits, dependencies, input-result transitions: agent.ValidateBatch), and
// then the harness-level invariants are checked on the opened state.
func checkMain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	session := fl.String("session", "picosim", "the session name inside a SQLite database")
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, checkHelp)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	path := args[0]
	if err := fl.Parse(args[1:]); err != nil || fl.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q", fl.Arg(0))
		}
		fmt.Fprintln(stderr, "picosim: check:", err)
		return 2
	}
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintln(stderr, "picosim: check:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "picosim-check-")
	if err != nil {
		fmt.Fprintln(stderr, "picosim: check:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	ctx := context.Background()
	store, err := openCopy(ctx, path, tmp, *session)
	if err != nil {
		// Name the original file, not the copy.
		fmt.Fprintf(stdout, "✗ %s: %s\n", path, strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), filepath.Dir(path)+string(filepath.Separator)))
		return 1
	}
	report, problems := checkState(ctx, store)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stdout, "✗ %s: %s\n", path, p)
		}
		return 1
	}
	fmt.Fprintf(stdout, "✓ %s: %s; every invariant holds\n", path, report)
	return 0
}

const checkHelp = `usage: picosim check SESSION [--session NAME]

Validates a JSONL session (SESSION.jsonl and its .scratch directory) or a SQLite database (the
session NAME inside it) without writing to it, and prints the first problem with its file and line,
or a summary. Every batch of a JSONL history is held to the storage rules (sequence ranges,
references, roles, scratch ownership) and the harness rules (heads, edits, dependencies,
input-result transitions) against the session before it; the final state of either backend to the
harness invariants (task roles, contexts that derive, queued input in the inbox, running input
owned by a live turn). Exit status 1 when something is wrong.
`

// openCopy copies a session's files into dir and opens the copy.
func openCopy(ctx context.Context, path, dir, session string) (storage.Storage, error) {
	base := filepath.Base(path)
	if strings.HasSuffix(path, ".jsonl") {
		if err := copyFile(path, filepath.Join(dir, base)); err != nil {
			return nil, err
		}
		scratch := strings.TrimSuffix(path, ".jsonl") + ".scratch"
		if st, err := os.Stat(scratch); err == nil && st.IsDir() {
			if err := copyDir(scratch, filepath.Join(dir, filepath.Base(scratch))); err != nil {
				return nil, err
			}
		}
		// Every batch is also held to the harness's own rules, against the
		// session as it stood before it.
		return jsonl.Open(ctx, filepath.Join(dir, base), jsonl.Options{Verify: agent.ValidateBatch})
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := copyFile(path+suffix, filepath.Join(dir, base+suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return sqlite.Open(ctx, filepath.Join(dir, base), sqlite.Options{Session: session})
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkState checks what the backend's replay cannot: live tasks of the
// built-in kinds carry the role their status maps to, every conversation's
// context derives and projects, queued input is in the inbox, and running
// input belongs to a live generation or post_tools.
func checkState(ctx context.Context, store storage.Storage) (string, []string) {
	var problems []string
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return "", []string{err.Error()}
	}
	tasks, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: c, Live: storage.Bool(true)})
	})
	if err != nil {
		return "", []string{err.Error()}
	}
	kinds := map[string]core.TaskKind{agent.GenerationKindName: agent.GenerationKind, agent.ToolKindName: agent.ToolKind, agent.PostToolsKindName: agent.PostToolsKind}
	owned := map[storage.ID]bool{} // inputs of live groups
	for _, t := range tasks {
		if k, ok := kinds[t.Kind]; ok {
			if role, known := k.Role(t.Status); !known || role != t.Role {
				problems = append(problems, fmt.Sprintf("task %d (%s) is %s with role %s; the kind maps that status to %q", t.ID, t.Kind, t.Status, t.Role, role))
			}
		}
		var st struct {
			Inputs []storage.ID `json:"inputs"`
		}
		if (t.Kind == agent.GenerationKindName || t.Kind == agent.PostToolsKindName) && json.Unmarshal(t.State, &st) == nil {
			for _, in := range st.Inputs {
				owned[in] = true
			}
		}
	}
	for _, c := range convs {
		cx, err := core.DeriveContext(ctx, store, c.ID, 0)
		if err == nil {
			_, err = cx.Request()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("conversation %d: its context does not derive: %v", c.ID, err))
		}
		inbox, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Element], error) {
			return store.ReadList(ctx, agent.InboxList.In(c.ID).Address, storage.ListQuery{Cursor: cur})
		})
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		queued := map[storage.ID]bool{}
		for _, el := range inbox {
			queued[el.ID] = true
		}
		results, err := inputResults(ctx, store, c.ID)
		if err != nil {
			problems = append(problems, fmt.Sprintf("conversation %d: %v", c.ID, err))
			continue
		}
		for id, r := range results {
			switch {
			case r.Status == agent.InputQueued && !queued[id]:
				problems = append(problems, fmt.Sprintf("conversation %d: input %d is queued but not in the inbox", c.ID, id))
			case r.Status == agent.InputRunning && !owned[id]:
				problems = append(problems, fmt.Sprintf("conversation %d: input %d is running but no live generation or post_tools owns it", c.ID, id))
			}
			delete(queued, id)
		}
		for id := range queued {
			problems = append(problems, fmt.Sprintf("conversation %d: inbox element %d has no input result", c.ID, id))
		}
	}
	slices.Sort(problems)
	return fmt.Sprintf("%d conversations, %d live tasks, last sequence %d", len(convs), len(tasks), store.LastSeq()), problems
}

// inputResults reads every input result of a conversation, by input id.
func inputResults(ctx context.Context, store storage.Storage, conv storage.ID) (map[storage.ID]agent.InputResult, error) {
	out := map[storage.ID]agent.InputResult{}
	for q := (storage.ValueQuery{Scope: storage.ConversationScope(conv), Namespace: agent.InputResultValue.Namespace, Limit: storage.PageLimitMax}); ; {
		p, err := store.ScanValues(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, kv := range p.Items {
			id, err := strconv.ParseInt(kv.Key, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("input result key %q is not an input id", kv.Key)
			}
			var r agent.InputResult
			if err := json.Unmarshal(kv.Version.Value, &r); err != nil {
				return nil, fmt.Errorf("input result %s does not decode: %v", kv.Key, err)
			}
			out[storage.ID(id)] = r
		}
		if len(p.Items) < q.Limit {
			return out, nil
		}
		q.After = p.Items[len(p.Items)-1].Key
	}
}
