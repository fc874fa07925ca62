package core

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// HookHandler handles one hook point. It runs outside the line, receives
// the invoking task's ctx (forward it to every wait), and its decision is
// validated again inside the commit that applies it.
type HookHandler func(ctx context.Context, input any) (output any, err error)

// HookOptions configures a scoped registration.
type HookOptions struct {
	// Subtree also applies the handler to conversations this one owns,
	// directly or not (never to forks).
	Subtree bool
}

type hookReg struct {
	id      uint64
	kind    string
	point   string
	conv    storage.ID // 0: harness-wide
	subtree bool
	handler HookHandler
}

// hookTable is an immutable registration list, replaced whole on every
// change, so that running hooks never takes a lock (DESIGN §5).
type hookTable struct {
	regs []hookReg
	next uint64
}

// Hooks returns the harness-wide hook registry.
func (h *Harness) Hooks() ScopedHooks { return ScopedHooks{h: h} }

// ScopedHooks registers handlers harness-wide or for one conversation.
type ScopedHooks struct {
	h    *Harness
	conv storage.ID
}

// On registers handler for kind's point and returns the function that
// removes it. Registration is process state, never durable.
func (s ScopedHooks) On(kind storage.Kinder, point string, handler HookHandler, opts HookOptions) (off func()) {
	var id uint64
	for {
		old := s.h.hooks.Load()
		next := &hookTable{regs: slices.Clone(old.regs), next: old.next + 1}
		id = next.next
		next.regs = append(next.regs, hookReg{id: id, kind: kind.Kind(), point: point, conv: s.conv, subtree: opts.Subtree, handler: handler})
		if s.h.hooks.CompareAndSwap(old, next) {
			break
		}
	}
	return func() {
		for {
			old := s.h.hooks.Load()
			gone := id
			if plant.On("hook-off-removes-newest") && len(old.regs) > 0 {
				gone = old.regs[len(old.regs)-1].id
			}
			next := &hookTable{regs: slices.DeleteFunc(slices.Clone(old.regs), func(r hookReg) bool { return r.id == gone }), next: old.next}
			if s.h.hooks.CompareAndSwap(old, next) {
				return
			}
		}
	}
}

// HookOutcome is one handler's result.
type HookOutcome struct {
	Output any
	Err    error
}

// handlersFor orders the handlers of one point for a conversation:
// harness-wide ones first, then scoped ones from the outermost owning
// conversation inwards, the conversation's own last, each group in
// registration order.
func (h *Harness) handlersFor(kind, point string, chain []storage.ID) []hookReg {
	t := h.hooks.Load()
	var out []hookReg
	for _, r := range t.regs {
		if r.kind == kind && r.point == point && r.conv == 0 {
			out = append(out, r)
		}
	}
	for j := range chain {
		i := len(chain) - 1 - j
		if plant.On("hook-order-own-first") {
			i = j
		}
		for _, r := range t.regs {
			if r.kind == kind && r.point == point && r.conv == chain[i] && (i == 0 || r.subtree || plant.On("hook-subtree-ignored")) {
				out = append(out, r)
			}
		}
	}
	return out
}

// RunHooks runs every handler of kind's point that applies to conversation
// conv, in order, each outside the line, and returns their outcomes. A
// handler's panic becomes its error. Cancellation is not a hook failure:
// when ctx is done the run stops and returns ctx's error.
func (h *Harness) RunHooks(ctx context.Context, kind storage.Kinder, point string, conv storage.ID, input any) ([]HookOutcome, error) {
	return h.runHooks(ctx, kind, point, conv, input, nil)
}

