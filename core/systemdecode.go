package core

import (
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/storage"
)

// systemData is SystemKind.Data, by hand when it can.
func systemData(e *storage.Entry) (SystemData, error) {
	if SystemKind.Is(e) {
		if d, ok := decodeSystemData(e.Data); ok {
			return d, nil
		}
	}
	return SystemKind.Data(e)
}

// decodeSystemData is the fast path of SystemKind.Data, which a context's
// system fold calls for every system entry of every request (their tool
// schemas are most of a baseline's bytes). It reads the data by hand and
// gives up (false) on anything it does not read exactly as encoding/json
// does: a key given twice, or matching a field only without regard to
// case, a value of another kind, a malformed text. The caller then decodes
// with encoding/json, which decides those; the tests hold the two to the
// same results on every text the fast path takes.
func decodeSystemData(data []byte) (SystemData, bool) {
	var sd SystemData
	d := jsonvalue.NewDecoder(data)
	ok := object(d, systemDataFields, func(i int) bool {
		switch i {
		case 0:
			if d.Null() {
				return true
			}
			v, ok := d.Bool()
			sd.Baseline = v
			return ok
		case 1:
			if d.Null() {
				return true
			}
			sd.Sections = []SystemSection{}
			return d.Array(func() bool {
				var s SystemSection
				ok := object(d, sectionFields, func(i int) bool {
					if i == 0 {
						return str(d, &s.Key)
					}
					if d.Null() {
						return true
					}
					text, ok := d.String()
					s.Text = &text
					return ok
				})
				sd.Sections = append(sd.Sections, s)
				return ok
			})
		}
		tools := &sd.ToolsAdded
		if i == 3 {
			tools = &sd.ToolsRemoved
		}
		if d.Null() {
			return true
		}
		*tools = []ai.Tool{}
		return d.Array(func() bool {
			var t ai.Tool
			ok := object(d, toolFields, func(i int) bool {
				switch i {
				case 0:
					return str(d, &t.Name)
				case 1:
					return str(d, &t.Description)
				case 2:
					return raw(d, (*[]byte)(&t.Parameters))
				}
				return raw(d, (*[]byte)(&t.ConstrainedSampling))
			})
			*tools = append(*tools, t)
			return ok
		})
	})
	return sd, ok && d.End()
}

var (
	systemDataFields = []string{"baseline", "sections", "toolsAdded", "toolsRemoved"}
	sectionFields    = []string{"key", "text"}
	toolFields       = []string{"name", "description", "parameters", "constrainedSampling"}
)

// object reads an object member by member, each known field's index to
// set, once; an unknown key is skipped unless it names a field in another
// case, as encoding/json (without DisallowUnknownFields) would match it.
func object(d *jsonvalue.Decoder, names []string, set func(i int) bool) bool {
	var seen uint32
	return d.Object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return set(i)
			}
		}
		return !jsonvalue.FoldsTo(key, names...) && d.Skip()
	})
}

// str reads a string into s; null leaves s as it is.
func str(d *jsonvalue.Decoder, s *string) bool {
	if d.Null() {
		return true
	}
	v, ok := d.String()
	*s = v
	return ok
}

func raw(d *jsonvalue.Decoder, r *[]byte) bool {
	v, ok := d.Raw()
	*r = v
	return ok
}
