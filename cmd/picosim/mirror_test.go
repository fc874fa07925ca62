package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/jsonl"
	"github.com/pico-go/pico/storage/memory"
	"github.com/pico-go/pico/storage/sqlite"
)

// A disk backend is held read by read to a memory store given the same
// batches: an answer that differs breaks backends-agree, naming the read
// and where the answers part; the same history answered alike passes.

// skewed is a store whose scans of entries leave out the entries past the
// query's first one when skew is set: a backend with a paging bug.
type skewed struct {
	storage.Storage
	skew bool
}

func (s *skewed) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	p, err := s.Storage.ScanEntries(ctx, q)
	if s.skew && len(p.Items) > 1 {
		p.Items = p.Items[:1]
	}
	return p, err
}

// mirrorHistory is a conversation with three entries, a task and a list.
func mirrorHistory() []storage.CommitBatch {
	list := storage.Address{Scope: storage.ConversationScope(1), Namespace: "ns", Rewind: true}
	entry := func(id storage.ID, text string) storage.Write {
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: 1, Kind: "note", Data: json.RawMessage(`"` + text + `"`)}}
	}
	return []storage.CommitBatch{
		{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}},
		{Kind: storage.BatchMain, Writes: []storage.Write{entry(2, "a"), entry(3, "b")}},
		{Kind: storage.BatchMain, Writes: []storage.Write{mirrorTask(4), {Type: storage.WriteListAppend, Addr: &list, Value: json.RawMessage(`1`)}, entry(6, "c")}},
	}
}

func mirrorTask(id storage.ID) storage.Write {
	return storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: id, ConversationID: 1, Kind: "k", Status: "planned", Role: storage.RoleStart}}
}

