package delta_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core/delta"
)

func TestValueOfIsTheJSONOfAGoValueParsed(t *testing.T) {
	type part struct {
		Text  string `json:"text"`
		Count int    `json:"count,omitempty"`
	}
	got, err := delta.ValueOf(struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}{Role: "assistant", Parts: []part{{Text: "hi", Count: 2}, {Text: ""}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"role": "assistant", "parts": []any{
		map[string]any{"text": "hi", "count": json.Number("2")},
		map[string]any{"text": ""},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ValueOf (-want +got):\n%s", diff)
	}
	if _, err := delta.ValueOf(make(chan int)); err == nil {
		t.Fatal("a value without a JSON form was accepted")
	}
}

// A clone is the same value with containers of its own: applying ops to it
// leaves the original as it was.
func TestACloneIsTheValueWithContainersOfItsOwn(t *testing.T) {
	orig, err := delta.ParseValue([]byte(`{"content":[{"type":"text","text":"a"}],"n":1,"flags":{"on":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := delta.ParseValue([]byte(`{"content":[{"type":"text","text":"a"}],"n":1,"flags":{"on":true}}`))
	c := delta.Clone(orig)
	if diff := cmp.Diff(orig, c); diff != "" {
		t.Fatalf("clone differs (-orig +clone):\n%s", diff)
	}
	changed, err := delta.Apply(c, []delta.Op{
		delta.Append(delta.Path{"content", 0, "text"}, "bc"),
		delta.Set(delta.Path{"flags", "on"}, false),
		delta.Set(delta.Path{"n"}, json.Number("2")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keep, orig); diff != "" {
		t.Fatalf("applying to the clone changed the original (-before +after):\n%s", diff)
	}
	if got := changed.(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got != "abc" {
		t.Fatalf("the clone's text is %v; want abc", got)
	}
}
