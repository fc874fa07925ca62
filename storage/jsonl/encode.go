package jsonl

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/storage"
)

// encodeLine writes l as json.Marshal does, byte for byte, without
// reflection: its writes by storage.AppendWrite, and what that cannot
// write the same way, the whole line by json.Marshal, so its errors are
// encoding/json's. The tests hold the two to the same bytes. It appends to
// buf.
func encodeLine(buf []byte, l line) ([]byte, error) {
	var e lineEncoder
	out, _, err := e.encode(buf, l, nil)
	return out, err
}

// priorStates gives a task's state before the line (memory.Store).
type priorStates interface {
	TaskState(id storage.ID) (json.RawMessage, bool)
}

// lineEncoder is encodeLine with what it keeps from one line to the next:
// a store's, whose commits are serialized.
type lineEncoder struct {
	merge   []byte
	members [2][]member
}

// encode is encodeLine. With prior set, a patch or settle whose state is
// better written as a merge over the task's state before the line
// (merge.go) is written so: prior holds that state, and stateDiff
// decides. The line is then what json.Marshal writes of the diskLine with
// those merges; full is the length of the line written whole, which is
// what the batch limit holds.
func (e *lineEncoder) encode(buf []byte, l line, prior priorStates) (out []byte, full int, err error) {
	out = append(buf, `{"first":`...)
	out = strconv.AppendInt(out, int64(l.First), 10)
	if l.Task != 0 {
		out = append(out, `,"task":`...)
		out = strconv.AppendInt(out, int64(l.Task), 10)
	}
	out = append(out, `,"writes":`...)
	if l.Writes == nil {
		out = append(out, "null}"...)
		return out, len(out) - len(buf), nil
	}
	out = append(out, '[')
	saved := 0 // the bytes the merges save
	for i := range l.Writes {
		if i > 0 {
			out = append(out, ',')
		}
		w := &l.Writes[i]
		if prior != nil && (w.Type == storage.WritePatch || w.Type == storage.WriteSettle) && len(w.State) != 0 && !writtenBefore(l.Writes[:i], w.ID) {
			if prev, ok := prior.TaskState(w.ID); ok {
				if e.merge, ok = stateDiff(e.merge[:0], prev, w.State, &e.members); ok {
					bare := *w
					bare.State = nil
					if out, ok = storage.AppendWrite(out, &bare); !ok {
						raw, err := json.Marshal(l)
						return append(buf, raw...), len(raw), err
					}
					out = append(out[:len(out)-1], e.merge...) // before the write's closing brace
					out = append(out, '}')
					// Written whole, the state is verbatim (stateDiff).
					saved += len(`,"state":`) + len(w.State) - len(e.merge)
					continue
				}
			}
		}
		var ok bool
		if out, ok = storage.AppendWrite(out, w); !ok {
			raw, err := json.Marshal(l)
			return append(buf, raw...), len(raw), err
		}
	}
	out = append(out, "]}"...)
	return out, len(out) - len(buf) + saved, nil
}

// writtenBefore reports whether one of ws creates, patches or settles task
// id: a merge is over the state before the line, so a task the line wrote
// already is written whole.
func writtenBefore(ws []storage.Write, id storage.ID) bool {
	for i := range ws {
		switch w := &ws[i]; w.Type {
		case storage.WriteTask:
			if w.Task != nil && w.Task.ID == id {
				return true
			}
		case storage.WritePatch, storage.WriteSettle:
			if w.ID == id {
				return true
			}
		}
	}
	return false
}
