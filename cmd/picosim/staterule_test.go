package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// ruleStore is a memory store whose acknowledged batches are logged, as a
// run's are, for the state rule to derive what it holds.
type ruleStore struct {
	*memory.Store
	log *mirrorLog
}

func newRuleStore() *ruleStore { return &ruleStore{Store: memory.New(), log: &mirrorLog{}} }

func (s *ruleStore) commit(t interface{ Fatalf(string, ...any) }, ws ...storage.Write) storage.ID {
	b := storage.CommitBatch{Kind: storage.BatchMain, Writes: ws}
	r, err := s.Store.Commit(context.Background(), b)
	if err != nil {
		t.Fatalf("commit %s: %v", ws[0].Type, err)
	}
	s.log.batches, s.log.last = append(s.log.batches, b), r.Last
	return r.First
}

func (s *ruleStore) entry(t interface{ Fatalf(string, ...any) }, conv storage.ID) storage.ID {
	next := s.LastSeq() + 1
	return s.commit(t, storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: next, ConversationID: conv, Kind: "user",
		Model: []ai.Message{ai.UserText("m", int64(next))}}})
}

// head commits a reset entry that starts the context at itself.
func (s *ruleStore) head(t interface{ Fatalf(string, ...any) }, conv storage.ID) storage.ID {
	next := s.LastSeq() + 1
	return s.commit(t, storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: next, ConversationID: conv, Kind: "reset", Head: next}})
}

func (s *ruleStore) conversation(t interface{ Fatalf(string, ...any) }, parent *storage.ParentRef) storage.ID {
	return s.commit(t, storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: s.LastSeq() + 1, Parent: parent}})
}

// ruleAddrs are the states the drawn sessions write: each with its one
// kind and policy, in a conversation's scope or the session's.
var ruleAddrs = []struct {
	ns, key      string
	list, rewind bool
	session      bool
}{
	{"r", "", false, true, false}, {"r", "k1", false, true, false}, {"r", "k2", false, true, false},
	{"s", "", false, false, false}, {"s", "k1", false, false, false},
	{"rl", "", true, true, false}, {"sl", "", true, false, false},
	{"g", "k1", false, false, true}, {"gl", "", true, false, true},
}

// On sessions drawn at random (forks of forks at any entry, rewindable and
// sticky values and lists set, deleted, appended to, removed from and
// cleared in any conversation, before and after its forks) the memory
// store reads every state, at every position, as the rule derives it from
// the batches alone: the rule is the store's, written a second time.
func TestTheStateRuleAgreesWithTheMemoryStoreOnDrawnSessions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		s := newRuleStore()
		convs := []storage.ID{s.conversation(t, nil)}
		entries := map[storage.ID][]storage.ID{}
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			conv := convs[rapid.IntRange(0, len(convs)-1).Draw(t, "conv")]
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); {
			case op == 0 && rapid.Bool().Draw(t, "head"):
				entries[conv] = append(entries[conv], s.head(t, conv))
			case op == 0:
				entries[conv] = append(entries[conv], s.entry(t, conv))
			case op == 1 && len(entries[conv]) > 0:
				at := entries[conv][rapid.IntRange(0, len(entries[conv])-1).Draw(t, "at")]
				convs = append(convs, s.conversation(t, &storage.ParentRef{ConversationID: conv, At: at}))
			default:
				a := ruleAddrs[rapid.IntRange(0, len(ruleAddrs)-1).Draw(t, "addr")]
				addr := storage.Address{Scope: storage.ConversationScope(conv), Namespace: a.ns, Key: a.key, Rewind: a.rewind}
				if a.session {
					addr.Scope = storage.SessionScope()
				}
				w := storage.Write{Addr: &addr, Value: json.RawMessage(fmt.Sprint(i))}
				switch r := rapid.IntRange(0, 5).Draw(t, "write"); {
				case !a.list && r == 0:
					w.Type = storage.WriteValueDelete
				case !a.list:
					w.Type = storage.WriteValueSet
				case r == 0:
					w.Type, w.Value = storage.WriteListClear, nil
				case r == 1:
					page, err := s.ReadList(ctx, addr, storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}})
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Items) == 0 {
						continue
					}
					w.Type, w.Value = storage.WriteListRemove, nil
					w.Element = page.Items[rapid.IntRange(0, len(page.Items)-1).Draw(t, "element")].ID
				default:
					w.Type = storage.WriteListAppend
				}
				s.commit(t, w)
			}
		}
		if err := storeReads(ctx, s, s.log); err != nil {
			t.Fatal(err)
		}
	})
}