// runHooks is RunHooks where next, if set, turns each outcome into the next
// handler's input, so that a handler sees the output merged so far.
func (h *Harness) runHooks(ctx context.Context, kind storage.Kinder, point string, conv storage.ID, input any, next func(HookOutcome) any) ([]HookOutcome, error) {
	var chain []storage.ID
	if err := h.line.Read(ctx, func(ctx context.Context) error {
		if err := h.d.loadLinks(ctx, []storage.ID{conv}); err != nil {
			return err
		}
		chain = h.d.ownerChain(conv)
		return nil
	}); err != nil {
		return nil, err
	}
	regs := h.handlersFor(kind.Kind(), point, chain)
	out := make([]HookOutcome, 0, len(regs))
	for i, r := range regs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		o := HookOutcome{}
		func() {
			hctx, span := ctx, trace.Span(noop.Span{})
			if h.Tracing() {
				hctx, span = h.StartSpan(ctx, "pico.hook", trace.WithAttributes(
					attribute.String("pico.hook.kind", kind.Kind()),
					attribute.String("pico.hook.point", point),
					attribute.Int("pico.hook.index", i),
				))
			}
			defer span.End()
			defer func() {
				if p := recover(); p != nil {
					RethrowInvariant(p) // the harness's bug, not the hook's
					o.Err = fmt.Errorf("hook %s.%s panicked: %v", kind.Kind(), point, p)
				}
				if o.Err != nil {
					span.SetStatus(codes.Error, o.Err.Error())
				}
			}()
			o.Output, o.Err = r.handler(hctx, input)
		}()
		// Cancellation is control flow, never a fail-open/fail-closed
		// decision: the mark may have revoked the invocation before its
		// signal arrived, so ErrTaskCancelled and ErrClosed propagate even
		// while ctx still looks alive.
		if o.Err != nil && (errors.Is(o.Err, ErrTaskCancelled) || errors.Is(o.Err, ErrClosed) ||
			(errors.Is(o.Err, context.Canceled) && ctx.Err() != nil)) && !plant.On("hook-cancellation-is-a-failure") {
			return out, o.Err
		}
		out = append(out, o)
		if next != nil {
			input = next(o)
		}
	}
	return out, nil
}

// Hook adapts a typed function to a HookHandler: the kind passes an I and
// reads back an O. An input of another type is an error, reported like any
// handler failure.
func Hook[I, O any](fn func(ctx context.Context, in I) (O, error)) HookHandler {
	return func(ctx context.Context, input any) (any, error) {
		in, ok := input.(I)
		if !ok {
			return nil, fmt.Errorf("core: hook handler expects %T, got %T", in, input)
		}
		return fn(ctx, in)
	}
}

// HookError is a hook handler's failure, reported rather than fatal.
type HookError struct {
	Kind  string
	Point string
	Task  storage.ID
	Err   error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("core: hook %s.%s (task %d): %v", e.Kind, e.Point, e.Task, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// RunHookChain runs the handlers of kind's point for the task's
// conversation as a chain, in RunHooks's order: each handler sees input as
// fold left it after the handler before. fold gets each outcome's output
// read as an O (HookResult): ok is false when the handler had nothing to
// say, err is the handler's failure or an output that is not an O; what it
// returns is the next handler's input, and the last one is returned. A kind
// decides per point whether a failure is skipped (and reported) or fails
// closed. Cancellation ends the chain with ctx's error, as RunHooks.
func RunHookChain[I, O any](ctx context.Context, rt *TaskRuntime, kind storage.Kinder, point string, input I, fold func(in I, out O, ok bool, err error) I) (I, error) {
	if err := rt.check(ctx); err != nil {
		return input, err
	}
	cur := input
	_, err := rt.h.runHooks(ctx, kind, point, rt.inv.conv, input, func(o HookOutcome) any {
		out, ok, err := HookResult[O](o)
		cur = fold(cur, out, ok, err)
		return cur
	})
	return cur, err
}

// HookResult reads a handler's outcome as an O: an O, a *O, or nil for
// "nothing to say" (ok false). The handler's error, or an output of any
// other type, is the error.
func HookResult[O any](o HookOutcome) (O, bool, error) {
	var zero O
	if o.Err != nil {
		return zero, false, o.Err
	}
	switch v := o.Output.(type) {
	case nil:
		return zero, false, nil
	case O:
		return v, true, nil
	case *O:
		if v == nil {
			return zero, false, nil
		}
		return *v, true, nil
	}
	return zero, false, fmt.Errorf("core: hook returned %T; want %T", o.Output, zero)
}
