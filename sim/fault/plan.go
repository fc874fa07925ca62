package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pico-go/pico/storage"
)

// Kind is what a fault does to the commit it selects.
type Kind string

const (
	// Hold pauses the commit after construction and before persistence until
	// Release names the fault: readers meanwhile see the previous complete
	// state.
	Hold Kind = "hold"
	// Fail refuses the commit cleanly: nothing persisted, ErrInjected.
	Fail Kind = "fail"
	// Uncertain persists the commit, then returns ErrUncertain.
	Uncertain Kind = "uncertain"
	// Crash kills the process at the commit, after persisting the batch when
	// Persist is set, or after writing a torn prefix of its line when Tear
	// is set; the handle then answers ErrCrashed until Reopen (Restart for
	// a handle of WrapDisk).
	Crash Kind = "crash"
	// UnlinkFail makes the retirement of settled tasks' scratch files (an
	// unlink, or for JSONL's spares emptying the file) fail after the settle
	// committed: their bytes stay on disk.
	UnlinkFail Kind = "unlinkFail"
)

// kinds lists every fault kind, in the order messages name them.
var kinds = []Kind{Hold, Fail, Uncertain, Crash, UnlinkFail}

func (k Kind) valid() bool {
	for _, v := range kinds {
		if k == v {
			return true
		}
	}
	return false
}

// ends reports whether the kind ends the commit it hits, so that at most one
// such fault fires per commit.
func (k Kind) ends() bool { return k == Fail || k == Uncertain || k == Crash }

// Limits of a plan.
const (
	// FaultsMax bounds the faults of one plan.
	FaultsMax = 256
	// NameLenMax bounds a fault's name, in bytes.
	NameLenMax = 64
	// randomFaultsMax bounds the faults RandomPlan draws.
	randomFaultsMax = 3
)

// Fault is one named fault and the commit it selects.
//
// Commit is a 1-based ordinal over the commits that reach a live handle,
// whatever their outcome: the Nth commit of the handle when Batch is empty,
// the Nth commit of that batch kind otherwise. For UnlinkFail it counts only
// commits that settle at least one task, since only those retire scratch;
// such a fault fires only if its commit succeeds. Each fault fires at most
// once; a fault whose commit never comes never fires.
//
// Several faults may select one commit: holds fire first, in plan order, then
// at most one of fail, uncertain and crash (the first in plan order; the
// others never fire), and last, if the commit succeeded, the first
// unlinkFail in plan order.
type Fault struct {
	// Name identifies the fault in the trace, in errors and to Release. It is
	// 1 to NameLenMax letters, digits, '-', '_' or '.', so that it can appear
	// in scheduling point labels and on a command line.
	Name   string            `json:"name"`
	Kind   Kind              `json:"kind"`
	Commit int               `json:"commit"`
	Batch  storage.BatchKind `json:"batch,omitempty"`
	// Settles, when set, names a task kind: Commit then counts only the
	// commits that settle a task of that kind (one a batch both creates
	// and settles included), so a fault can land on the commit that ends
	// a generation, a tool call or a collapse, whatever came before it.
	// Only main batches settle, so Batch is empty or main.
	Settles string `json:"settles,omitempty"`
	// Persist is for Crash only: whether the batch reached durable storage
	// before the process died.
	Persist bool `json:"persist,omitempty"`
	// Tear is for Crash and Fail, on a handle of WrapDisk: a crash's over
	// a Disk that names its files, a fail's over JSONL's or one of
	// CommitGated (SQLite's). On a crash, nonzero, the process dies
	// in the middle of writing the batch. Its bytes reach the file, then
	// the line they end with is cut after an offset drawn from Tear (the
	// seed of the cut, so the plan alone fixes it): at least one byte of
	// the line and never its newline stay on disk. A torn batch is not
	// persisted (the backend's recovery discards an unterminated line), so
	// Tear excludes Persist. On a fail, the disk fills while the store
	// writes the batch, and the process lives on: a JSONL line stops after
	// a prefix drawn from Tear alike, a SQLite transaction fails at its
	// COMMIT, with ErrDiskFull. The store must undo it all (cut the prefix
	// back, roll back, publish nothing), which the handle checks: the
	// firing's Broken says what the store kept. The firing records where a
	// line was cut.
	Tear uint32 `json:"tear,omitempty"`
}

// String describes the fault for messages: `crash "c1" at main commit 3 (persisted)`.
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q at ", f.Kind, f.Name)
	if f.Batch != "" {
		b.WriteString(string(f.Batch) + " ")
	}
	switch {
	case f.Settles != "":
		b.WriteString("settling " + f.Settles + " ")
	case f.Kind == UnlinkFail:
		b.WriteString("settling ")
	}
	fmt.Fprintf(&b, "commit %d", f.Commit)
	if f.Kind == Fail && f.Tear != 0 {
		fmt.Fprintf(&b, " (the disk fills, seed %d)", f.Tear)
	}
	if f.Kind == Crash {
		switch {
		case f.Tear != 0:
			fmt.Fprintf(&b, " (torn, seed %d)", f.Tear)
		case f.Persist:
			b.WriteString(" (persisted)")
		default:
			b.WriteString(" (not persisted)")
		}
	}
	return b.String()
}

// Plan is the data that says which faults a run injects. Its JSON form is
// what traces carry in their header and what ParsePlan reads.
type Plan struct {
	Faults []Fault `json:"faults"`
}