// lyingStore answers one kind of read wrongly, as a broken backend would.
type lyingStore struct {
	*ruleStore
	lie string
}

func (l *lyingStore) GetValue(ctx context.Context, a storage.Address, at storage.ID) (storage.Version, bool, error) {
	v, ok, err := l.ruleStore.GetValue(ctx, a, at)
	if l.lie == "value-at" && at > 0 {
		return l.ruleStore.GetValue(ctx, a, 0) // history read as now
	}
	return v, ok, err
}

func (l *lyingStore) ReadList(ctx context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	p, err := l.ruleStore.ReadList(ctx, a, q)
	switch {
	case l.lie == "list-inherited" && a.Scope.ID != 1 && len(p.Items) > 0:
		p.Items = p.Items[1:] // a fork loses what it inherited
	case l.lie == "list-page-end" && q.Limit < storage.PageLimitMax:
		p.Next = 0 // a short page says it is the last
	case l.lie == "list-window" && q.After != 0 && q.Before != 0:
		return l.ruleStore.ReadList(ctx, a, storage.ListQuery{Cursor: storage.Cursor{After: q.After, Limit: q.Limit}, At: q.At})
	}
	return p, err
}

func (l *lyingStore) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	p, err := l.ruleStore.ScanEntries(ctx, q)
	switch {
	case l.lie == "entries-kind" && q.Kind != "" && len(p.Items) > 0:
		p.Items = p.Items[1:] // what a fork inherited of the kind is lost
	case l.lie == "entries-backward" && q.Backward() && len(p.Items) > 1:
		p.Items = p.Items[1:] // a backward page one short
	}
	return p, err
}

func (l *lyingStore) NewestHead(ctx context.Context, conv, at storage.ID) (*storage.Entry, bool, error) {
	if l.lie == "head-now" {
		at = 0 // every position read as now
	}
	return l.ruleStore.NewestHead(ctx, conv, at)
}

func (l *lyingStore) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	p, err := l.ruleStore.ScanValues(ctx, q)
	switch {
	case l.lie == "scan" && len(p.Items) > 0:
		p.Items = p.Items[:len(p.Items)-1]
	case l.lie == "scan-page" && q.Limit == 1 && q.After != "":
		p.Items, p.Next = nil, 0 // the second page comes back empty
	}
	return p, err
}

