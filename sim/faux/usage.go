package faux

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/pico-go/pico/core/ai"
)

// charsPerToken is the reference's rule of thumb, used both to estimate
// usage and to size stream chunks.
const charsPerToken = 4

// estimateTokens is ceil(chars/4). Characters are counted in UTF-16 code
// units, as the reference's string length does, so a port's estimate of the
// same request gives the same number.
func estimateTokens(s string) int64 {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return int64((n + charsPerToken - 1) / charsPerToken)
}

// estimateUsage estimates a response's usage the way the reference's faux
// provider does: the serialized request is the input, the content is the
// output, and with a session id the prefix shared with that session's
// previous prompt counts as cache read and the rest as cache write. prompts
// holds each session's previous prompt and is updated.
func estimateUsage(req ai.Request, content []ai.Block, prompts map[string]string) ai.Usage {
	prompt := serializeRequest(req)
	input := estimateTokens(prompt)
	u := ai.Usage{Input: input, Output: estimateTokens(contentText(content))}
	if req.SessionID != "" {
		if prev, ok := prompts[req.SessionID]; ok {
			k := commonPrefixLen(prev, prompt)
			u.CacheRead = estimateTokens(prev[:k])
			u.CacheWrite = estimateTokens(prompt[k:])
			u.Input = max(0, input-u.CacheRead)
		} else {
			u.CacheWrite = input
		}
		prompts[req.SessionID] = prompt
	}
	u.TotalTokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
	return u
}

// estimate is estimateUsage priced at the provider's Price. p.mu is held.
func (p *Provider) estimate(req ai.Request, content []ai.Block) ai.Usage {
	u := estimateUsage(req, content, p.prompts)
	if p.price != (ai.Cost{}) {
		c := &u.Cost
		c.Input = float64(u.Input) * p.price.Input
		c.Output = float64(u.Output) * p.price.Output
		c.CacheRead = float64(u.CacheRead) * p.price.CacheRead
		c.CacheWrite = float64(u.CacheWrite) * p.price.CacheWrite
		c.Total = c.Input + c.Output + c.CacheRead + c.CacheWrite
	}
	return u
}

// commonPrefixLen is the length in bytes of the longest common prefix of a
// and b that ends on a character boundary.
func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	for i > 0 && i < len(a) && !utf8.RuneStart(a[i]) {
		i--
	}
	return i
}

// serializeRequest renders the request as the text the estimate counts:
// each message as "role:text", messages separated by a blank line.
func serializeRequest(req ai.Request) string {
	parts := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		parts[i] = string(m.Role) + ":" + messageText(m)
	}
	return strings.Join(parts, "\n\n")
}

func messageText(m ai.Message) string {
	switch m.Role {
	case ai.RoleSystem:
		return systemText(m)
	case ai.RoleAssistant:
		return contentText(m.Content.Blocks)
	case ai.RoleToolResult:
		return strings.Join(append([]string{m.ToolName}, blockTexts(m.Content.Blocks)...), "\n")
	}
	return strings.Join(blockTexts(m.Content.Blocks), "\n")
}

// systemText is the prompt text, its sections in name order (so the
// estimate does not depend on map order), then the tool changes.
func systemText(m ai.Message) string {
	var parts []string
	if t := strings.Join(blockTexts(m.Content.Blocks), "\n"); t != "" {
		parts = append(parts, t)
	}
	names := make([]string, 0, len(m.Sections))
	for name, text := range m.Sections {
		if text != nil && *text != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		parts = append(parts, *m.Sections[name])
	}
	for _, t := range m.ToolsRemoved {
		parts = append(parts, "tool-:"+mustJSON(t))
	}
	for _, t := range m.ToolsAdded {
		raw, err := t.AppendJSON([]byte("tool+:"))
		if err != nil {
			panic("faux: a stored message part does not encode: " + err.Error())
		}
		parts = append(parts, string(raw))
	}
	return strings.Join(parts, "\n")
}

// blockTexts renders user and tool-result content: text as is, an image as
// a short placeholder that still grows with its size.
func blockTexts(blocks []ai.Block) []string {
	out := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case ai.BlockImage:
			out = append(out, fmt.Sprintf("[image:%s:%d]", b.MimeType, len(b.Data)))
		default:
			out = append(out, b.Text)
		}
	}
	return out
}

// contentText renders assistant content: text, thinking, and each tool call
// as "name:arguments".
func contentText(blocks []ai.Block) string {
	out := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case ai.BlockThinking:
			out = append(out, b.Thinking)
		case ai.BlockToolCall:
			out = append(out, b.Name+":"+argumentsJSON(b.Arguments))
		default:
			out = append(out, b.Text)
		}
	}
	return strings.Join(out, "\n")
}

// argumentsJSON is a tool call's arguments in compact form, "{}" when
// absent: the bytes the tool-call deltas slice.
func argumentsJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw) // validation rejects this before anything streams
	}
	return buf.String()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("faux: a stored message part does not encode: " + err.Error())
	}
	return string(b)
}
