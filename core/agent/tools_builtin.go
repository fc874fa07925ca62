package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
)

// The built-in tools a host may register: read, write and edit over the
// execution environment, and new_context, which asks for a reset after the
// exchange. bash and job are in jobtools.go: bash runs its command as a
// job, waited on with the blocking budget.

func builtinTool[P any](name, description, params string, replay ReplayPolicy, run func(ctx context.Context, p P, out *ToolOutput, env ExecutionEnv) error) Tool {
	return Tool{
		Definition: ai.Tool{Name: name, Description: description, Parameters: json.RawMessage(params)},
		Replay:     replay,
		Execute: func(ctx context.Context, _ string, args json.RawMessage, out *ToolOutput, rt *ToolRuntime) error {
			var p P
			if err := json.Unmarshal(args, &p); err != nil {
				return fmt.Errorf("%s: arguments: %w", name, err)
			}
			env := rt.Env()
			if env == nil && name != "new_context" {
				return errors.New("no execution environment is configured")
			}
			return run(ctx, p, out, env)
		},
	}
}

// ReadTool reads a text file, optionally a range of its lines (1-based).
func ReadTool() Tool {
	type params struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	return builtinTool("read", "Read a text file. offset (1-based) and limit select lines.",
		`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`,
		ReplaySafe, func(ctx context.Context, p params, out *ToolOutput, env ExecutionEnv) error {
			data, err := env.ReadFile(ctx, p.Path)
			if err != nil {
				return err
			}
			lines := strings.SplitAfter(string(data), "\n")
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			from := max(p.Offset, 1) - 1
			if plant.On("read-offset-zero-based") && p.Offset > 0 {
				from = p.Offset
			}
			if from > len(lines) {
				return fmt.Errorf("offset %d is past the end of %s (%d lines)", p.Offset, p.Path, len(lines))
			}
			to := len(lines)
			if p.Limit > 0 {
				to = min(to, from+p.Limit)
			}
			out.Write(strings.Join(lines[from:to], ""))
			if to < len(lines) || plant.On("read-range-said-at-end") && to == len(lines) {
				out.Diag("info", fmt.Sprintf("showing lines %d-%d of %d", from+1, to, len(lines)), "range")
			}
			out.Details["lines"] = len(lines)
			return nil
		})
}

// WriteTool writes a file whole; writing the same content again is
// harmless, so it replays.
func WriteTool() Tool {
	type params struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	return builtinTool("write", "Write a file, replacing its content.",
		`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`,
		ReplaySafe, func(ctx context.Context, p params, out *ToolOutput, env ExecutionEnv) error {
			content := p.Content
			if plant.On("write-appends") {
				if old, err := env.ReadFile(ctx, p.Path); err == nil {
					content = string(old) + content
				}
			}
			if err := env.WriteFile(ctx, p.Path, []byte(content)); err != nil {
				return err
			}
			out.Write(fmt.Sprintf("wrote %d bytes to %s", len(p.Content), p.Path))
			out.Details["bytes"] = len(p.Content)
			return nil
		})
}

// EditTool replaces one exact occurrence of oldText in a file. It is not
// replayed after a crash: the first run may already have changed the file.
func EditTool() Tool {
	type params struct {
		Path    string `json:"path"`
		OldText string `json:"oldText"`
		NewText string `json:"newText"`
	}
	return builtinTool("edit", "Replace one exact occurrence of oldText with newText in a file.",
		`{"type":"object","properties":{"path":{"type":"string"},"oldText":{"type":"string"},"newText":{"type":"string"}},"required":["path","oldText","newText"],"additionalProperties":false}`,
		ReplayNever, func(ctx context.Context, p params, out *ToolOutput, env ExecutionEnv) error {
			data, err := env.ReadFile(ctx, p.Path)
			if err != nil {
				return err
			}
			switch n := strings.Count(string(data), p.OldText); {
			case p.OldText == "":
				return errors.New("oldText is empty")
			case n == 0:
				return fmt.Errorf("oldText was not found in %s", p.Path)
			case n > 1 && !plant.On("edit-allows-many"):
				return fmt.Errorf("oldText occurs %d times in %s; include more context to make it unique", n, p.Path)
			}
			edited := strings.Replace(string(data), p.OldText, p.NewText, 1)
			if err := env.WriteFile(ctx, p.Path, []byte(edited)); err != nil {
				return err
			}
			out.Write(fmt.Sprintf("edited %s", p.Path))
			return nil
		})
}

// NewContextTool asks for a context reset: post_tools appends a handoff
// head carrying message once the exchange is complete, never inside it.
func NewContextTool() Tool {
	type params struct {
		Message string `json:"message"`
	}
	return builtinTool("new_context", "Start a fresh context after this exchange; message is what the new context begins with.",
		`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`,
		ReplaySafe, func(ctx context.Context, p params, out *ToolOutput, _ ExecutionEnv) error {
			if !plant.On("new-context-no-handoff") {
				out.Handoff(p.Message)
			}
			out.Write("the context resets after this exchange")
			return nil
		})
}
