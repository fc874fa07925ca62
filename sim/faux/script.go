package faux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pico-go/pico/core/ai"
)

// Script is the JSON form of a response queue, so a scenario file can carry
// its model's answers as data: {"steps": [...]}. Function steps have no
// JSON form.
type Script struct {
	Steps []ScriptStep `json:"steps"`
}

// ScriptStep is one scripted answer. A missing stopReason means stop.
type ScriptStep struct {
	Content      []ScriptBlock `json:"content,omitempty"`
	StopReason   ai.StopReason `json:"stopReason,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
	ResponseID   string        `json:"responseId,omitempty"`
	Usage        *ai.Usage     `json:"usage,omitempty"`
	Deferred     *ai.Deferred  `json:"deferred,omitempty"`
	DelayMs      int64         `json:"delayMs,omitempty"`
	Retryable    bool          `json:"retryable,omitempty"`
	Overflow     bool          `json:"overflow,omitempty"`
}

// ScriptBlock is a content block in a script. It mirrors ai.Block's JSON
// but is decoded field by field, so an unknown field is an error here too
// (ai.Block decodes itself and would let it pass). A tool call without
// arguments has the empty object.
type ScriptBlock struct {
	Type              ai.BlockType    `json:"type"`
	Text              string          `json:"text,omitempty"`
	TextSignature     string          `json:"textSignature,omitempty"`
	Thinking          string          `json:"thinking,omitempty"`
	ThinkingSignature string          `json:"thinkingSignature,omitempty"`
	Redacted          bool            `json:"redacted,omitempty"`
	ID                string          `json:"id,omitempty"`
	Name              string          `json:"name,omitempty"`
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ThoughtSignature  string          `json:"thoughtSignature,omitempty"`
	Namespace         string          `json:"namespace,omitempty"`
}

// ParseScript reads a script strictly: unknown fields, trailing data and
// steps that break a rule are errors, and a broken rule names its field,
// as in "faux: steps[2].content[0].id: toolCall without id". The rules are
// Step.Validate's: a known, final stop reason; a non-negative delay; tool
// calls with an id and object arguments; retryable or overflow, not both,
// and only with stopReason error.
func ParseScript(data []byte) (Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sc Script
	if err := dec.Decode(&sc); err != nil {
		return Script{}, fmt.Errorf("faux: script: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Script{}, errors.New("faux: script: data after the script object")
	}
	for i, st := range sc.Steps {
		if st.DelayMs < 0 {
			return Script{}, fmt.Errorf("faux: steps[%d].delayMs: negative delay %d", i, st.DelayMs)
		}
		if err := st.step().validate(); err != nil {
			return Script{}, fmt.Errorf("faux: steps[%d].%v", i, err)
		}
	}
	return sc, nil
}

// Responses returns the script's steps, ready for SetResponses.
func (sc Script) Responses() []Step {
	out := make([]Step, len(sc.Steps))
	for i, st := range sc.Steps {
		out[i] = st.step()
	}
	return out
}

func (st ScriptStep) step() Step {
	msg := &ai.Message{
		Role: ai.RoleAssistant, StopReason: st.StopReason,
		ErrorMessage: st.ErrorMessage, ResponseID: st.ResponseID,
	}
	msg.Content.Blocks = make([]ai.Block, len(st.Content))
	for i, b := range st.Content {
		msg.Content.Blocks[i] = ai.Block{
			Type: b.Type, Text: b.Text, TextSignature: b.TextSignature,
			Thinking: b.Thinking, ThinkingSignature: b.ThinkingSignature, Redacted: b.Redacted,
			ID: b.ID, Name: b.Name, Arguments: b.Arguments,
			ThoughtSignature: b.ThoughtSignature, Namespace: b.Namespace,
		}
	}
	if st.Usage != nil {
		u := *st.Usage
		msg.Usage = &u
	}
	if st.Deferred != nil {
		d := *st.Deferred
		msg.Deferred = &d
	}
	return Step{
		Message:   cloneMessage(msg),
		Delay:     time.Duration(st.DelayMs) * time.Millisecond,
		Retryable: st.Retryable,
		Overflow:  st.Overflow,
	}
}
