package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/pico-go/pico/conformance/script"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/storage"
)

// The host-commit rule (pico-v3.md §3.2, §9.1): a host's own commit of
// several state writes lands whole or not at all, as the rules of a batch
// decide, derived here on their own from the batches committed before it:
//   - it is refused (rewindable-state-after-entry) when it writes
//     rewindable conversation state after an entry of the same commit;
//     otherwise (storage-structure) when a write's policy or kind is not
//     its state's (as first written, earlier in the commit included), or
//     it removes an element the list does not show as the commit built
//     it (removed before in it, cleared, never there); otherwise it
//     commits;
//   - a refused one leaves nothing of it behind;
//   - a committed one is, write for write, what the host asked for, in its
//     order: each address bound to the commit's conversation, each value
//     as given, each appended element numbered by its own sequence;
//   - what the commit read of committed state, before it wrote, is what
//     the state rule derives from the batches before it;
//   - afterwards, the conversation's and the session's value and list
//     handles read each state it wrote as the state rule derives it now
//     and at a position in its history, a list page by page too, and the
//     conversation's Snapshot is its record.
//
// A commit that fails without a rule (the session's fault, a crash) is
// not judged.

// ruleHostTx: a host commit lands whole as the batch rules say, as asked.
const ruleHostTx oracleRule = "a-host-commit-lands-whole-or-not-at-all"

// stateTx is what a host commit writes and reads state through: *core.Tx
// (the session's commit) and *core.ConversationTx (a conversation's, which
// binds an unbound conversation address to itself) both are.
type stateTx interface {
	SetValue(storage.Address, any)
	DeleteValue(storage.Address)
	Append(storage.Address, any) storage.ID
	Remove(storage.Address, storage.ID)
	Clear(storage.Address)
	GetValue(storage.Address, storage.ID) (storage.Version, bool, error)
	ReadList(storage.Address, storage.ListQuery) (storage.Page[storage.Element], error)
}

// txDid is one write a host commit made: its type, bound address, value
// and element (a remove's), and what Append returned.
type txDid struct {
	typ      storage.WriteType
	addr     storage.Address
	value    json.RawMessage
	element  storage.ID
	appended storage.ID
}

// txRead is what a host commit read of one state before it wrote it.
type txRead struct {
	addr  storage.Address
	list  bool
	ver   storage.Version
	ok    bool
	elems []storage.Element
	err   error
}

// txAddress is the address a tx write names: session state (of a session
// commit, or a write whose policy says session), or the target
// conversation's, unbound (the conversation's commit binds it) when bound
// is 0.
func txAddress(w script.TxWrite, session bool, bound storage.ID) storage.Address {
	ns, key, _ := strings.Cut(w.Name, "/")
	a := storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation, ID: bound}, Namespace: ns, Key: key, Rewind: w.Policy == "rewind"}
	if session || w.Policy == "session" {
		a.Scope = storage.SessionScope()
	}
	return a
}

