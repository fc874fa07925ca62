package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// buildHook builds the hook command into a temporary directory.
func buildHook(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pico-hook")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// hook runs the built hook with env and payload on stdin.
func hook(t *testing.T, bin string, env []string, provider, payload string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, "--provider", provider)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(payload)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the hook did not exit 0: %v (stderr %q)", err, errOut.String())
	}
	return out.String(), errOut.String()
}

func claudeStart(source, id string) string {
	return `{"session_id":"` + id + `","transcript_path":"/home/u/.claude/projects/p/` + id + `.jsonl","cwd":"/home/u/p","hook_event_name":"SessionStart","source":"` + source + `"}`
}

// End to end, through the built hook binary against a host serving the
// socket: a Claude clear creates exactly one boundary and its repeat
// changes nothing; a wrong token, a malformed payload and a dead socket
// each leave everything as it was, while the hook still exits 0 with
// nothing on stdout and one line on stderr.
func TestTheHookDeliversThroughTheSocketAndFailsOpen(t *testing.T) {
	bin := buildHook(t)
	ctx := context.Background()
	h, err := agent.Open(ctx, memory.New(), agent.Options{Runtime: core.RealRuntime()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	srv, err := boundary.Serve(ctx, h.Harness, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(srv.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the lifecycle directory: %v %v; want 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(srv.Dir(), "lifecycle.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v %v; want 0600", fi.Mode(), err)
	}
	env := srv.Env()
	quiet := func(what, stdout, stderr string, wantErr bool) {
		t.Helper()
		switch {
		case stdout != "":
			t.Fatalf("%s: the hook printed %q on stdout; it must print nothing", what, stdout)
		case wantErr && (strings.Count(stderr, "\n") != 1 || len(stderr) > 201):
			t.Fatalf("%s: stderr %q; want one bounded line", what, stderr)
		case !wantErr && stderr != "":
			t.Fatalf("%s: stderr %q; want none", what, stderr)
		}
	}
	out, errOut := hook(t, bin, env, "claude", claudeStart("startup", "thread-1"))
	quiet("startup", out, errOut, false)
	out, errOut = hook(t, bin, env, "claude", claudeStart("clear", "thread-2"))
	quiet("clear", out, errOut, false)
	current, err := boundary.Current(ctx, h.Harness)
	if err != nil || current == h.Root().ID {
		t.Fatalf("current = %d, %v; want the new conversation", current, err)
	}
	states := filepath.Join(srv.Dir(), "adapters.json")
	if fi, err := os.Stat(states); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the adapter states: %v %v; want a 0600 file in the private directory", fi, err)
	}
	if data, _ := os.ReadFile(states); !strings.Contains(string(data), `"bound":"thread-2"`) {
		t.Fatalf("the adapter states = %s; want claude bound to thread-2", data)
	}
	last := h.Store().LastSeq()
	out, errOut = hook(t, bin, env, "claude", claudeStart("clear", "thread-2"))
	quiet("the repeated clear", out, errOut, false)
	if h.Store().LastSeq() != last {
		t.Fatal("the repeated clear wrote something")
	}
	wrong := []string{boundary.EnvSocket + "=" + filepath.Join(srv.Dir(), "lifecycle.sock"), boundary.EnvToken + "=not-the-token"}
	out, errOut = hook(t, bin, wrong, "claude", claudeStart("clear", "thread-3"))
	quiet("a wrong token", out, errOut, true)
	out, errOut = hook(t, bin, env, "claude", `{"session_id":"thread-4","hook_event_name":"SessionStart","source":"reboot"}`)
	quiet("a malformed payload", out, errOut, true)
	out, errOut = hook(t, bin, env, "claude", `not json at all`)
	quiet("a payload that is not JSON", out, errOut, true)
	if h.Store().LastSeq() != last {
		t.Fatal("a refused delivery wrote something")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut = hook(t, bin, env, "claude", claudeStart("clear", "thread-5"))
	quiet("a dead socket", out, errOut, true)
	out, errOut = hook(t, bin, nil, "claude", claudeStart("clear", "thread-6"))
	quiet("no host", out, errOut, true)
	if got, _ := boundary.Current(ctx, h.Harness); got != current || h.Store().LastSeq() != last {
		t.Fatalf("after the failures current = %d (want %d), lastSeq %d (want %d)", got, current, h.Store().LastSeq(), last)
	}
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil || len(convs) != 2 {
		t.Fatalf("%d conversations (%v); want the root and one new one", len(convs), err)
	}
}
