package faux

import (
	"bytes"
	"slices"

	"github.com/pico-go/pico/core/ai"
)

// Deep copies. The provider keeps what it was sent and hands out what it
// streams; neither may alias memory a caller goes on changing, or a scenario
// asserting on Requests would see the harness's later edits.

func cloneRequest(r ai.Request) ai.Request {
	out := r
	out.Messages = cloneSlice(r.Messages, func(m ai.Message) ai.Message { return *cloneMessage(&m) })
	out.Tools = cloneSlice(r.Tools, cloneTool)
	return out
}

func cloneMessage(m *ai.Message) *ai.Message {
	if m == nil {
		return nil
	}
	out := *m
	out.Content.Blocks = cloneSlice(m.Content.Blocks, cloneBlock)
	out.Usage = cloneUsage(m.Usage)
	out.Diagnostics = bytes.Clone(m.Diagnostics)
	if m.Deferred != nil {
		d := *m.Deferred
		d.Data = bytes.Clone(d.Data)
		out.Deferred = &d
	}
	if m.EndTurn != nil {
		out.EndTurn = ai.Bool(*m.EndTurn)
	}
	out.Details = bytes.Clone(m.Details)
	if m.NestedCalls != nil {
		n := *m.NestedCalls
		n.Calls = cloneSlice(n.Calls, func(c ai.NestedCall) ai.NestedCall {
			c.Arguments = bytes.Clone(c.Arguments)
			return c
		})
		out.NestedCalls = &n
	}
	if m.IsError != nil {
		out.IsError = ai.Bool(*m.IsError)
	}
	if m.Sections != nil {
		out.Sections = make(map[string]*string, len(m.Sections))
		for k, v := range m.Sections {
			if v != nil {
				s := *v
				v = &s
			}
			out.Sections[k] = v
		}
	}
	out.ToolsAdded = cloneSlice(m.ToolsAdded, cloneTool)
	out.ToolsRemoved = slices.Clone(m.ToolsRemoved)
	return &out
}

func cloneBlock(b ai.Block) ai.Block {
	b.Arguments = bytes.Clone(b.Arguments)
	return b
}

func cloneTool(t ai.Tool) ai.Tool {
	t.Parameters = bytes.Clone(t.Parameters)
	t.ConstrainedSampling = bytes.Clone(t.ConstrainedSampling)
	return t
}

// cloneSlice copies s element by element and keeps nil apart from empty, so
// a copy marshals to the same bytes as the original.
func cloneSlice[T any](s []T, clone func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = clone(v)
	}
	return out
}

func cloneUsage(u *ai.Usage) *ai.Usage {
	if u == nil {
		return nil
	}
	c := *u
	return &c
}