// hostTx runs a program's tx line: the writes in one commit of the target
// conversation (through its ConversationTx, addresses unbound) or of the
// session (through Harness.Commit), then holds the outcome to the rule.
func (g *programRun) hostTx(ctx context.Context, l progLine) error {
	e := g.e
	writes, err := script.TxOf(l.shared())
	if err != nil {
		return err
	}
	session := l.args[0] == "session"
	var conv storage.ID
	var c *core.Conversation
	if !session {
		conv = g.conv(l.args[0])
		if c, err = e.h.Harness.Conversation(ctx, conv); err != nil {
			return err
		}
	}
	var did []txDid
	var reads []txRead
	plan := func(tx stateTx, note func()) {
		did, reads = nil, nil
		views := map[storage.StateRef][]storage.ID{} // a list's elements as the commit sees it
		read := map[storage.StateRef]bool{}
		var removed *txDid
		for _, w := range writes {
			if w.Verb == "note" {
				note()
				did = append(did, txDid{typ: storage.WriteEntry})
				continue
			}
			a := txAddress(w, session, 0)
			bound := txAddress(w, session, conv)
			ref := bound.Ref()
			if !read[ref] {
				read[ref] = true
				r := txRead{addr: bound, list: w.List()}
				if r.list {
					r.elems, r.err = storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Element], error) {
						cur.Limit = pageLimit
						return tx.ReadList(a, storage.ListQuery{Cursor: cur})
					})
					for _, el := range r.elems {
						views[ref] = append(views[ref], el.ID)
					}
				} else {
					r.ver, r.ok, r.err = tx.GetValue(a, 0)
				}
				reads = append(reads, r)
			}
			switch w.Verb {
			case "set":
				tx.SetValue(a, json.RawMessage(w.Arg))
				did = append(did, txDid{typ: storage.WriteValueSet, addr: bound, value: json.RawMessage(w.Arg)})
			case "del":
				tx.DeleteValue(a)
				did = append(did, txDid{typ: storage.WriteValueDelete, addr: bound})
			case "add", "fill":
				vals := []string{w.Arg}
				if w.Verb == "fill" {
					vals = nil
					for i := range atoi(w.Arg) {
						vals = append(vals, fmt.Sprintf(`{"i":%d}`, i+1))
					}
				}
				for _, v := range vals {
					id := tx.Append(a, json.RawMessage(v))
					did = append(did, txDid{typ: storage.WriteListAppend, addr: bound, value: json.RawMessage(v), appended: id})
					views[ref] = append(views[ref], id)
				}
			case "rm":
				view := views[ref]
				if len(view) == 0 {
					continue // nothing to remove
				}
				i := script.Nth(atoi(w.Arg), len(view))
				tx.Remove(a, view[i])
				did = append(did, txDid{typ: storage.WriteListRemove, addr: bound, element: view[i]})
				last := did[len(did)-1]
				removed = &last
				views[ref] = slices.Delete(slices.Clone(view), i, i+1)
			case "rerm":
				if removed == nil || removed.addr != bound {
					continue // nothing removed from this list yet
				}
				tx.Remove(a, removed.element)
				did = append(did, txDid{typ: storage.WriteListRemove, addr: bound, element: removed.element})
			case "clr":
				tx.Clear(a)
				did = append(did, txDid{typ: storage.WriteListClear, addr: bound})
				views[ref] = nil
			}
		}
	}
	var pre storage.ID
	if e.mirrorLog != nil {
		pre = e.mirrorLog.last
	}
	var rng storage.Range
	if session {
		rng, err = e.h.Commit(ctx, func(tx *core.Tx) error {
			plan(tx, nil)
			return nil
		})
	} else {
		rng, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
			plan(tx, func() { tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "host note"}}) })
			return nil
		})
	}
	if herr := e.oracle.hostTxHeld(ctx, e.h.Harness, e.mirrorLog, pre, conv, session, did, reads, rng, err); herr != nil {
		return herr
	}
	return err
}

// txVerdict is what the rule says of a host commit, from the batches
// before it: the rule it breaks, if any, the write that breaks it (an
// index into did) and why. The kernel's rules come first, in write order
// (a commit stops at its first bad write); the store's, over the batch it
// would commit, after them.
func txVerdict(before *stateModel, did []txDid) (core.Rule, int, string) {
	entry := -1
	for i, d := range did {
		switch {
		case d.typ == storage.WriteEntry:
			if entry < 0 {
				entry = i
			}
		case d.addr.Validate() != nil:
			return core.RuleBadAddress, i, fmt.Sprintf("write %d's address %s is not one: %v", i+1, d.addr, d.addr.Validate())
		case entry >= 0 && d.addr.Historical():
			return core.RuleStateAfterEntry, i, fmt.Sprintf("write %d sets rewindable %s after the note of write %d", i+1, d.addr, entry+1)
		}
	}
	type policy struct{ rewind, list bool }
	known := map[storage.StateRef]policy{}
	views := map[storage.StateRef][]storage.ID{}
	for i, d := range did {
		if d.typ == storage.WriteEntry {
			continue
		}
		ref, list := d.addr.Ref(), isListWrite(d.typ)
		p, ok := known[ref]
		if !ok {
			if st := before.states[ref]; st != nil {
				p = policy{st.addr.Rewind, st.list}
			} else {
				p = policy{d.addr.Rewind, list}
			}
			known[ref] = p
			if list {
				for _, el := range elementsOf(before.visible(ref, true, 0)) {
					views[ref] = append(views[ref], el.ID)
				}
			}
		}
		switch {
		case p.rewind != d.addr.Rewind:
			return core.RuleStorage, i, fmt.Sprintf("write %d writes %s with rewind=%t; it is stored with %t", i+1, d.addr, d.addr.Rewind, p.rewind)
		case p.list != list:
			return core.RuleStorage, i, fmt.Sprintf("write %d writes %s as a %s; it is a %s", i+1, d.addr, kindName(list), kindName(p.list))
		}
		switch d.typ {
		case storage.WriteListAppend:
			views[ref] = append(views[ref], d.appended)
		case storage.WriteListRemove:
			if !slices.Contains(views[ref], d.element) {
				return core.RuleStorage, i, fmt.Sprintf("write %d removes element %d, which list %s does not show", i+1, d.element, d.addr)
			}
			views[ref] = slices.DeleteFunc(slices.Clone(views[ref]), func(id storage.ID) bool { return id == d.element })
		case storage.WriteListClear:
			views[ref] = nil
		}
	}
	return "", -1, ""
}

