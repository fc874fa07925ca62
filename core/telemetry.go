package core

import (
	"context"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// Telemetry (DESIGN §9). Every span carries the runtime's time, so a
// simulated run's spans are stamped in virtual time and a seed fixes them.
//
// A task has a home: the span its invocations are parented under. A kind
// opens a trace of its own in a commit (Tx.StartTrace: the agent's turn)
// and homes tasks in it (Tx.HomeTask); a task created by an invocation
// inherits its creator's home, and one created by the host is homed under
// the host's span. Whatever made an invocation runnable — a commit of
// another turn, a drive, the completion before it — is a link, never the
// parent, so a long session is many shallow traces. A task whose trace has
// ended (work that outlives its turn) starts a new root linked to it. Homes
// live in memory only: no span is ever stored in session data, and a
// reopened session's tasks start as roots.

// clockedSpan stamps its end with the runtime's time.
type clockedSpan struct {
	trace.Span
	rt Runtime
}

func (s clockedSpan) End(opts ...trace.SpanEndOption) {
	s.Span.End(append([]trace.SpanEndOption{trace.WithTimestamp(s.rt.Now())}, opts...)...)
}

// RecordError and AddEvent stamp their events with the runtime's time too
// (the SDK would use the wall clock).
func (s clockedSpan) RecordError(err error, opts ...trace.EventOption) {
	s.Span.RecordError(err, append([]trace.EventOption{trace.WithTimestamp(s.rt.Now())}, opts...)...)
}

func (s clockedSpan) AddEvent(name string, opts ...trace.EventOption) {
	s.Span.AddEvent(name, append([]trace.EventOption{trace.WithTimestamp(s.rt.Now())}, opts...)...)
}

// recording reports whether tracer records spans: the no-op tracer of a
// harness without a provider does not, and then no span, link or
// attribute is built at all.
func recording(tracer trace.Tracer) bool {
	_, off := tracer.(noop.Tracer)
	return !off
}

// startSpan starts a span at the runtime's time, whose End stamps the
// runtime's time too. Explicit timestamps in opts win.
func startSpan(tracer trace.Tracer, rt Runtime, ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !recording(tracer) {
		return ctx, noop.Span{}
	}
	ctx, span := tracer.Start(ctx, name, append([]trace.SpanStartOption{trace.WithTimestamp(rt.Now())}, opts...)...)
	if !span.IsRecording() {
		return ctx, span
	}
	cs := clockedSpan{Span: span, rt: rt}
	return trace.ContextWithSpan(ctx, cs), cs
}

// StartSpan starts a span under ctx with the host's tracer, stamped with the
// runtime's time at start and at End: the door a kind uses for what its
// methods do inside an invocation (a provider call, a tool's handler).
func (h *Harness) StartSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return startSpan(h.tracer, h.rt, ctx, name, opts...)
}

// Tracing reports whether the host's tracer records spans, so a kind
// builds a span's attributes only when someone will read them.
func (h *Harness) Tracing() bool { return recording(h.tracer) }

// home is where a task's invocation spans go: under sc, while the trace
// named key (if any) is open.
type home struct {
	sc  trace.SpanContext
	key string
}

// openTrace is a trace a kind started and has not ended.
type openTrace struct {
	span trace.Span
	sc   trace.SpanContext
}

// tracePlan is what a transaction asked of telemetry, applied once its
// commit is persisted.
type tracePlan struct {
	starts []traceStart
	homes  map[storage.ID]string
	ends   []traceEnd
}

type traceStart struct {
	key, name string
	opts      []trace.SpanStartOption
}

type traceEnd struct {
	key string
	err error
}

// Tracing reports whether this commit's session records spans: without a
// tracer the trace door does nothing, and a kind need not build keys or
// attributes for it.
func (tx *Tx) Tracing() bool {
	return tx.h != nil && tx.h.Tracing() && !plant.On("turns-untraced")
}

func (tx *Tx) plan() *tracePlan {
	if tx.traces == nil {
		tx.traces = &tracePlan{}
	}
	return tx.traces
}

// StartTrace opens, once this commit is persisted (a commit with no writes
// persists nothing and opens nothing), a trace of the kind's own: a root span named name, linked to the span of the commit's ctx, that
// the tasks homed in it (HomeTask) are parented under until EndTrace. key
// names the trace to the kind (the agent uses its turn's conversation and
// first input); a key already open stays as it is, so a continuation may
// start its trace again. A rejected commit starts nothing.
func (tx *Tx) StartTrace(key, name string, opts ...trace.SpanStartOption) {
	if !tx.Tracing() {
		return
	}
	p := tx.plan()
	p.starts = append(p.starts, traceStart{key: key, name: name, opts: opts})
}

// HomeTask parents the invocations of task id, created or live, under the
// trace key, open or started by this commit. Tasks that id's invocations
// create inherit the home.
func (tx *Tx) HomeTask(id storage.ID, key string) {
	if !tx.Tracing() {
		return
	}
	p := tx.plan()
	if p.homes == nil {
		p.homes = map[storage.ID]string{}
	}
	p.homes[id] = key
}

