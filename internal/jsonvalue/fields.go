package jsonvalue

import "fmt"

// Fields names the members of an object a hand-written decoder reads into
// a struct, in the order its Members callback numbers them. Each name may
// be given once: a key given twice makes encoding/json keep the last
// value, or merge the two when they are objects, which a fast path that
// sets as it reads does not mirror, so Members gives up on it.
type Fields struct {
	names  []string
	strict bool
}

// fieldsMax is how many names the bit set of Members can track.
const fieldsMax = 64

// KnownFields is an object every key of which must be one of names, as
// encoding/json reads it with DisallowUnknownFields: any other key gives
// up.
func KnownFields(names ...string) *Fields { return newFields(names, true) }

// SomeFields is an object whose other keys are skipped, as encoding/json
// reads it by default, except a key that matches one of names only
// without regard to case: encoding/json would set that field, so Members
// gives up on it.
func SomeFields(names ...string) *Fields { return newFields(names, false) }

func newFields(names []string, strict bool) *Fields {
	if len(names) > fieldsMax {
		panic(fmt.Sprintf("jsonvalue: %d field names, more than the %d an object can track", len(names), fieldsMax))
	}
	return &Fields{names: names, strict: strict}
}

// Members reads an object, calling set with the index among f's names of
// each key that is one, the decoder at its value, which set must read.
func (d *Decoder) Members(f *Fields, set func(i int) bool) bool {
	var seen uint64
	return d.Object(func(key []byte) bool {
		for i, n := range f.names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return set(i)
			}
		}
		return !f.strict && !FoldsTo(key, f.names...) && d.Skip()
	})
}

// The Into functions read a value into a field as encoding/json does: a
// null leaves a string, number or boolean as it is, and sets a pointer or
// a slice to nil.

// StringInto reads a string into s.
func StringInto[S ~string](d *Decoder, s *S) bool {
	if d.Null() {
		return true
	}
	v, ok := d.String()
	*s = S(v)
	return ok
}

// Int64Into reads an integer into n.
func Int64Into[N ~int64](d *Decoder, n *N) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Int64()
	*n = N(v)
	return ok
}

// Float64Into reads a number into f.
func Float64Into(d *Decoder, f *float64) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Float64()
	*f = v
	return ok
}

// BoolInto reads a boolean into b.
func BoolInto(d *Decoder, b *bool) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Bool()
	*b = v
	return ok
}

// RawInto reads any value into r as a copy of its bytes, null included,
// as a json.RawMessage field holds it.
func RawInto[R ~[]byte](d *Decoder, r *R) bool {
	v, ok := d.Raw()
	*r = R(v)
	return ok
}

// PointerInto reads a value into a new T by read, for a pointer field:
// null sets the pointer to nil.
func PointerInto[T any](d *Decoder, p **T, read func(*T) bool) bool {
	if d.Null() {
		*p = nil
		return true
	}
	*p = new(T)
	return read(*p)
}

// SliceInto reads an array into a new slice, each element by read: null
// sets the slice to nil, and an empty array gives an empty slice that is
// not nil, as encoding/json decodes into a nil slice.
func SliceInto[T any](d *Decoder, v *[]T, read func(*T) bool) bool {
	*v = nil
	return SliceIntoReusing(d, v, read)
}

// SliceIntoReusing is SliceInto reading into the array *v already has,
// from its start, each element zeroed before it is read: for a caller that
// is done with what *v held and reads many arrays one after another.
func SliceIntoReusing[T any](d *Decoder, v *[]T, read func(*T) bool) bool {
	if d.Null() {
		*v = nil
		return true
	}
	if *v == nil {
		*v = []T{}
	}
	*v = (*v)[:0]
	return d.Array(func() bool {
		var zero T
		*v = append(*v, zero) // read in place: a local passed to read would escape
		return read(&(*v)[len(*v)-1])
	})
}
