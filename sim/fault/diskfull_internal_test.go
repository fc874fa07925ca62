package fault

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// careless is a store over files that handles a failed write badly, in
// one way each: it acknowledges the batch, leaves the prefix in its
// file, publishes the batch, or publishes it and hides the sequence.
type careless struct {
	*memory.Store
	gate   *writeGate
	path   string
	mode   string
	hides  bool       // LastSeq answers hidden, in "hides its sequence"
	hidden storage.ID // the sequence before the batch it published
}

func (c *careless) LastSeq() storage.ID {
	if c.hides {
		return c.hidden
	}
	return c.Store.LastSeq()
}

func (c *careless) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	line := []byte(`{"a line of the batch":true}` + "\n")
	keep, err := c.gate.fault(c.path, line)
	if err == nil {
		return c.Store.Commit(ctx, b)
	}
	switch c.mode {
	case "acknowledges":
		return c.Store.Commit(ctx, b)
	case "leaves the prefix":
		f, ferr := os.OpenFile(c.path, os.O_WRONLY|os.O_APPEND, 0o600)
		if ferr != nil {
			return storage.Range{}, ferr
		}
		defer f.Close()
		_, _ = f.Write(line[:keep])
	case "publishes":
		_, _ = c.Store.Commit(ctx, b)
	case "hides its sequence":
		last := c.Store.LastSeq()
		_, _ = c.Store.Commit(ctx, b)
		c.hides, c.hidden = true, last
	}
	return storage.Range{}, err
}

// The handle finds each way a store can keep something of a batch whose
// write failed, and names it in the firing's Broken.
func TestAFailedWriteThatKeepsSomethingIsBroken(t *testing.T) {
	for mode, want := range map[string]string{
		"acknowledges":       "acknowledged batch 1–1, whose write failed",
		"leaves the prefix":  "bytes after a failed write; it was 0 before it",
		"publishes":          "last sequence moved from 0 to 1",
		"hides its sequence": "after the failed write, conversation 1 answers",
		"":                   "",
	} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			gate := &writeGate{}
			store := &careless{Store: memory.New(), gate: gate, path: path, mode: mode}
			disk := &Disk{Files: []string{path}, writes: gate}
			plan := Plan{Faults: []Fault{{Name: "full", Kind: Fail, Commit: 1, Tear: 5}}}
			s := wrap(core.RealRuntime(), store, plan, nil, disk)
			_, err := s.Commit(context.Background(), storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
				{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}})
			f, broken := s.Broken()
			if (want == "") == broken || !strings.Contains(f.Broken, want) {
				t.Fatalf("Broken() = %+v, %t; want it to say %q", f, broken, want)
			}
			if mode != "acknowledges" && !errors.Is(err, ErrDiskFull) {
				t.Fatalf("commit = %v; want ErrDiskFull", err)
			}
			if fired := s.Fired(); len(fired) != 1 || fired[0].Torn == nil || fired[0].Torn.File != "s.jsonl" {
				t.Fatalf("firings %+v; want one, torn in s.jsonl", fired)
			}
		})
	}
}