func kindName(list bool) string {
	if list {
		return "list"
	}
	return "value"
}

// batchesThrough is the log's batches that end at or before seq, and
// whether one ends exactly there.
func batchesThrough(log *mirrorLog, seq storage.ID) ([]storage.CommitBatch, bool) {
	at := storage.ID(0)
	for i, b := range log.batches {
		if at == seq {
			return log.batches[:i], true
		}
		at += storage.ID(len(b.Writes))
	}
	return log.batches, at == seq
}

// hostTxHeld holds a host commit that wrote did (reading reads first),
// began when the log ended at pre and returned rng and err, to the rule.
func (o *oracle) hostTxHeld(ctx context.Context, h *core.Harness, log *mirrorLog, pre, conv storage.ID, session bool,
	did []txDid, reads []txRead, rng storage.Range, err error) error {
	if log == nil || h == nil {
		return nil
	}
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleHostTx, "the host's commit of %s: %s", describeDid(did), fmt.Sprintf(format, args...)))
	}
	got := core.RuleOf(err)
	if err != nil && got == "" {
		return nil // the session's fault, a crash: not judged
	}
	// The batches before the commit: up to its first sequence when it
	// committed, up to where the log ended when it began when it was
	// refused (nothing of it may land).
	end := rng.First - 1
	if err != nil {
		end = pre
	}
	prior, ok := batchesThrough(log, end)
	if !ok {
		return nil // the log lost track of a restart
	}
	before, ok := modelOf(prior, end)
	if !ok || !session && before.deleted[conv] {
		return nil // a deleted conversation's commit is another rule's
	}
	want, bad, why := txVerdict(before, did)
	switch {
	case err == nil && want != "":
		return fail("committed at %d-%d, though it breaks %s: %s", rng.First, rng.Last, want, why)
	case err != nil && want == "":
		return fail("refused (%v), though the rules allow it", err)
	case err != nil && got != want:
		return fail("refused by %s (%v); the rule refuses it by %s: %s", got, err, want, why)
	case err != nil && !strings.Contains(err.Error(), strconv.Quote(did[bad].addr.Namespace)):
		return fail("refused with %q, which does not name the state of its bad write (%s)", err, why)
	case err != nil:
		for _, b := range log.batches[len(prior):] {
			for _, w := range b.Writes {
				if w.Addr != nil && slices.ContainsFunc(did, func(d txDid) bool { return d.addr == *w.Addr }) {
					return fail("refused (%v), yet a batch after it writes %s", err, w.Addr)
				}
			}
		}
	default:
		if ferr := holdTxBatch(log, prior, rng, conv, did, fail); ferr != nil {
			return ferr
		}
		if ferr := holdTxReads(before, reads, fail); ferr != nil {
			return ferr
		}
	}
	return o.holdHandles(ctx, h, log, conv, session, did, fail)
}

