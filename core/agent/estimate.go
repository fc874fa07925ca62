package agent

import (
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
)

// The reference's token estimate (§8.2): four characters a token, an image
// as many characters as a mid-sized picture costs.
const (
	charsPerToken = 4
	imageChars    = 4800
)

// EstimateTokens estimates what messages cost a model: a quarter of their
// characters (text, thinking, tool names and arguments), rounded up, with
// each image counted as imageChars.
func EstimateTokens(msgs ...ai.Message) int64 {
	var chars int64
	for _, m := range msgs {
		chars += messageChars(m)
	}
	return (chars + charsPerToken - 1) / charsPerToken
}

func messageChars(m ai.Message) int64 {
	var n int64
	for _, b := range m.Content.Blocks {
		switch b.Type {
		case ai.BlockImage:
			n += imageChars
		case ai.BlockToolCall:
			n += int64(len(b.Name) + len(b.Arguments))
		default:
			n += int64(len(b.Text) + len(b.Thinking))
		}
	}
	return n
}

func toolChars(tools []ai.Tool) int64 {
	var n int64
	for _, t := range tools {
		n += int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// usageTokens is the context a reported usage measured: the provider's
// total, or the sum of its parts when it gives none.
func usageTokens(u *ai.Usage) int64 {
	if u == nil {
		return 0
	}
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return u.Input + u.Output + u.CacheRead + u.CacheWrite
}

// answered reports whether an assistant message is an answer a request
// would carry (an error or aborted one is excluded from requests).
func answered(m ai.Message) bool {
	return m.Role == ai.RoleAssistant && m.StopReason != ai.StopError && m.StopReason != ai.StopAborted
}

// estimateContext estimates a derived context plus extra messages and the
// tools offered. The newest answer whose provider reported usage measured
// everything before it exactly, so the estimate is that usage plus the
// characters after it; with no such answer it is characters throughout.
// Only an answer after the context's head counts: one the head retained
// was measured against the context the head replaced, which is larger.
func estimateContext(cx *core.Context, extra []ai.Message, tools []ai.Tool) int64 {
	base, from := int64(0), 0
	for i := len(cx.Entries) - 1; i >= 0; i-- {
		ce := cx.Entries[i]
		if cx.Head != nil && ce.Entry.ID < cx.Head.ID && !plant.On("estimate-anchor-before-head") {
			continue
		}
		if n := len(ce.Messages); n > 0 && answered(ce.Messages[n-1]) && usageTokens(ce.Messages[n-1].Usage) > 0 {
			base, from = usageTokens(ce.Messages[n-1].Usage), i+1
			break
		}
	}
	var chars int64
	if from == 0 {
		chars = toolChars(tools)
	}
	for _, ce := range cx.Entries[from:] {
		for _, m := range ce.Messages {
			if m.Role == ai.RoleToolResult && plant.On("estimate-skips-results") {
				continue
			}
			if m.Role != ai.RoleAssistant || answered(m) {
				chars += messageChars(m)
			}
		}
	}
	for _, m := range extra {
		chars += messageChars(m)
	}
	return base + (chars+charsPerToken-1)/charsPerToken
}
