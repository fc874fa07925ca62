package faux

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pico-go/pico/core/ai"
)

// play turns one call into its stream: it resolves the step against the
// request (running Funcs), builds the final message and cuts it into the
// event plan. Everything random is drawn here, at call time, so the chunking
// of a call depends only on the generator's state when the call is made.
// ok is false when the queue was empty. p.mu is held.
func (p *Provider) play(ctx context.Context, call int, req ai.Request, step Step, ok bool) *stream {
	model := p.requestModel(req.Model)
	now := p.rt.Now().UnixMilli()
	s := &stream{rt: p.rt, rec: p.rec, ctx: ctx, call: call, model: model}
	if !ok {
		msg := failedMessage(model, ExhaustedMessage, now)
		u := p.estimate(req, nil)
		msg.Usage = &u
		s.setupFailure = msg
		return s
	}
	step, text, err := resolveStep(call, step, req, !p.discard)
	s.delay = step.Delay
	if err != nil {
		s.setupFailure = failedMessage(model, text, now)
		return s
	}
	p.answerWith(s, p.finalMessage(step, req, model, now))
	return s
}

// answerWith makes msg the answer s streams: the partial starts as msg's
// envelope (empty content, stopReason pending) and the plan holds msg's
// blocks.
func (p *Provider) answerWith(s *stream, msg *ai.Message) {
	s.final = msg
	s.partial = &ai.Message{
		Role: ai.RoleAssistant, Content: ai.Blocks(),
		API: msg.API, Provider: msg.Provider, Model: msg.Model,
		Usage: cloneUsage(msg.Usage), StopReason: ai.StopPending,
		ResponseID: msg.ResponseID, ResponseModel: msg.ResponseModel,
		Timestamp: msg.Timestamp,
	}
	// Room for every action at once: a start, an end and at most one delta
	// per tokMin tokens of each block's body (and one for an empty body).
	room := 0
	for _, b := range msg.Content.Blocks {
		_, body := blockBody(b)
		room += 3 + len(body)/(p.tokMin*charsPerToken)
	}
	s.plan = slices.Grow(s.plan, room)
	for i, b := range msg.Content.Blocks {
		s.plan = p.appendBlockActions(s.plan, i, b)
	}
	s.late = p.late
}

// resolveStep runs Func steps until a message step remains, validating each
// level. It returns the resolved step (its Delay the sum over the levels)
// or, on failure, the error text the call's error event carries: a Func's
// own error verbatim, a broken rule prefixed with "faux: call N" (call 0
// is a deferred fetch).
func resolveStep(call int, step Step, req ai.Request, copyReq bool) (Step, string, error) {
	where := fmt.Sprintf("call %d", call)
	if call == 0 {
		where = "deferred fetch"
	}
	var delay time.Duration
	for depth := 0; ; depth++ {
		if ferr := step.validate(); ferr != nil {
			err := fmt.Errorf("faux: %s: %v", where, ferr)
			return Step{Delay: delay}, err.Error(), err
		}
		delay += step.Delay
		if step.Func == nil {
			step.Delay = delay
			return step, "", nil
		}
		if depth == stepFuncDepthMax {
			err := fmt.Errorf("faux: %s: step functions nested deeper than %d", where, stepFuncDepthMax)
			return Step{Delay: delay}, err.Error(), err
		}
		arg := req
		if copyReq {
			arg = cloneRequest(req)
		}
		next, err := step.Func(arg)
		if err != nil {
			return Step{Delay: delay}, err.Error(), err
		}
		step = next
	}
}

// finalMessage is the message a resolved step answers with: a copy of the
// scripted one, restamped, completed with defaults, its tool-call arguments
// in the compact form the deltas slice, and, for a deferred answer, holding
// a registered handle.
func (p *Provider) finalMessage(step Step, req ai.Request, model ai.Model, now int64) *ai.Message {
	msg := step.message()
	msg.Role = ai.RoleAssistant
	msg.API, msg.Provider, msg.Model = model.API, model.Provider, model.ID
	if msg.StopReason == "" {
		msg.StopReason = ai.StopStop
	}
	if msg.Timestamp == 0 {
		msg.Timestamp = now
	}
	if msg.Content.Blocks == nil {
		msg.Content.Blocks = []ai.Block{}
	}
	for i, b := range msg.Content.Blocks {
		if b.Type == ai.BlockToolCall {
			msg.Content.Blocks[i].Arguments = []byte(argumentsJSON(b.Arguments))
		}
	}
	var est ai.Usage
	if msg.Usage == nil || !p.discard || step.Overflow {
		est = p.estimate(req, msg.Content.Blocks)
	}
	switch {
	case step.Retryable:
		msg.StopReason, msg.RawStopReason = ai.StopError, RawRateLimited
		if msg.ErrorMessage == "" {
			msg.ErrorMessage = RateLimitedMessage
		}
	case step.Overflow:
		msg.StopReason, msg.RawStopReason = ai.StopError, RawContextOverflow
		if msg.ErrorMessage == "" {
			msg.ErrorMessage = fmt.Sprintf(overflowMessageFormat, est.Input+est.CacheRead, model.ContextWindow)
		}
	}
	switch {
	case msg.Usage != nil:
	case msg.StopReason == ai.StopDeferred:
		// Submitting costs nothing; the usage comes with the fetched answer.
		msg.Usage = &ai.Usage{}
	default:
		msg.Usage = &est
	}
	if msg.StopReason == ai.StopDeferred {
		msg.Deferred = p.registerDeferred(msg.Deferred, model, req)
	}
	return msg
}

