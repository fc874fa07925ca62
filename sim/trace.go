package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"

	"github.com/pico-go/pico/sim/clock"
)

// Trace is a run's record: one JSON line per scheduling decision, time jump,
// spawn, exit, failure and recorded event, in order, with a running SHA-256
// digest so two runs compare cheaply at any point. A nil *Trace records
// nothing.
type Trace struct {
	w      io.Writer
	h      hash.Hash
	lines  int
	keep   bool
	kept   []string
	err    error
	digest string
}

// NewTrace returns a trace that writes its lines to w (which may be nil)
// and, when keep is true, also keeps them in memory for Lines.
func NewTrace(w io.Writer, keep bool) *Trace {
	return &Trace{w: w, h: sha256.New(), keep: keep}
}

type event struct {
	Kind   string          `json:"k"`
	Step   int             `json:"step,omitempty"`
	Actor  string          `json:"actor,omitempty"`
	ID     int             `json:"id,omitempty"`
	Point  string          `json:"point,omitempty"`
	Of     int             `json:"of,omitempty"`
	At     int64           `json:"atMs,omitempty"`
	Error  string          `json:"error,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

func (t *Trace) record(e event) {
	if t == nil {
		return
	}
	// Detail is already compact JSON from json.Marshal: splice it in
	// after the other fields rather than have the encoder compact it
	// again (Detail is the last field, so the bytes are the same).
	detail := e.Detail
	e.Detail = nil
	line, err := json.Marshal(e)
	if err != nil {
		panic("sim: trace event does not encode: " + err.Error())
	}
	if len(detail) > 0 {
		line = append(line[:len(line)-1], `,"detail":`...)
		line = append(line, detail...)
		line = append(line, '}')
	}
	t.write(line)
}

func (t *Trace) write(line []byte) {
	line = append(line, '\n')
	t.h.Write(line)
	t.lines++
	t.digest = ""
	if t.keep {
		t.kept = append(t.kept, string(line[:len(line)-1]))
	}
	if t.w != nil && t.err == nil {
		_, t.err = t.w.Write(line)
	}
}

// Digest is the SHA-256 of every line so far, in hex.
func (t *Trace) Digest() string {
	if t.digest == "" {
		t.digest = hex.EncodeToString(t.h.Sum(nil))
	}
	return t.digest
}

// Len is the number of lines so far.
func (t *Trace) Len() int { return t.lines }

// Lines returns the kept lines (only for a trace made with keep).
func (t *Trace) Lines() []string { return t.kept }

// Err is the first error writing to the trace's writer.
func (t *Trace) Err() error { return t.err }

// Record writes an event of the given kind with a detail that must encode to
// JSON, stamped with the current step, virtual time and actor. Faults, commits and
// scenario milestones go into the trace this way. Call it only from an actor.
func (s *Sim) Record(kind string, detail any) {
	if s.trace == nil {
		return
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		panic("sim: Record detail does not encode: " + err.Error())
	}
	e := event{Kind: kind, Step: s.step, At: s.clock.Now().Sub(clock.Epoch).Milliseconds(), Detail: raw}
	if s.cur != nil {
		e.Actor = s.cur.name
	}
	s.trace.record(e)
}