// holdTxBatch holds the committed batch, the one after prior, to did.
func holdTxBatch(log *mirrorLog, prior []storage.CommitBatch, rng storage.Range, conv storage.ID, did []txDid, fail func(string, ...any) error) error {
	if len(prior) == len(log.batches) {
		return nil // not logged: the commit's batch was uncertain
	}
	b := log.batches[len(prior)]
	if len(b.Writes) != len(did) || rng.Last-rng.First+1 != storage.ID(len(did)) {
		return fail("committed %d writes at %d-%d; it made %d", len(b.Writes), rng.First, rng.Last, len(did))
	}
	for i, d := range did {
		w, seq := b.Writes[i], rng.First+storage.ID(i)
		switch {
		case w.Type != d.typ:
			return fail("write %d (sequence %d) is a %s; the host made a %s", i+1, seq, w.Type, d.typ)
		case d.typ == storage.WriteEntry:
			if w.Entry == nil || w.Entry.Kind != core.NoticeKind.Kind() || w.Entry.ConversationID != conv {
				return fail("write %d (sequence %d) is %+v; the host noted in conversation %d", i+1, seq, w.Entry, conv)
			}
		case w.Addr == nil || *w.Addr != d.addr:
			return fail("write %d (sequence %d) is at %v; the host wrote %s", i+1, seq, w.Addr, d.addr)
		case !sameCompact(w.Value, d.value):
			return fail("write %d (sequence %d) holds %s; the host wrote %s", i+1, seq, w.Value, d.value)
		case w.Element != d.element:
			return fail("write %d (sequence %d) removes element %d; the host removed %d", i+1, seq, w.Element, d.element)
		case d.typ == storage.WriteListAppend && d.appended != seq:
			return fail("Append of write %d returned element %d; it committed at %d", i+1, d.appended, seq)
		}
	}
	return nil
}

