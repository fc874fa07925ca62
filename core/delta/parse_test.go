package delta_test

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core/delta"
)

// ParseValue is internal/jsonvalue's Parse (tested there against
// encoding/json) with the package's errors.
func TestParseValueErrorsSayWhatAndWhere(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":tru}`, `delta: value is not JSON: invalid character '}' at offset 8 (want the literal true)`},
		{``, `delta: value is not JSON: unexpected end of JSON input (want a value)`},
		{`[1] 2`, `delta: value is followed by more data`},
	} {
		_, err := delta.ParseValue([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseValue(%q) = %v; want %q", c.in, err, c.want)
		}
	}
	v, err := delta.ParseValue([]byte(` {"n":1.50,"s":"\ud83d"} `))
	if m, ok := v.(map[string]any); err != nil || !ok || m["n"] != json.Number("1.50") || m["s"] != "\ufffd" {
		t.Fatalf("ParseValue = %#v, %v; want n as the number's text and the lone surrogate as U+FFFD", v, err)
	}
}