// mirroredHistory commits mirrorHistory through a mirror of a memory
// store that skews on demand.
func mirroredHistory(t *testing.T, o *oracle) (*skewed, *mirrored) {
	t.Helper()
	disk := &skewed{Storage: memory.New()}
	m := mirror(context.Background(), disk, &mirrorLog{}, o)
	for _, b := range mirrorHistory() {
		if _, err := m.Commit(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return disk, m
}

func TestMirrorNamesTheReadADiskBackendAnswersDifferently(t *testing.T) {
	ctx := context.Background()
	for _, skew := range []bool{false, true} {
		o := newOracle()
		disk, m := mirroredHistory(t, o)
		disk.skew = skew
		p, err := m.ScanEntries(ctx, storage.EntryQuery{ConversationID: 1})
		if err != nil || len(p.Items) != map[bool]int{false: 3, true: 1}[skew] {
			t.Fatalf("skew %v: the mirror changed the disk's answer: %d items, %v", skew, len(p.Items), err)
		}
		if !skew {
			if o.first != nil {
				t.Fatalf("answered alike, yet %v", o.first)
			}
			continue
		}
		wantRule(t, o.first, ruleBackendsAgree)
		// The disk's answer stops after entry 2 where memory's goes on to 3.
		for _, want := range []string{`ScanEntries({"limit":0,"conversationId":1})`, "at byte 62, ", `"data":"a"},{"id":3`, `"data":"a"}],"readAt":6}`} {
			if !strings.Contains(o.first.Error(), want) {
				t.Errorf("%q does not say %q", o.first, want)
			}
		}
	}
}

// A read whose context ended, or that the disk failed, is not compared:
// SQL refuses a cancelled context that memory answers.
func TestMirrorSkipsReadsTheDiskFailed(t *testing.T) {
	ctx := context.Background()
	o := newOracle()
	disk, m := mirroredHistory(t, o)
	disk.skew = true
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.ScanEntries(done, storage.EntryQuery{ConversationID: 1}); err != nil {
		t.Fatal(err)
	}
	if o.first != nil {
		t.Fatalf("a read under an ended context was compared: %v", o.first)
	}
}

// refusing is a store that refuses every transcript read as a bad query,
// or answers it with nothing, as told.
type refusing struct {
	storage.Storage
	refuse, empty bool
}

func (s *refusing) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	switch {
	case s.refuse:
		return storage.Page[*storage.Entry]{}, fmt.Errorf("%w: refused", storage.ErrBadQuery)
	case s.empty:
		return storage.Page[*storage.Entry]{}, nil
	}
	return s.Storage.ScanEntries(ctx, q)
}

// A query the disk refuses as bad, memory must refuse too, and one memory
// refuses the disk must not answer; both refusing is agreement.
func TestMirrorHoldsRefusalsToMemorys(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		limit         int
		refuse, empty bool
		broken        bool
	}{
		{name: "both refuse", limit: storage.PageLimitMax + 1, refuse: true},
		{name: "the disk refuses a good query", limit: 2, refuse: true, broken: true},
		{name: "the disk answers a bad one", limit: storage.PageLimitMax + 1, empty: true, broken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			disk := &refusing{Storage: memory.New(), refuse: false}
			m := mirror(ctx, disk, &mirrorLog{}, o)
			for _, b := range mirrorHistory() {
				if _, err := m.Commit(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			disk.refuse, disk.empty = tc.refuse, tc.empty
			_, _ = m.ScanEntries(ctx, storage.EntryQuery{ConversationID: 1, Cursor: storage.Cursor{Limit: tc.limit}})
			if tc.broken {
				wantRule(t, o.first, ruleBackendsAgree)
			} else if o.first != nil {
				t.Fatalf("both refused, yet %v", o.first)
			}
		})
	}
}

// A restart's mirror is the logged batches through the files' last
// sequence: an uncertain batch joins the log when the files kept it and is
// forgotten when they did not, and batches a restart lost leave the log.
func TestMirrorLogRebuildsWhatTheFilesHold(t *testing.T) {
	ctx := context.Background()
	hist := mirrorHistory()
	log := &mirrorLog{}
	for _, b := range hist[:2] {
		log.batches = append(log.batches, b)
		log.last += storage.ID(len(b.Writes))
	}
	log.uncertain = &hist[2]
	if m, ok := log.rebuild(ctx, 6); !ok || m.LastSeq() != 6 || len(log.batches) != 3 || log.last != 6 || log.uncertain != nil {
		t.Fatalf("the uncertain batch that landed: ok %v, log %d batches to %d", ok, len(log.batches), log.last)
	}
	log.uncertain = &storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{mirrorTask(7)}}
	if m, ok := log.rebuild(ctx, 6); !ok || m.LastSeq() != 6 || len(log.batches) != 3 || log.uncertain != nil {
		t.Fatalf("the uncertain batch that did not land: ok %v, %d batches", ok, len(log.batches))
	}
	if m, ok := log.rebuild(ctx, 3); !ok || m.LastSeq() != 3 || len(log.batches) != 2 || log.last != 3 {
		t.Fatalf("a restart that lost the last batch: ok %v, log %d batches to %d", ok, len(log.batches), log.last)
	}
	if _, ok := log.rebuild(ctx, 2); ok {
		t.Fatal("a restart within a batch rebuilt a mirror")
	}
}

// The cold comparison reads each backend's files whole against memory: the
// real JSONL and SQLite stores agree; a store whose scans page wrongly is
// named.
func TestMirrorDiffHoldsClosedFilesWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := map[string]func() (storage.Storage, error){
		"jsonl": func() (storage.Storage, error) {
			return jsonl.Open(ctx, dir+"/s.jsonl", jsonl.Options{})
		},
		"sqlite": func() (storage.Storage, error) {
			return sqlite.Open(ctx, dir+"/s.db", sqlite.Options{Session: "s"})
		},
	}
	for name, openStore := range open {
		st, err := openStore()
		if err != nil {
			t.Fatal(err)
		}
		log := &mirrorLog{}
		for _, b := range mirrorHistory() {
			r, err := st.Commit(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			log.batches, log.last = append(log.batches, b), r.Last
		}
		if d := mirrorDiff(ctx, st, log); d != "" {
			t.Errorf("%s: %s", name, d)
		}
		if d := mirrorDiff(ctx, &skewed{Storage: st, skew: true}, log); !strings.Contains(d, "backends-agree") || !strings.Contains(d, "ScanEntries(") {
			t.Errorf("%s with a skewed scan: %q", name, d)
		}
		st.Close(ctx)
	}
}