// failedMessage is the error message of a call that fails before it
// starts: no content, zero usage.
func failedMessage(model ai.Model, text string, now int64) *ai.Message {
	return &ai.Message{
		Role: ai.RoleAssistant, Content: ai.Blocks(),
		API: model.API, Provider: model.Provider, Model: model.ID,
		Usage: &ai.Usage{}, StopReason: ai.StopError, ErrorMessage: text,
		Timestamp: now,
	}
}

// actionKind is what one planned stream step does.
type actionKind uint8

const (
	actBlockStart actionKind = iota
	actDelta
	actBlockEnd
)

// action is one planned block event. The start and the terminal event are
// not planned: they depend on when and how the stream ends.
type action struct {
	kind  actionKind
	index int
	block ai.Block      // blockStart: the empty shape; blockEnd: the full block
	delta string        // delta: the chunk
	wait  time.Duration // delta: virtual time the chunk takes
	early bool          // delta: in the partial already, since its block's late start
}

// appendBlockActions appends the plan of block i to plan: start, one delta
// per chunk, end. Text and thinking are chunked as they are; a tool call
// starts with empty arguments and its deltas slice the arguments' JSON.
func (p *Provider) appendBlockActions(plan []action, i int, b ai.Block) []action {
	start, body := blockBody(b)
	if p.spaced && b.Type == ai.BlockToolCall {
		body = spacedJSON(body)
	}
	plan = append(plan, action{kind: actBlockStart, index: i, block: start})
	for _, chunk := range p.chunks(body) {
		plan = append(plan, action{kind: actDelta, index: i, delta: chunk, wait: p.chunkWait(chunk)})
	}
	return append(plan, action{kind: actBlockEnd, index: i, block: cloneBlock(b)})
}

// blockBody is a block's empty shape, which its start carries, and the
// text its deltas slice: a tool call starts with empty arguments and its
// deltas slice the arguments' JSON.
func blockBody(b ai.Block) (start ai.Block, body string) {
	start = ai.Block{Type: b.Type}
	switch b.Type {
	case ai.BlockText:
		body = b.Text
	case ai.BlockThinking:
		body = b.Thinking
	case ai.BlockToolCall:
		start.ID, start.Name, start.Arguments = b.ID, b.Name, []byte("{}")
		body = string(b.Arguments)
	}
	return start, body
}

// chunks cuts s into pieces of Min..Max tokens (four characters each),
// sizes drawn from the generator. An empty s is one empty chunk, as in the
// reference, so every block has at least one delta. Cuts fall between
// characters, never inside one.
func (p *Provider) chunks(s string) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for s != "" {
		chars := (p.tokMin + p.rng.IntN(p.tokMax-p.tokMin+1)) * charsPerToken
		cut := 0
		for n := 0; n < chars && cut < len(s); n++ {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// chunkWait is the virtual time a chunk takes at TokensPerSecond: its
// estimated tokens over the rate. Without pacing it is zero, and the wait is
// a pure scheduling point.
func (p *Provider) chunkWait(chunk string) time.Duration {
	if p.tps == 0 {
		return 0
	}
	return time.Duration(math.Round(float64(estimateTokens(chunk)) / p.tps * float64(time.Second)))
}

// spacedJSON puts a space after each colon and comma of a JSON text that
// is outside its strings.
func spacedJSON(s string) string {
	var b strings.Builder
	last := 0
	outsideStrings(s, func(i int, c byte) bool {
		if c == ':' || c == ',' {
			b.WriteString(s[last : i+1])
			b.WriteByte(' ')
			last = i + 1
		}
		return true
	})
	b.WriteString(s[last:])
	return b.String()
}