// MarshalJSON writes the canonical form: an empty plan has "faults":[], so
// that a trace header shows that no fault was planned.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan // without this method
	if p.Faults == nil {
		p.Faults = []Fault{}
	}
	return json.Marshal(plain(p))
}

// String is the plan's canonical JSON, which ParsePlan reads back.
func (p Plan) String() string {
	raw, err := json.Marshal(p)
	if err != nil {
		panic("fault: a plan does not encode: " + err.Error())
	}
	return string(raw)
}

// Validate checks the plan and names the first offending field.
func (p Plan) Validate() error {
	if len(p.Faults) > FaultsMax {
		return &PlanError{Index: -1, Field: "faults", Reason: fmt.Sprintf("%d faults, more than %d", len(p.Faults), FaultsMax)}
	}
	seen := make(map[string]int, len(p.Faults))
	for i, f := range p.Faults {
		bad := func(field, format string, args ...any) error {
			return &PlanError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case f.Name == "" && f.Kind == Hold:
			return bad("name", "a hold needs a name: Release names the hold it ends")
		case f.Name == "":
			return bad("name", "empty: every fault is named")
		case len(f.Name) > NameLenMax:
			return bad("name", "%q is longer than %d bytes", f.Name, NameLenMax)
		case strings.IndexFunc(f.Name, badNameRune) >= 0:
			return bad("name", "%q has characters other than letters, digits, '-', '_' and '.'", f.Name)
		}
		if j, dup := seen[f.Name]; dup {
			return bad("name", "duplicate %q (also faults[%d])", f.Name, j)
		}
		seen[f.Name] = i
		if !f.Kind.valid() {
			return bad("kind", "unknown kind %q (want %s)", f.Kind, kindList())
		}
		if f.Commit < 1 {
			return bad("commit", "%d is not a commit ordinal (want 1 or more)", f.Commit)
		}
		switch f.Batch {
		case "", storage.BatchMain, storage.BatchScratch:
		default:
			return bad("batch", "unknown batch kind %q (want %s or %s, or none for any)", f.Batch, storage.BatchMain, storage.BatchScratch)
		}
		if f.Kind == UnlinkFail && f.Batch == storage.BatchScratch {
			return bad("batch", "unlinkFail selects a settle, and only main batches settle")
		}
		switch {
		case f.Settles != "" && f.Batch == storage.BatchScratch:
			return bad("batch", "the fault selects a commit settling %s, and only main batches settle", f.Settles)
		case len(f.Settles) > NameLenMax || strings.ContainsFunc(f.Settles, unicode.IsSpace) || !utf8.ValidString(f.Settles):
			return bad("settles", "%q is not a task kind's name", f.Settles)
		}
		if f.Persist && f.Kind != Crash {
			return bad("persist", "only a crash persists or not; %s is %s", f.Kind, persistenceOf(f.Kind))
		}
		switch {
		case f.Tear != 0 && f.Kind != Crash && f.Kind != Fail:
			return bad("tear", "only a crash or a fail tears a line; %s is %s", f.Kind, persistenceOf(f.Kind))
		case f.Tear != 0 && f.Persist:
			return bad("tear", "a torn batch is not persisted (recovery discards the unterminated line): set persist or tear, not both")
		}
	}
	return nil
}

// tears reports whether the plan tears a line or fills the disk (a fault
// with Tear), which only a handle over files can do; crashes says whether
// to count only crashes.
func (p Plan) tears(crashes bool) (Fault, bool) {
	for _, f := range p.Faults {
		if f.Tear != 0 && (f.Kind == Crash || !crashes) {
			return f, true
		}
	}
	return Fault{}, false
}

func badNameRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		return false
	}
	return true
}

func kindList() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func persistenceOf(k Kind) string {
	switch k {
	case Uncertain, UnlinkFail:
		return "always persisted"
	case Fail:
		return "never persisted"
	}
	return "persisted once released"
}

// ParsePlan reads a plan's JSON form strictly: unknown fields, trailing data
// and invalid plans are errors.
func ParsePlan(data []byte) (Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("fault: plan: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Plan{}, errors.New("fault: plan: data after the plan's JSON object")
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// RandomPlan draws a plan from rng for a run of about commits commits: up to
// three faults with ordinals in 1..commits, named after their kind and
// position ("crash-2"), so the seed that fixes rng fixes the plan. It draws at
// most one crash or uncertain fault, since nothing after either can fire on
// the same handle, and never a hold: a hold needs a releaser that knows its
// name, so scenarios add holds themselves.
func RandomPlan(rng *rand.Rand, commits int) Plan {
	if commits < 1 {
		panic(fmt.Sprintf("fault: RandomPlan for %d commits: want at least one", commits))
	}
	var p Plan
	ended := false
	for i := range rng.IntN(randomFaultsMax + 1) {
		drawn := []Kind{Fail, UnlinkFail, Uncertain, Crash}
		if ended {
			drawn = drawn[:2]
		}
		f := Fault{Kind: drawn[rng.IntN(len(drawn))], Commit: 1 + rng.IntN(commits)}
		f.Name = fmt.Sprintf("%s-%d", f.Kind, i+1)
		batches := []storage.BatchKind{"", storage.BatchMain, storage.BatchScratch}
		if f.Kind == UnlinkFail {
			batches = batches[:2]
		}
		f.Batch = batches[rng.IntN(len(batches))]
		if f.Kind == Crash {
			f.Persist = rng.IntN(2) == 0
		}
		ended = ended || f.Kind == Crash || f.Kind == Uncertain
		p.Faults = append(p.Faults, f)
	}
	return p
}
