package faux

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
)

// stream is one call's response, played one event per Next.
//
// Cancellation. The stream's own ctx (given to Stream) scopes the response:
// it is checked before start, before each block and after each chunk's wait,
// and a wait ends as soon as it is done. Next's ctx bounds only that call's
// wait; if it is done while Next waits, the response is abandoned just as if
// the stream's ctx had been cancelled: an error event with reason aborted,
// the partial so far and "Request was aborted". (The interface has no way
// to say "nothing yet, try again", and a provider cannot resume a request
// its reader walked away from.) An event that needs no wait is returned
// even when Next's ctx is done, and a call that failed before its start
// (empty queue, Func error, invalid step) reports that failure even if
// cancelled, as the reference does.
type stream struct {
	rt   core.Runtime
	rec  Recorder
	call int
	// ctx is the response's cancellation scope. It is kept in the struct,
	// against the usual rule, because ai.Provider.Stream hands it over once
	// for the stream's whole life and Next must keep observing it.
	ctx   context.Context
	model ai.Model
	delay time.Duration // before start

	setupFailure *ai.Message // set when the call fails before start
	final        *ai.Message // the done or error message of a full answer
	partial      *ai.Message // live; every non-terminal event points at it
	plan         []action
	pos          int
	started      bool
	over         bool
	late         bool   // Options.LateStarts
	fetch        string // the deferred handle id, for a fetch's records
}

// Next returns the next event; after the terminal event it returns false.
func (s *stream) Next(ctx context.Context) (ai.StreamEvent, bool) {
	if s.over {
		return ai.StreamEvent{}, false
	}
	if !s.started {
		s.started = true
		// The first event always waits, if only for zero time: the answer
		// arrives after a scheduling point, like a network round trip.
		waitErr := s.pause(ctx, s.delay)
		switch {
		case s.setupFailure != nil:
			return s.end(ai.StreamEvent{Type: ai.EventError, Reason: ai.StopError, Message: s.setupFailure})
		case waitErr != nil || s.ctx.Err() != nil:
			return s.abort()
		}
		return ai.StreamEvent{Type: ai.EventStart, Partial: s.partial}, true
	}
	if s.pos == len(s.plan) {
		return s.finish()
	}
	a := s.plan[s.pos]
	switch a.kind {
	case actBlockStart:
		if s.ctx.Err() != nil {
			return s.abort()
		}
	case actDelta:
		if err := s.pause(ctx, a.wait); err != nil || s.ctx.Err() != nil {
			return s.abort()
		}
	}
	s.pos++
	return s.apply(a), true
}

// apply performs a planned action on the partial and returns its event.
func (s *stream) apply(a action) ai.StreamEvent {
	blocks := &s.partial.Content.Blocks
	switch a.kind {
	case actBlockStart:
		*blocks = append(*blocks, cloneBlock(a.block))
		if s.late {
			s.applyEarly(&(*blocks)[len(*blocks)-1], a.index)
		}
		return ai.StreamEvent{Type: startEvent[a.block.Type], ContentIndex: a.index, Partial: s.partial}
	case actDelta:
		b := &(*blocks)[a.index]
		switch {
		case a.early: // the late start showed it
		case b.Type == ai.BlockText:
			b.Text += a.delta
		case b.Type == ai.BlockThinking:
			b.Thinking += a.delta
		}
		// A tool call's partial keeps its empty arguments until the end,
		// as in the reference: a JSON fragment is not an argument object.
		return ai.StreamEvent{Type: deltaEvent[b.Type], ContentIndex: a.index, Delta: a.delta, Partial: s.partial}
	default:
		(*blocks)[a.index] = cloneBlock(a.block)
		ev := ai.StreamEvent{Type: endEvent[a.block.Type], ContentIndex: a.index, Partial: s.partial}
		switch a.block.Type {
		case ai.BlockText:
			ev.Content = a.block.Text
		case ai.BlockThinking:
			ev.Content = a.block.Thinking
		case ai.BlockToolCall:
			call := cloneBlock(a.block)
			ev.ToolCall = &call
		}
		return ev
	}
}