// EndTrace ends the trace key once this commit is persisted, with an error
// status when err is set; a commit's ends apply before its starts, so one
// commit may end a key and start it again. Invocations of tasks still homed in it start
// new roots linked to it. Ending a trace that is not open does nothing.
func (tx *Tx) EndTrace(key string, err error) {
	if !tx.Tracing() {
		return
	}
	p := tx.plan()
	p.ends = append(p.ends, traceEnd{key: key, err: err})
}

// startTraces opens the traces a persisted commit asked for, on the line.
func (d *driver) startTraces(ctx context.Context, p *tracePlan) {
	if p == nil {
		return
	}
	for _, s := range p.starts { // a plan exists only when the harness traces
		if _, open := d.tel.open[s.key]; open {
			continue
		}
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(attribute.String("pico.trace", s.key))}
		if by := trace.SpanContextFromContext(ctx); by.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: by}))
		}
		_, span := startSpan(d.h.tracer, d.h.rt, context.WithoutCancel(ctx), s.name, append(opts, s.opts...)...)
		if d.tel.open == nil {
			d.tel.open = map[string]*openTrace{}
		}
		d.tel.open[s.key] = &openTrace{span: span, sc: span.SpanContext()}
	}
}

// homeOf is the home of a task a persisted commit created: the one the
// commit named, else its creating invocation's, else the host's span.
func (d *driver) homeOf(ctx context.Context, p *tracePlan, id storage.ID) home {
	if key, ok := p.homeKey(id); ok {
		return d.traceHome(key)
	}
	if inv := invocationOf(ctx); inv != nil {
		return inv.home
	}
	return home{sc: trace.SpanContextFromContext(ctx)}
}

func (p *tracePlan) homeKey(id storage.ID) (string, bool) {
	if p == nil {
		return "", false
	}
	key, ok := p.homes[id]
	return key, ok
}

func (d *driver) traceHome(key string) home {
	h := home{key: key}
	if t := d.tel.open[key]; t != nil {
		h.sc = t.sc
	}
	return h
}

// rehome applies a persisted commit's homes to the tasks it names that
// are live, created by it or before it (homeOf already gave the created
// ones the same home).
func (d *driver) rehome(p *tracePlan) {
	if p == nil {
		return
	}
	for id, key := range p.homes {
		if lt := d.live[id]; lt != nil {
			lt.home = d.traceHome(key)
		}
	}
}

// endTraces ends the traces a persisted commit closed, after the line is
// released.
func (d *driver) endTraces(p *tracePlan, acts *actions) {
	if p == nil {
		return
	}
	for _, e := range p.ends {
		t := d.tel.open[e.key]
		if t == nil {
			continue
		}
		delete(d.tel.open, e.key)
		if e.err != nil {
			t.span.SetStatus(codes.Error, e.err.Error())
		}
		acts.add(func() { t.span.End() })
	}
}

// endOpenTraces takes, on the line, every trace still open when the
// session closes, and returns what ends them after the release.
func (d *driver) endOpenTraces() func() {
	var acts actions
	for _, key := range slices.Sorted(maps.Keys(d.tel.open)) {
		t := d.tel.open[key]
		acts.add(func() {
			t.span.SetAttributes(attribute.Bool("pico.trace.unfinished", true))
			t.span.End()
		})
	}
	d.tel.open = nil
	return acts.then()
}

// invocationSpanStart places an invocation's span, in a context of
// origin's values: under its task's home while that is open, else as a new
// root; what made it runnable (the span of parent), when it is not the
// home, and an ended home are links.
func (d *driver) invocationSpanStart(parent, origin context.Context, h home) (context.Context, []trace.SpanStartOption) {
	base := context.WithoutCancel(origin)
	by := trace.SpanContextFromContext(parent)
	var links []trace.Link
	var opts []trace.SpanStartOption
	// A home's trace has ended when its key is no longer open, or is open
	// again for another trace.
	t := d.tel.open[h.key]
	ended := h.key != "" && (t == nil || !t.sc.Equal(h.sc))
	switch {
	case h.sc.IsValid() && !ended:
		base = trace.ContextWithSpanContext(base, h.sc)
	default:
		opts = append(opts, trace.WithNewRoot())
		if h.sc.IsValid() {
			links = append(links, trace.Link{SpanContext: h.sc, Attributes: []attribute.KeyValue{attribute.String("pico.link", "home")}})
		}
	}
	// Within one trace the tree already says who came first; across traces
	// (another turn's commit, a host drive) the cause is a link.
	if by.IsValid() && (len(opts) > 0 || by.TraceID() != h.sc.TraceID()) {
		links = append(links, trace.Link{SpanContext: by, Attributes: []attribute.KeyValue{attribute.String("pico.link", "runnable")}})
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	return base, opts
}

// telemetry is the driver's trace bookkeeping, read and written on the line.
type telemetry struct {
	open map[string]*openTrace
	plan *tracePlan // the plan of the commit being published, during afterCommit
}
