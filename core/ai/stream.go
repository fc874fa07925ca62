package ai

import "context"

// EventType discriminates stream events.
type EventType string

const (
	EventStart         EventType = "start"
	EventTextStart     EventType = "text_start"
	EventTextDelta     EventType = "text_delta"
	EventTextEnd       EventType = "text_end"
	EventThinkingStart EventType = "thinking_start"
	EventThinkingDelta EventType = "thinking_delta"
	EventThinkingEnd   EventType = "thinking_end"
	EventToolCallStart EventType = "toolcall_start"
	EventToolCallDelta EventType = "toolcall_delta"
	EventToolCallEnd   EventType = "toolcall_end"
	EventDone          EventType = "done"
	EventError         EventType = "error"
)

// StreamEvent is one event of a model response stream (reference
// delta-and-messages §3). ContentIndex names the block for block events;
// Delta is the text (or, for a tool call, the raw JSON fragment) a delta
// adds; Content is a finished text or thinking block's content; ToolCall is
// a finished tool call. A done event carries Reason (stop, length, toolUse or
// deferred) and the final Message; an error event carries Reason (aborted or
// error) and the failed Message, whose ErrorMessage says why.
//
// Partial is the provider's live partial message for every event but done
// and error. It is shared and keeps changing: copy what you keep. It is not
// part of the JSON form.
type StreamEvent struct {
	Type         EventType  `json:"type"`
	ContentIndex int        `json:"contentIndex"`
	Delta        string     `json:"delta,omitempty"`
	Content      string     `json:"content,omitempty"`
	ToolCall     *Block     `json:"toolCall,omitempty"`
	Reason       StopReason `json:"reason,omitempty"`
	Message      *Message   `json:"message,omitempty"`
	Partial      *Message   `json:"-"`
}

// RawStopReason values a provider sets on an error message so the harness
// can classify the failure without parsing provider-specific text.
const (
	// RawRateLimited marks a retryable error (rate limit, overload,
	// transient network failure): the generation retries within its budget.
	RawRateLimited = "rate_limited"
	// RawContextOverflow marks a request that exceeded the context window:
	// the generation settles and a collapse takes over (§8.2).
	RawContextOverflow = "context_overflow"
)

// Terminal reports whether the event ends its stream.
func (e StreamEvent) Terminal() bool { return e.Type == EventDone || e.Type == EventError }

// Model describes a model a provider serves.
type Model struct {
	ID            string `json:"id"`
	Provider      string `json:"provider"`
	API           string `json:"api"`
	ContextWindow int    `json:"contextWindow"`
	MaxTokens     int    `json:"maxTokens"`
}

// Request is what a generation sends: the projected messages (the first
// system message is the baseline prompt), the callable tools and options.
type Request struct {
	Model Model `json:"model"`
	// Messages may share memory with the caller's own state (the harness
	// hands providers its cached projection of the context, unchanged from
	// one request to the next): a provider reads it and never writes into
	// it, and whoever wants different messages builds a new slice.
	Messages      []Message `json:"messages"`
	Tools         []Tool    `json:"tools,omitempty"`
	ThinkingLevel string    `json:"thinkingLevel,omitempty"`
	// SessionID lets a provider reuse a cached prompt prefix.
	SessionID string `json:"sessionId,omitempty"`
}

// Provider streams model responses.
type Provider interface {
	// Stream starts a response. ctx cancels the whole stream: a provider
	// checks it between chunks and ends with an error event whose reason is
	// aborted. Setup failures are an error event too, never a nil stream.
	Stream(ctx context.Context, req Request) Stream
}

// Stream is one response in progress.
type Stream interface {
	// Next blocks for the next event. After a done or error event it
	// returns ok=false. Cancelling ctx while Next waits aborts the stream
	// like cancelling the stream's own ctx: the next event is an error
	// event with reason aborted.
	Next(ctx context.Context) (ev StreamEvent, ok bool)
}

// DeferredProvider is a Provider that can finish deferred responses: a
// response that ended with stopReason deferred carries a handle, and
// fetching it streams the response's current state (done, deferred again,
// or an error).
type DeferredProvider interface {
	Provider
	FetchDeferred(ctx context.Context, handle Deferred) Stream
	CancelDeferred(handle Deferred)
}
