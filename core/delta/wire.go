package delta

import (
	"encoding/json"
)

// WirePathIDsMax bounds the path dictionary of one stream (until the next
// r). Beyond it the Encoder writes paths inline, and a Decoder rejects a
// definition.
const WirePathIDsMax = 1 << 16

// Encoder is the producer half of the optional wire encoding (§1.4). Use one
// Encoder and one Decoder per ordered stream; do not share them between
// streams, even over one connection.
//
// Within a batch, an op whose path equals the previous op's omits it:
// ["s",v], ["d"], ["a",text], ["t",n], ["p",index,remove,items], ["m",perm].
// Across batches, a path written out a second time is first defined as
// ["#", id, path] and then referred to by id; ids count from 0. An r resets
// both dictionaries and the previous path, so a batch that starts with r is
// a recovery point a fresh Decoder can start from.
type Encoder struct {
	seen map[string]struct{} // paths written inline once
	ids  map[string]int      // paths defined, by their JSON
}

// NewEncoder returns an Encoder at the start of a stream.
func NewEncoder() *Encoder {
	return &Encoder{seen: map[string]struct{}{}, ids: map[string]int{}}
}

// Encode returns the wire form of a batch, a JSON array. A malformed op
// fails the whole batch with an *OpError, and the Encoder is then as it was.
func (e *Encoder) Encode(ops []Op) ([]byte, error) {
	for i, op := range ops {
		if f := checkOp(op); f != nil {
			return nil, f.at(i, op.Verb)
		}
	}
	out := make([]any, 0, len(ops))
	previous, hasPrevious := "", false
	for _, op := range ops {
		if op.Verb == VerbReplace {
			out = append(out, []any{string(op.Verb), op.Value})
			clear(e.seen)
			clear(e.ids)
			hasPrevious = false
			continue
		}
		key := pathKey(op.Path)
		if hasPrevious && key == previous {
			out = append(out, append([]any{string(op.Verb)}, fields(op)...))
			continue
		}
		var ref any = pathJSON(op.Path)
		if id, ok := e.ids[key]; ok {
			ref = id
		} else if _, ok := e.seen[key]; ok && len(e.ids) < WirePathIDsMax {
			id := len(e.ids)
			e.ids[key] = id
			out = append(out, []any{"#", id, pathJSON(op.Path)})
			ref = id
		} else if len(e.seen) < WirePathIDsMax {
			e.seen[key] = struct{}{}
		}
		out = append(out, append([]any{string(op.Verb), ref}, fields(op)...))
		previous, hasPrevious = key, true
	}
	data, err := json.Marshal(out)
	assert(err == nil, "checked ops always marshal")
	return data, nil
}

// pathKey is a path's identity in the dictionary: its JSON.
func pathKey(p Path) string { return p.String() }

// Decoder is the consumer half of the wire encoding: it turns the batches of
// one Encoder, in order, starting at a batch that begins with r (or at the
// stream's start), back into ops.
type Decoder struct {
	paths []Path // by id
}

// NewDecoder returns a Decoder at the start of a stream.
func NewDecoder() *Decoder { return &Decoder{} }

// Decode reads one wire batch. It is as strict as ParseOps, and also rejects
// an omitted path with no previous op in the batch, an undefined id, and an
// id defined out of order. A failing batch returns an *OpError naming the
// index of the wire tuple and leaves the Decoder as it was.
func (d *Decoder) Decode(data []byte) ([]Op, error) {
	raw, f := decodeBatch(data)
	if f != nil {
		return nil, f
	}
	saved := d.paths
	ops := make([]Op, 0, len(raw))
	var previous Path
	for i, x := range raw {
		arr, verb, f := tupleVerb(x)
		var op Op
		if f == nil {
			switch verb {
			case "#":
				f = d.define(arr)
				if f == nil {
					continue
				}
			case VerbReplace:
				op, f = parseOp(x)
				if f == nil {
					d.paths = nil
					previous = nil
				}
			default:
				op, f = d.decodeOp(arr, verb, &previous)
			}
		}
		if f != nil {
			d.paths = saved
			if f.Op == "" {
				f.Op = string(verb)
			}
			return nil, f.at(i, verb)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// define reads ["#", id, path].
func (d *Decoder) define(arr []any) *OpError {
	if len(arr) != 3 {
		return fault(ErrMalformed, "# takes 3 elements, got %d", len(arr))
	}
	id, f := countOf("path id", arr[1])
	if f != nil {
		return f
	}
	if id != len(d.paths) {
		return fault(ErrMalformed, "path id %d defined out of order; the next id is %d", id, len(d.paths))
	}
	if id >= WirePathIDsMax {
		return fault(ErrRange, "path id %d is past the dictionary's bound %d", id, WirePathIDsMax)
	}
	p, f := pathOf(arr[2])
	if f != nil {
		return f
	}
	d.paths = append(d.paths, p)
	return nil
}

// decodeOp reads a tuple other than r and #, whose path may be inline, an
// id, or omitted (then the arity is one less).
func (d *Decoder) decodeOp(arr []any, verb Verb, previous *Path) (Op, *OpError) {
	n, known := fieldCount[verb]
	if !known {
		return Op{}, fault(ErrMalformed, "unknown verb %q", string(verb))
	}
	var path Path
	var rest []any
	switch len(arr) {
	case 1 + n: // the path omitted
		if *previous == nil {
			return Op{}, fault(ErrMalformed, "%s omits its path but no op before it in the batch has one", string(verb))
		}
		path, rest = *previous, arr[1:]
	case 2 + n:
		var f *OpError
		if path, f = d.resolve(arr[1]); f != nil {
			return Op{}, f
		}
		rest = arr[2:]
	default:
		return Op{}, fault(ErrMalformed, "%s takes %d elements, or %d with its path omitted; got %d",
			string(verb), 2+n, 1+n, len(arr))
	}
	*previous = path
	return opFromFields(verb, clonePath(path), rest)
}

// resolve reads a path reference: an inline path or a defined id.
func (d *Decoder) resolve(ref any) (Path, *OpError) {
	if num, ok := ref.(json.Number); ok {
		id, f := countOf("path id", num)
		if f != nil {
			return nil, f
		}
		if id >= len(d.paths) {
			return nil, fault(ErrMalformed, "path id %d is not defined", id)
		}
		return d.paths[id], nil
	}
	return pathOf(ref)
}
