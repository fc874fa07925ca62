package faux

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pico-go/pico/core/ai"
)

// How a consumer tells a retryable error and a context overflow apart from
// any other failed response: the error message's RawStopReason. It is an
// exact, machine-readable field, so the harness never has to parse prose to
// decide between retry_wait, the overflow chain and failure. The default
// ErrorMessage texts are additionally phrased the way real providers phrase
// them ("429", "rate limited"; "prompt is too long"), so a text classifier
// modelled on the reference reaches the same verdict.
const (
	// RawRateLimited marks a retryable error (Step.Retryable).
	RawRateLimited = ai.RawRateLimited
	// RawContextOverflow marks a context-window overflow (Step.Overflow).
	RawContextOverflow = ai.RawContextOverflow
)

// Default texts of the errors the provider makes up itself. The exhausted
// queue and abort texts are the reference's, word for word, because ports
// compare them.
const (
	RateLimitedMessage = "rate limited (429)"
	// overflowMessageFormat takes the estimated input tokens and the
	// model's context window.
	overflowMessageFormat = "prompt is too long: %d tokens > %d maximum"
	ExhaustedMessage      = "No more faux responses queued"
	AbortedMessage        = "Request was aborted"
)

// Step is one scripted response. Exactly one of Message and Func is
// normally set; a Step with neither is an empty answer (no content, stop),
// or, with Retryable or Overflow, an error without content.
//
// An empty StopReason on Message means stop. Retryable and Overflow turn the
// response into an error (stopReason error, RawStopReason RawRateLimited or
// RawContextOverflow, a default ErrorMessage unless one is scripted); any
// scripted content is still streamed first, like a provider that fails
// mid-answer.
type Step struct {
	// Message is the scripted answer. The provider streams a copy and
	// restamps api/provider/model from the requested model; its timestamp
	// defaults to the virtual time of the call, its usage to an estimate.
	Message *ai.Message
	// Func computes the step from the request, so a scenario can answer
	// what it was sent. It runs inside Stream, on the calling actor, and
	// must not block. Its error ends the stream with an error event that
	// carries the error's text. The step it returns may itself be a Func,
	// up to stepFuncDepthMax levels.
	Func func(req ai.Request) (Step, error)
	// Delay is virtual time that passes before the stream starts, like a
	// slow first byte. It adds to the Delay of a step a Func returns.
	Delay time.Duration
	// Retryable makes the response a retryable error (a rate limit).
	Retryable bool
	// Overflow makes the response a context-window overflow.
	Overflow bool
}

// stepFuncDepthMax bounds how many Funcs one call may chain, so a Func that
// returns itself ends in an error event instead of a hang.
const stepFuncDepthMax = 8

// Text returns a text block.
func Text(s string) ai.Block { return ai.Block{Type: ai.BlockText, Text: s} }

// Thinking returns a thinking block.
func Thinking(s string) ai.Block { return ai.Block{Type: ai.BlockThinking, Thinking: s} }

// ToolCall returns a tool-call block. The id is required (the harness keys
// tool results by it) and argsJSON must be a JSON object; a step breaking
// either rule ends its call with an error event.
func ToolCall(id, name, argsJSON string) ai.Block {
	return ai.Block{Type: ai.BlockToolCall, ID: id, Name: name, Arguments: json.RawMessage(argsJSON)}
}

// Reply returns a step that answers with blocks and stopReason stop.
func Reply(blocks ...ai.Block) Step {
	return Step{Message: &ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(blocks...), StopReason: ai.StopStop}}
}

// Respond returns a step computed from the request.
func Respond(fn func(req ai.Request) (Step, error)) Step { return Step{Func: fn} }

// RateLimited returns a retryable error step.
func RateLimited() Step { return Step{Retryable: true} }

// ContextOverflow returns a context-overflow error step.
func ContextOverflow() Step { return Step{Overflow: true} }

// WithStop returns s answering with stop reason r.
func (s Step) WithStop(r ai.StopReason) Step {
	m := s.message()
	m.StopReason = r
	s.Message = m
	return s
}

// WithError returns s failing with stopReason error and message text.
func (s Step) WithError(text string) Step {
	m := s.message()
	m.StopReason, m.ErrorMessage = ai.StopError, text
	s.Message = m
	return s
}

// WithUsage returns s reporting u instead of the estimate.
func (s Step) WithUsage(u ai.Usage) Step {
	m := s.message()
	m.Usage = &u
	s.Message = m
	return s
}

// WithDelay returns s starting after d of virtual time.
func (s Step) WithDelay(d time.Duration) Step {
	s.Delay = d
	return s
}

// message returns a copy of s's message to modify, so the With methods
// never change a message another step shares.
func (s Step) message() *ai.Message {
	if s.Message == nil {
		return &ai.Message{Role: ai.RoleAssistant}
	}
	return cloneMessage(s.Message)
}

// Validate reports the first rule s breaks, naming the field. Stream applies
// the same rules to every step it plays, so a bad Go step fails its call
// with an error event the way a bad JSON step fails ParseScript.
func (s Step) Validate() error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("faux: %w", err)
	}
	return nil
}

func (s Step) validate() *fieldError {
	if s.Delay < 0 {
		return &fieldError{"delay", fmt.Sprintf("negative delay %v", s.Delay)}
	}
	if s.Func != nil {
		if s.Message != nil || s.Retryable || s.Overflow {
			return &fieldError{"func", "a function step carries nothing else but a delay"}
		}
		return nil
	}
	if s.Retryable && s.Overflow {
		return &fieldError{"overflow", "a step is retryable or an overflow, not both"}
	}
	if s.Message == nil {
		return nil
	}
	return validateMessage(s.Message, s.Retryable || s.Overflow)
}

// fieldError names the field (a JSON path relative to the step) that breaks
// a rule.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func validateMessage(m *ai.Message, failing bool) *fieldError {
	if m.Role != "" && m.Role != ai.RoleAssistant {
		return &fieldError{"role", fmt.Sprintf("role %q is not assistant", m.Role)}
	}
	switch r := m.StopReason; {
	case r == "":
	case !r.Valid():
		return &fieldError{"stopReason", fmt.Sprintf("unknown stop reason %q", r)}
	case r == ai.StopPending:
		return &fieldError{"stopReason", "pending is not a final stop reason"}
	case failing && r != ai.StopError:
		return &fieldError{"stopReason", fmt.Sprintf("a retryable or overflow step fails with error, not %s", r)}
	}
	for i, b := range m.Content.Blocks {
		if err := validateBlock(b); err != nil {
			err.path = fmt.Sprintf("content[%d].%s", i, err.path)
			return err
		}
	}
	return nil
}

func validateBlock(b ai.Block) *fieldError {
	switch b.Type {
	case ai.BlockText, ai.BlockThinking:
		return nil
	case ai.BlockToolCall:
		if b.ID == "" {
			return &fieldError{"id", "toolCall without id"}
		}
		if len(b.Arguments) > 0 && !isJSONObject(b.Arguments) {
			return &fieldError{"arguments", fmt.Sprintf("arguments are not a JSON object: %.40s", b.Arguments)}
		}
		return nil
	case ai.BlockImage:
		return &fieldError{"type", "an assistant message holds no image blocks"}
	}
	return &fieldError{"type", fmt.Sprintf("unknown block type %q", b.Type)}
}

// isJSONObject reports whether raw is one well-formed JSON object.
func isJSONObject(raw []byte) bool {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	return json.Valid(trimmed)
}
