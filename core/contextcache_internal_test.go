package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The cached context must equal a fresh derivation after every commit:
// random histories of plain entries, entries without a model, heads (self
// and earlier boundaries), omit and replace edits, and forks continued
// independently.
func TestCachedContextEqualsAFreshDerivation(t *testing.T) {
	const seeds, steps = 30, 40
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		ctx := context.Background()
		store := memory.New()
		h, err := Open(ctx, store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		convs := []storage.ID{h.root}
		// Requests may share the cache's memory: each one handed out must
		// still read as it did then, whatever came after.
		type handedOut struct {
			msgs []ai.Message
			was  []byte
		}
		var requests []handedOut
		for step := range steps {
			conv := convs[rng.IntN(len(convs))]
			_, err := h.Commit(ctx, func(tx *Tx) error {
				cur, err := DeriveContext(ctx, store, conv, 0)
				if err != nil {
					return err
				}
				ids := cur.IDs()
				msg := []ai.Message{ai.UserText(fmt.Sprintf("m%d", step), 0)}
				call := func() string { return fmt.Sprintf("c%d", rng.IntN(6)) }
				switch r := rng.IntN(16); {
				case r == 10:
					calls := []ai.Block{ai.ToolCall(call(), "t", nil)}
					if rng.IntN(2) == 0 {
						calls = append(calls, ai.ToolCall(call(), "t", nil))
					}
					m := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(calls...), StopReason: ai.StopToolUse}
					if rng.IntN(5) == 0 {
						m.StopReason = ai.StopError
					}
					tx.Entry(AssistantKind, conv, EntryDraft{Model: []ai.Message{m}})
				case r == 11 || r == 12:
					id := call()
					tx.Entry(ToolResultKind, conv, EntryDraft{Key: id, Model: []ai.Message{{Role: ai.RoleToolResult, ToolCallID: id, ToolName: "t", Content: ai.Blocks(ai.Text(fmt.Sprintf("r%d", step)))}}})
				case r == 13 || r == 14:
					text := fmt.Sprintf("s%d", step)
					d := SystemData{Baseline: r == 13, Sections: []SystemSection{{Key: "k", Text: &text}}}
					tx.Entry(SystemKind, conv, EntryDraft{Data: d, Model: []ai.Message{sectionsMessage(d)}})
				case r < 5:
					tx.Entry(UserKind, conv, EntryDraft{Model: msg})
				case r == 5:
					tx.Entry(NoticeKind, conv, EntryDraft{Data: map[string]int{"step": step}})
				case r == 6:
					tx.Entry(ResetKind, conv, EntryDraft{Head: HeadSelf})
				case r == 7 && len(ids) > 0:
					// A summary-like head: an earlier boundary, never before the current one.
					b := ids[rng.IntN(len(ids))]
					if cur.Head != nil && b < cur.Head.Head {
						b = cur.Head.Head
					}
					tx.Entry(SummaryKind, conv, EntryDraft{Model: msg, Head: b})
				case r == 8 && len(ids) > 0:
					ed := storage.ContextEdit{Target: ids[rng.IntN(len(ids))], Action: storage.EditOmit}
					if rng.IntN(2) == 0 {
						ed = storage.ContextEdit{Target: ed.Target, Action: storage.EditReplace, Messages: msg}
					}
					tx.Entry(NoticeKind, conv, EntryDraft{Edits: []storage.ContextEdit{ed}})
				case r == 9 && len(ids) > 0:
					convs = append(convs, tx.Fork(conv, ids[rng.IntN(len(ids))]))
				default:
					tx.Entry(AssistantKind, conv, EntryDraft{Model: msg})
				}
				return nil
			})
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if err := h.line.Read(ctx, func(ctx context.Context) error {
				for _, c := range convs {
					want, err := DeriveContext(ctx, store, c, 0)
					if err != nil {
						return err
					}
					got, err := h.currentContext(ctx, store, c)
					if err != nil {
						return err
					}
					if diff := cmp.Diff(want, got); diff != "" {
						return fmt.Errorf("conversation %d (-fresh +cached):\n%s", c, diff)
					}
					wantSys, err := want.System()
					if err != nil {
						return err
					}
					gotSys, err := h.currentSystem(ctx, store, c)
					if err != nil {
						return err
					}
					if diff := cmp.Diff(wantSys, gotSys); diff != "" {
						return fmt.Errorf("conversation %d: system fold (-fresh +cached):\n%s", c, diff)
					}
					// The request projected from the cache, alone and with a
					// pending delta or baseline, equals the full projection.
					text := "pending"
					for _, pending := range [][]ContextEntry{nil,
						{pendingSystem(store, c, SystemData{Sections: []SystemSection{{Key: "p", Text: &text}}})},
						{pendingSystem(store, c, SystemData{Baseline: true, Sections: []SystemSection{{Key: "p", Text: &text}}})},
					} {
						full := &Context{Head: want.Head, Entries: append(append([]ContextEntry(nil), want.Entries...), pending...)}
						wantReq, err := full.Request()
						if err != nil {
							return err
						}
						gotReq, err := h.currentRequest(ctx, store, c, pending)
						if err != nil {
							return err
						}
						if diff := cmp.Diff(wantReq, gotReq); diff != "" {
							return fmt.Errorf("conversation %d, %d pending: request (-full +cached):\n%s", c, len(pending), diff)
						}
						was, _ := json.Marshal(gotReq)
						requests = append(requests, handedOut{gotReq, was})
					}
				}
				return nil
			}); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		for i, r := range requests {
			if now, _ := json.Marshal(r.msgs); !bytes.Equal(now, r.was) {
				t.Fatalf("seed %d: request %d changed after it was handed out:\nwas %s\nnow %s", seed, i, r.was, now)
			}
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func pendingSystem(store storage.Storage, conv storage.ID, d SystemData) ContextEntry {
	e := &storage.Entry{ID: store.LastSeq() + 1, ConversationID: conv, Kind: SystemKind.Kind(), Model: []ai.Message{sectionsMessage(d)}}
	raw, _ := json.Marshal(d)
	e.Data = raw
	return ContextEntry{Entry: e, Messages: e.Model}
}

// sectionsMessage is a system entry's message with its sections as text;
// the cache and the projection never read a system message's content.
func sectionsMessage(d SystemData) ai.Message {
	var text []string
	for _, sec := range d.Sections {
		text = append(text, sec.Key+": "+*sec.Text)
	}
	return ai.Message{Role: ai.RoleSystem, Content: ai.PlainText(strings.Join(text, "\n"))}
}

// Under Options.CheckContexts a cache that no longer agrees with storage is
// named the moment it answers: its context, its system fold and its
// request each panic with the invariant "context"; without the option, or
// with the cache intact, they answer.
func TestCheckContextsNamesAStaleCache(t *testing.T) {
	reads := map[string]func(tx *Tx, conv storage.ID) error{
		"context": func(tx *Tx, conv storage.ID) error { _, err := tx.DerivedContext(conv); return err },
		"system fold": func(tx *Tx, conv storage.ID) error {
			_, err := tx.SystemFold(conv)
			return err
		},
		"request": func(tx *Tx, conv storage.ID) error { _, err := tx.RequestMessages(conv, nil); return err },
	}
	for what, read := range reads {
		for _, check := range []bool{false, true} {
			for _, stale := range []bool{false, true} {
				ctx := context.Background()
				h, err := Open(ctx, memory.New(), Options{CheckContexts: check})
				if err != nil {
					t.Fatal(err)
				}
				conv := h.root
				text := "be brief"
				d := SystemData{Baseline: true, Sections: []SystemSection{{Key: "k", Text: &text}}}
				if _, err := h.Commit(ctx, func(tx *Tx) error {
					tx.Entry(SystemKind, conv, EntryDraft{Data: d, Model: []ai.Message{sectionsMessage(d)}})
					tx.Entry(UserKind, conv, EntryDraft{Model: []ai.Message{ai.UserText("one", 0)}})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if _, err := h.Commit(ctx, func(tx *Tx) error { return read(tx, conv) }); err != nil { // fills the cache
					t.Fatal(err)
				}
				if stale {
					cc := h.contexts[conv]
					cc.entries = cc.entries[:1]                                   // as if the user entry were never folded in
					cc.proj, cc.sys, cc.sysScanned = nil, newSystemFolder(nil), 1 // and the baseline already scanned
				}
				var got any
				func() {
					defer func() { got = recover() }()
					_, _ = h.Commit(ctx, func(tx *Tx) error { return read(tx, conv) })
				}()
				ie, _ := got.(*DriverInvariantError)
				switch want := check && stale; {
				case want && (ie == nil || ie.Invariant != "context" || !strings.Contains(ie.Detail, "cached "+what)):
					t.Errorf("%s, stale cache: recovered %v; want the invariant context naming the cached %s", what, got, what)
				case !want && got != nil:
					t.Errorf("%s (check %v, stale %v): recovered %v", what, check, stale, got)
				}
			}
		}
	}
}
