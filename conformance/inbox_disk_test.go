package conformance_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/sqlite"
)

// inboxSession accepts two inputs on store, one while idle and one while
// the first turn still runs (queued, then placed at the final answer), and
// returns them with the root conversation.
func inboxSession(t *testing.T, store storage.Storage, check func(ctx context.Context, h *agent.Harness, c *agent.Conversation, idle, busy ID)) {
	t.Helper()
	s := sim.New(sim.Options{Seed: 1})
	err := s.Run(context.Background(), func(ctx context.Context) {
		p := simtest.Must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
		p.SetResponses(faux.Reply(faux.Text("first")).WithDelay(time.Second), faux.Reply(faux.Text("second")))
		h, err := agent.Open(ctx, store, agent.Options{Runtime: s.Runtime(), CheckInvariants: true,
			Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})})
		if err != nil {
			t.Fatal(err)
		}
		c := h.Root()
		idle, err := c.Accept(ctx, ai.PlainText("payload-IDLE-7f3a"), agent.AcceptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		drove := s.Runtime().NewEvent("drive")
		s.Runtime().Go(ctx, "driver", func(ctx context.Context) {
			if _, err := c.Drive(ctx); err != nil {
				panic(err)
			}
			drove.Set()
		})
		busy, err := c.Accept(ctx, ai.PlainText("payload-BUSY-91c2"), agent.AcceptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := drove.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []ID{idle, busy} {
			r, ok, err := c.Result(ctx, id)
			if err != nil || !ok || r.Status != agent.InputDone {
				t.Fatalf("input %d: %+v (%v, %v); want done", id, r, ok, err)
			}
		}
		check(ctx, h, c, idle, busy)
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// JSONL keeps the inbox append record, so a payload copied into the
// transcript is on disk twice: the element and the entry (§8.1), for an
// idle acceptance (append, place and remove in one line) too.
func TestJSONLKeepsAnAcceptedPayloadAndItsPlacement(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	store, err := jsonl.Open(context.Background(), path, jsonl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inboxSession(t, store, func(context.Context, *agent.Harness, *agent.Conversation, ID, ID) {})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{"payload-IDLE-7f3a", "payload-BUSY-91c2"} {
		if n := bytes.Count(data, []byte(payload)); n != 2 {
			t.Fatalf("%s appears %d times in the JSONL file; want 2 (inbox append and placed entry)", payload, n)
		}
	}
}

// SQLite may discard a removed sticky inbox element; the input results stay
// point-readable and the payload survives only as the placed entry.
func TestSQLiteDiscardsRemovedInboxElementsAndKeepsResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var inboxKey string
	var root ID
	inboxSession(t, store, func(ctx context.Context, h *agent.Harness, c *agent.Conversation, idle, busy ID) {
		root = c.ID
		inboxKey = agent.InboxList.In(c.ID).Address.StateKey()
		p, err := h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 100}, ConversationID: c.ID, Kind: "user"})
		if err != nil || len(p.Items) != 2 {
			t.Fatalf("user entries: %d (%v); want the two placed inputs", len(p.Items), err)
		}
		// A control: an element that is still queued is a row.
		if _, err := c.NextRun(ctx, ai.PlainText("payload-QUEUED-55d0")); err != nil {
			t.Fatal(err)
		}
	})
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, queued int
	if err := db.QueryRow(`SELECT count(*), sum(instr(value, 'payload-QUEUED-55d0') > 0) FROM list_elements WHERE state_key = ?`, inboxKey).Scan(&n, &queued); err != nil {
		t.Fatal(err)
	}
	if n != 1 || queued != 1 {
		t.Fatalf("%d inbox rows (%d the queued one); want only the queued element: removed sticky elements are discarded", n, queued)
	}
	// Reopened cold, the results are still one point read each.
	again, err := sqlite.Open(context.Background(), path, sqlite.Options{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	page, err := again.ScanValues(context.Background(), storage.ValueQuery{Scope: storage.ConversationScope(root), Namespace: agent.InputResultValue.Namespace, Limit: 10})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("input results after reopen: %d (%v); want 3", len(page.Items), err)
	}
}
