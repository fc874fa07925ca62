package jsonl

import (
	"encoding/json"
	"strconv"

	"github.com/pico-go/pico/storage"
)

// encodeLine writes l as json.Marshal does, byte for byte, without
// reflection: its writes by storage.AppendWrites, and what that cannot
// write the same way, the whole line by json.Marshal, so its errors are
// encoding/json's. The tests hold the two to the same bytes. It appends to
// buf.
func encodeLine(buf []byte, l line) ([]byte, error) {
	out := append(buf, `{"first":`...)
	out = strconv.AppendInt(out, int64(l.First), 10)
	if l.Task != 0 {
		out = append(out, `,"task":`...)
		out = strconv.AppendInt(out, int64(l.Task), 10)
	}
	out = append(out, `,"writes":`...)
	if out, ok := storage.AppendWrites(out, l.Writes); ok {
		return append(out, '}'), nil
	}
	raw, err := json.Marshal(l)
	return append(buf, raw...), err
}
