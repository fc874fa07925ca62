//go:build unix

package localenv_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/localenv"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The harness runs a real command through the real environment: a model's
// bash call becomes a job whose process runs under sh in the root, and
// the call answers with its output and exit status; the file tools act
// on the same root.
func TestTheHarnessRunsARealCommandThroughBash(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "input.txt"), []byte("three\nlines\nhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := localenv.New(root, localenv.WithSpillDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := core.RealRuntime()
	p, err := faux.New(rt, rand.New(rand.NewPCG(1, 2)), faux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, command string) ai.Block {
		raw, _ := json.Marshal(map[string]string{"command": command})
		return faux.ToolCall(id, agent.BashToolName, string(raw))
	}
	p.SetResponses(faux.Reply(call("count", "wc -l < input.txt"), call("fail", "echo oops >&2; exit 3")).WithStop(ai.StopToolUse), faux.Reply(faux.Text("done")))
	h, err := agent.Open(ctx, memory.New(), agent.Options{Runtime: rt, Env: env, Tools: []agent.Tool{agent.BashTool(), agent.JobTool()},
		CheckInvariants: true, Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	c := h.Root()
	if _, err := c.Prompt(ctx, ai.PlainText("count the lines"), agent.AcceptOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: core.ToolResultKind.Kind()})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]ai.Message{}
	for _, e := range page.Items {
		results[e.Key] = e.Model[0]
	}
	if got := results["count"].Content.TextOf(); strings.TrimSpace(got) != "3" || *results["count"].IsError {
		t.Fatalf("wc's result = %q; want 3", got)
	}
	if got := results["fail"].Content.TextOf(); got != "oops\nexit code 3" || !*results["fail"].IsError {
		t.Fatalf("the failing command's result = %q; want its stderr and exit code as an error", got)
	}
}