// A store that reads a value's history as its present, a fork's list
// without what it inherited, a namespace scan short of a key, a short
// page of a list as its last, a list's window past its Before, or a
// namespace's second page of one key as empty, breaks the state rule; a
// transcript scanned by kind without what it inherited, a short backward
// page of one, or a newest head read at every position as now, breaks
// the transcript rule; each names the read,
// what it answered and what the rule derives.
func TestTheStateRuleCatchesAStoreThatReadsStateWrongly(t *testing.T) {
	ctx := context.Background()
	s := newRuleStore()
	root := s.conversation(t, nil)
	write := func(typ storage.WriteType, conv storage.ID, ns, key, value string, rewind bool) {
		addr := storage.Address{Scope: storage.ConversationScope(conv), Namespace: ns, Key: key, Rewind: rewind}
		w := storage.Write{Type: typ, Addr: &addr}
		if value != "" {
			w.Value = json.RawMessage(value)
		}
		s.commit(t, w)
	}
	write(storage.WriteValueSet, root, "r", "k1", "1", true)
	write(storage.WriteListAppend, root, "rl", "", `"a"`, true)
	at := s.entry(t, root)
	write(storage.WriteValueSet, root, "r", "k1", "2", true)
	write(storage.WriteValueSet, root, "r", "k2", "3", true)
	fork := s.conversation(t, &storage.ParentRef{ConversationID: root, At: at})
	s.entry(t, fork)
	s.head(t, fork)
	s.entry(t, fork)
	s.head(t, fork)
	write(storage.WriteListAppend, fork, "rl", "", `"b"`, true)
	write(storage.WriteListAppend, fork, "rl", "", `"c"`, true)
	write(storage.WriteListAppend, fork, "rl", "", `"d"`, true)
	if err := storeReads(ctx, s, s.log); err != nil {
		t.Fatalf("the honest store breaks the rule: %v", err)
	}
	for lie, want := range map[string]string{
		"value-at":         "GetValue(",
		"list-inherited":   "ReadList(",
		"scan":             "ScanValues(",
		"list-page-end":    "forward from",
		"list-window":      "inside from",
		"scan-page":        "limit 1",
		"entries-kind":     "ScanEntries(conversation",
		"entries-backward": "backward from",
		"head-now":         "NewestHead(",
	} {
		err := storeReads(ctx, &lyingStore{ruleStore: s, lie: lie}, s.log)
		var v *oracleError
		rule := ruleStateReads
		if strings.HasPrefix(lie, "entries") || strings.HasPrefix(lie, "head") {
			rule = ruleTranscripts
		}
		if !errors.As(err, &v) || v.Rule != rule || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: storeReads = %v, want a %s violation naming %s", lie, err, rule, want)
		}
	}
}

// A log that does not account for every sequence of the store (a restart
// lost track of a batch) holds nothing to the rule rather than failing
// the run falsely.
func TestTheStateRuleHoldsNothingToAnIncompleteLog(t *testing.T) {
	s := newRuleStore()
	root := s.conversation(t, nil)
	s.entry(t, root)
	s.log.batches = s.log.batches[1:]
	if err := storeReads(context.Background(), &lyingStore{ruleStore: s, lie: "value-at"}, s.log); err != nil {
		t.Fatalf("storeReads over an incomplete log = %v, want nothing held", err)
	}
}

// A fork that carries values reads each as its source has it, whether the
// source's is sticky (which a fork does not inherit) or rewindable and
// written after the fork point; one the source does not have reads as the
// fork inherits it. A fork whose carried value reads otherwise breaks the
// rule.
func TestAForkCarriesItsValues(t *testing.T) {
	var broken error
	afterBasicTurn(t, func(ctx context.Context, _ *sim.Sim, e *env) (problems []string) {
		c := e.h.Root()
		page, err := e.h.Entries(ctx, root, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil || len(page.Items) < 2 {
			return []string{fmt.Sprintf("root's entries: %v, %v", page.Items, err)}
		}
		at := page.Items[0].ID
		sticky := storage.ConversationValue[int]("host.s", storage.Sticky)
		rewind := storage.ConversationValue[int]("host.r", storage.Rewind)
		missing := storage.ConversationValue[int]("host.r/none", storage.Rewind)
		for _, v := range []storage.Value[int]{sticky, rewind} {
			if err := core.ValueOf(c, v).Set(ctx, 7); err != nil {
				return []string{"set: " + err.Error()}
			}
		}
		values := []storage.Address{sticky.Address, rewind.Address, missing.Address}
		fork, err := c.Fork(ctx, at, core.ForkOptions{Values: values})
		if err != nil {
			return []string{"fork: " + err.Error()}
		}
		if err := e.checkCarried(ctx, root, at, fork.ID, values); err != nil {
			problems = append(problems, "the fork as made: "+err.Error())
		}
		if err := core.ValueOf(fork, sticky).Set(ctx, 8); err != nil {
			return append(problems, "set in the fork: "+err.Error())
		}
		broken = e.checkCarried(ctx, root, at, fork.ID, values)
		return problems
	})
	holdsOrBreaks(t, broken, ruleForkCarries, true)
}