// sameCompact reports whether two payloads are the same JSON, byte for
// byte once compacted (both absent counts).
func sameCompact(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// holdTxReads holds what the commit read before it wrote to what the
// state rule derives from the batches before it, for each state whose
// policy and kind the read's are.
func holdTxReads(before *stateModel, reads []txRead, fail func(string, ...any) error) error {
	for _, r := range reads {
		if bad := r.addr.Validate(); bad != nil {
			if r.err == nil {
				return fail("its read of %s, no address (%v), succeeds", r.addr, bad)
			}
			continue
		}
		ref := r.addr.Ref()
		if st := before.states[ref]; st != nil && (st.addr.Rewind != r.addr.Rewind || st.list != r.list) {
			continue
		}
		if r.err != nil {
			return fail("its read of %s fails: %v", r.addr, r.err)
		}
		ops := before.visible(ref, r.list, 0)
		if r.list {
			if want := elementsOf(ops); !sameElements(want, r.elems) {
				return fail("ReadList(%s), in the commit, reads %s; the rule, before it, %s", r.addr, showElements(r.elems), showElements(want))
			}
			continue
		}
		if want, ok := valueOf(ops); ok != r.ok || ok && (want.Seq != r.ver.Seq || !bytes.Equal(want.Value, r.ver.Value)) {
			return fail("GetValue(%s), in the commit, reads %s; the rule, before it, %s", r.addr, showVersion(r.ver, r.ok), showVersion(want, ok))
		}
	}
	return nil
}

// holdHandles reads each state the commit wrote (with its state's policy
// and kind) through the value and list handles, the conversation's with
// the address unbound and the harness's with it bound, now and at a
// position of its history, and holds them to the state rule over the
// whole log; and the conversation's Snapshot to its record.
func (o *oracle) holdHandles(ctx context.Context, h *core.Harness, log *mirrorLog, conv storage.ID, session bool, did []txDid, fail func(string, ...any) error) error {
	now, ok := modelOf(log.batches, log.last)
	if !ok || h.Store().LastSeq() != log.last {
		return nil
	}
	var c *core.Conversation
	if !session {
		var err error
		if c, err = h.Conversation(ctx, conv); err != nil {
			return nil // deleted meanwhile
		}
		snap, err := c.Snapshot(ctx)
		if err != nil {
			return fail("the conversation's Snapshot fails: %v", err)
		}
		if rec := now.convs[conv]; rec != nil && !cmp.Equal(snap, *rec) {
			return fail("conversation %d's Snapshot is %s; its record %s", conv, showConversation(snap), showConversation(*rec))
		}
	}
	seen := map[storage.StateRef]bool{}
	for _, d := range did {
		ref := d.addr.Ref()
		if d.typ == storage.WriteEntry || seen[ref] {
			continue
		}
		seen[ref] = true
		list := isListWrite(d.typ)
		if st := now.states[ref]; st == nil || st.addr.Rewind != d.addr.Rewind || st.list != list {
			continue
		}
		ats := []storage.ID{0}
		if d.addr.Historical() {
			if pos := now.positions(ref); len(pos) > 1 {
				ats = append(ats, pos[len(pos)/2])
			}
		}
		unbound := d.addr
		if !session {
			unbound.Scope.ID = 0
		}
		for _, at := range ats {
			ops := now.visible(ref, list, at)
			if !list {
				want, wantOK := valueOf(ops)
				handles := map[string]core.ValueHandle[json.RawMessage]{"Harness.Value": h.Value(d.addr)}
				if c != nil {
					handles["Conversation.Value"] = c.Value(unbound)
				}
				for _, name := range []string{"Harness.Value", "Conversation.Value"} {
					v, present := handles[name]
					if !present {
						continue
					}
					got, gotOK, err := v.At(ctx, at)
					if err != nil {
						return fail("%s(%s).At(%d) fails: %v", name, v.Address(), at, err)
					}
					if gotOK != wantOK || wantOK && !sameCompact(got, want.Value) {
						return fail("%s(%s).At(%d) reads %s (%t); the rule %s", name, v.Address(), at, got, gotOK, showVersion(want, wantOK))
					}
				}
				continue
			}
			want := elementsOf(ops)
			handles := map[string]core.ListHandle[json.RawMessage]{"Harness.List": h.List(d.addr)}
			if c != nil {
				handles["Conversation.List"] = c.List(unbound)
			}
			for _, name := range []string{"Harness.List", "Conversation.List"} {
				lh, present := handles[name]
				if !present {
					continue
				}
				if at == 0 {
					all, err := lh.All(ctx)
					if err != nil {
						return fail("%s(%s).All fails: %v", name, lh.Address(), err)
					}
					if got := fromElems(all); !sameElements(want, got) {
						return fail("%s(%s).All reads %s; the rule %s", name, lh.Address(), showElements(got), showElements(want))
					}
				}
				err := holdPages(ruleHostTx, fmt.Sprintf("%s(%s).Read(at %d", name, lh.Address(), at), h.Store().LastSeq(), want,
					func(cur storage.Cursor) (storage.Page[storage.Element], error) {
						items, next, err := lh.Read(ctx, storage.ListQuery{Cursor: cur, At: at})
						return storage.Page[storage.Element]{Items: fromElems(items), Next: next}, err
					}, func(e storage.Element) storage.ID { return e.ID }, sameElements, showElements)
				if err != nil {
					return o.fail(err)
				}
			}
		}
	}
	return nil
}

// fromElems is a handle's elements as the store's.
func fromElems(es []core.Elem[json.RawMessage]) []storage.Element {
	out := make([]storage.Element, len(es))
	for i, e := range es {
		out[i] = storage.Element{ID: e.ID, Value: e.Value}
	}
	return out
}

// describeDid names a host commit's writes, briefly.
func describeDid(did []txDid) string {
	var parts []string
	for _, d := range did {
		switch d.typ {
		case storage.WriteEntry:
			parts = append(parts, "a note")
		case storage.WriteListRemove:
			parts = append(parts, fmt.Sprintf("%s %s %d", d.typ, d.addr, d.element))
		default:
			parts = append(parts, fmt.Sprintf("%s %s %s", d.typ, d.addr, d.value))
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:5], "… "+strconv.Itoa(len(parts)-5)+" more")
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// hostTxSeeds is how often a drawn program makes commits of its own: every
// fifth seed from 2, not the golden traces' seed 1.
const hostTxSeeds = 5

// drawHostTxs has the program of every hostTxSeeds-th seed from 2 make one
// to three commits of its own state, from a generator of their own, at
// random places before the final drive: each one to six writes to the
// root, the newest conversation or the session, of the states the state
// lines write (stateNames), now and then with the other policy or the
// other kind's verb (a refusal), a note before a rewindable write (§3.2's
// refusal), a list filled past a batch's small maps (more than 16
// elements), or an element removed twice (a third of the removes are
// repeated at once); one write in five of a
// conversation's commit names the session's own state instead.
func drawHostTxs(p *program, seed uint64) {
	if seed%hostTxSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "host-tx")
	// Now and then a conversation's commit writes session state, which its
	// binding must leave alone: from a generator of its own, so that the
	// other draws stay as they were.
	crossRNG := seededRNG(seed, "host-tx-session")
	// A third of the removes are followed at once by the same element's
	// again (a refusal), from a generator of their own too.
	rermRNG := seededRNG(seed, "host-tx-rerm")
	var sessionNames []stateName
	for _, st := range stateNames {
		if st.target == "session" {
			sessionNames = append(sessionNames, st)
		}
	}
	for range 1 + rng.IntN(3) {
		target := []string{"c0", "c0", "c0", "c-1", "c-1", "session"}[rng.IntN(6)]
		kind := "c"
		if target == "session" {
			kind = "session"
		}
		var names []stateName
		for _, st := range stateNames {
			if st.target == kind {
				names = append(names, st)
			}
		}
		args := []string{target}
		for range 1 + rng.IntN(6) {
			st := names[rng.IntN(len(names))]
			policy := st.policy
			if rng.IntN(30) == 0 {
				policy = map[string]string{"rewind": "sticky", "sticky": "rewind"}[policy]
			}
			op := st.op
			if rng.IntN(30) == 0 {
				op = map[string]string{"value": "list", "list": "value"}[op]
			}
			val := strconv.Itoa(1 + rng.IntN(9))
			if rng.IntN(3) == 0 {
				val = fmt.Sprintf(`{"n":%s}`, val)
			}
			w := script.TxWrite{Name: st.name, Policy: policy}
			if target != "session" && crossRNG.IntN(5) == 0 {
				cross := sessionNames[crossRNG.IntN(len(sessionNames))]
				w.Name, w.Policy, op = cross.name, "session", cross.op
			}
			if op == "value" {
				w.Verb = []string{"set", "set", "set", "del"}[rng.IntN(4)]
			} else {
				w.Verb = []string{"add", "add", "add", "rm", "rm", "fill", "clr", "rerm"}[rng.IntN(8)]
			}
			switch w.Verb {
			case "set", "add":
				w.Arg = val
			case "rm":
				w.Arg = strconv.Itoa(rng.IntN(5) - 2)
			case "fill":
				w.Arg = strconv.Itoa(2 + rng.IntN(8))
			}
			if target != "session" && rng.IntN(20) == 0 {
				args = append(args, "note")
			}
			if w.Verb == "fill" && rng.IntN(2) == 0 {
				// Past a batch's small maps, then removed from: what the
				// batch appended is in it.
				w.Arg = strconv.Itoa(17 + rng.IntN(script.TxFillMax-16))
				clr, rm := w, w
				clr.Verb, clr.Arg = "clr", ""
				rm.Verb, rm.Arg = "rm", strconv.Itoa(rng.IntN(5))
				if rng.IntN(2) == 0 {
					args = append(args, clr.String())
				}
				args = append(args, w.String(), rm.String())
				continue
			}
			args = append(args, w.String())
			if w.Verb == "rm" && rermRNG.IntN(3) == 0 {
				rerm := w
				rerm.Verb, rerm.Arg = "rerm", ""
				args = append(args, rerm.String())
			}
		}
		l := progLine{op: "tx", args: args}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), l) // before the final drive
	}
}

// showConversation is a conversation record, its fork point spelled out.
func showConversation(c storage.Conversation) string {
	s := fmt.Sprintf("{id %d owner %d", c.ID, c.Owner)
	if c.Parent != nil {
		s += fmt.Sprintf(" forked from %d at %d", c.Parent.ConversationID, c.Parent.At)
	}
	return s + "}"
}
