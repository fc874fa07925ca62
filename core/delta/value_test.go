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