// applyEarly appends to b, a text or thinking block just started at
// index, its first chunk, and on every other block its second too, marking
// their deltas early so that they are not appended again. A tool call
// shows the arguments its first member makes (every other call, its first
// two), as a late reader finds them parsed; its deltas, which never touch
// the partial's arguments, all follow still.
func (s *stream) applyEarly(b *ai.Block, index int) {
	n := 1 + index%2
	if b.Type == ai.BlockToolCall {
		var args strings.Builder
		for i := s.pos; i < len(s.plan) && s.plan[i].kind == actDelta && s.plan[i].index == index; i++ {
			args.WriteString(s.plan[i].delta)
		}
		shown, ok := leadingMembers(args.String(), n)
		if !ok {
			shown, ok = leadingMembers(args.String(), 1)
		}
		if ok {
			b.Arguments = json.RawMessage(shown)
		}
		return
	}
	for i := s.pos; i < len(s.plan) && n > 0; i, n = i+1, n-1 {
		a := &s.plan[i]
		if a.kind != actDelta || a.index != index {
			return
		}
		switch b.Type {
		case ai.BlockText:
			b.Text += a.delta
		case ai.BlockThinking:
			b.Thinking += a.delta
		default:
			return
		}
		a.early = true
	}
}

var (
	startEvent = map[ai.BlockType]ai.EventType{ai.BlockText: ai.EventTextStart, ai.BlockThinking: ai.EventThinkingStart, ai.BlockToolCall: ai.EventToolCallStart}
	deltaEvent = map[ai.BlockType]ai.EventType{ai.BlockText: ai.EventTextDelta, ai.BlockThinking: ai.EventThinkingDelta, ai.BlockToolCall: ai.EventToolCallDelta}
	endEvent   = map[ai.BlockType]ai.EventType{ai.BlockText: ai.EventTextEnd, ai.BlockThinking: ai.EventThinkingEnd, ai.BlockToolCall: ai.EventToolCallEnd}
)

// finish sends the scripted ending: error for a scripted error or aborted
// answer, done otherwise.
func (s *stream) finish() (ai.StreamEvent, bool) {
	switch r := s.final.StopReason; r {
	case ai.StopError, ai.StopAborted:
		return s.end(ai.StreamEvent{Type: ai.EventError, Reason: r, Message: s.final})
	default:
		return s.end(ai.StreamEvent{Type: ai.EventDone, Reason: r, Message: s.final})
	}
}

// abort ends a cancelled stream with the partial so far.
func (s *stream) abort() (ai.StreamEvent, bool) {
	var msg *ai.Message
	if s.partial != nil {
		msg = cloneMessage(s.partial)
	} else {
		msg = failedMessage(s.model, "", 0)
	}
	msg.StopReason, msg.ErrorMessage = ai.StopAborted, AbortedMessage
	msg.Timestamp = s.rt.Now().UnixMilli()
	return s.end(ai.StreamEvent{Type: ai.EventError, Reason: ai.StopAborted, Message: msg})
}

// end sends the terminal event, after which Next returns false.
func (s *stream) end(ev ai.StreamEvent) (ai.StreamEvent, bool) {
	s.over = true
	if s.rec != nil {
		s.rec.Record("faux.end", endRecord{Call: s.call, Fetch: s.fetch, Event: ev.Type, Reason: ev.Reason, Blocks: len(ev.Message.Content.Blocks)})
	}
	return ev, true
}

// endRecord is the trace detail of a stream's terminal event.
type endRecord struct {
	Call   int           `json:"call"`
	Fetch  string        `json:"fetch,omitempty"`
	Event  ai.EventType  `json:"event"`
	Reason ai.StopReason `json:"reason"`
	Blocks int           `json:"blocks"`
}

// pause waits d of runtime time, ending early when the stream's ctx or
// Next's ctx is done.
func (s *stream) pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		// A zero pause is a scheduling point only: nothing wakes it, so it
		// needs no context joining the two, just both checked in the order
		// either's Err checks them, before it and after.
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if err := s.rt.Sleep(ctx, 0); err != nil {
			return err
		}
		return s.ctx.Err()
	}
	w := either(ctx, s.ctx)
	defer w.release()
	return s.rt.Sleep(w, d)
}

// answer summarizes how the call will end, for the call record.
func (s *stream) answer() string {
	if s.setupFailure != nil {
		return "error: " + s.setupFailure.ErrorMessage
	}
	return string(s.final.StopReason)
}

// leadingMembers returns the object args with only its first n members
// (fewer when it has no more than n, which show nothing: ok is false).
func leadingMembers(args string, n int) (string, bool) {
	depth, cut := 0, -1
	outsideStrings(args, func(i int, c byte) bool {
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth != 1 {
				break
			}
			if n--; n == 0 {
				cut = i
				return false
			}
		}
		return true
	})
	if cut < 0 {
		return "", false
	}
	shown := args[:cut] + "}"
	return shown, json.Valid([]byte(shown))
}

// outsideStrings calls visit with each byte of the JSON text s (and its
// index) that is outside its strings, quotes excepted, until visit returns
// false.
func outsideStrings(s string, visit func(i int, c byte) bool) {
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case !visit(i, c):
			return
		}
	}
}
