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
			if jsonvalue.Checking() {
				slow, err := SystemKind.Data(e)
				jsonvalue.Agree("core.SystemData", e.Data, d, slow, err)
			}
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
	ok := d.Members(systemDataFields, func(i int) bool {
		switch i {
		case 0:
			return jsonvalue.BoolInto(d, &sd.Baseline)
		case 1:
			return jsonvalue.SliceInto(d, &sd.Sections, func(s *SystemSection) bool {
				return d.Members(sectionFields, func(i int) bool {
					if i == 0 {
						return jsonvalue.StringInto(d, &s.Key)
					}
					return jsonvalue.PointerInto(d, &s.Text, func(t *string) bool { return jsonvalue.StringInto(d, t) })
				})
			})
		}
		tools := &sd.ToolsAdded
		if i == 3 {
			tools = &sd.ToolsRemoved
		}
		return jsonvalue.SliceInto(d, tools, func(t *ai.Tool) bool {
			return d.Members(toolFields, func(i int) bool {
				switch i {
				case 0:
					return jsonvalue.StringInto(d, &t.Name)
				case 1:
					return jsonvalue.StringInto(d, &t.Description)
				case 2:
					return jsonvalue.RawInto(d, &t.Parameters)
				}
				return jsonvalue.RawInto(d, &t.ConstrainedSampling)
			})
		})
	})
	return sd, ok && d.End()
}

var (
	systemDataFields = jsonvalue.SomeFields("baseline", "sections", "toolsAdded", "toolsRemoved")
	sectionFields    = jsonvalue.SomeFields("key", "text")
	toolFields       = jsonvalue.SomeFields("name", "description", "parameters", "constrainedSampling")
)
