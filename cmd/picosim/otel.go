package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// runTelemetry writes a run's spans to a file, one JSON object per span as
// the SDK's stdout exporter writes them, in the order they end. The
// harness stamps spans with virtual time and the ids come from the seed, so
// the file is as reproducible as the trace.
type runTelemetry struct {
	tp   *sdktrace.TracerProvider
	file *os.File
}

func openTelemetry(path string, spec runSpec) (*runTelemetry, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
	if err != nil {
		f.Close()
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithIDGenerator(newSeededIDs(spec.seed)),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "picosim"),
			attribute.String("picosim.scenario", spec.sc.name),
			attribute.Int64("picosim.seed", int64(spec.seed)),
			attribute.String("picosim.backend", spec.backend),
		)),
	)
	return &runTelemetry{tp: tp, file: f}, nil
}

// close flushes the spans and closes the file.
func (t *runTelemetry) close() error {
	err := t.tp.Shutdown(context.Background())
	if cerr := t.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing spans: %w", err)
	}
	return nil
}

// seededIDs draws trace and span ids from a seed: the same run, the same
// ids.
type seededIDs struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeededIDs(seed uint64) *seededIDs {
	return &seededIDs{rng: rand.New(rand.NewPCG(seed, 0x6f74656c))} // "otel"
}

func (g *seededIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.rng.Uint64())
	return tid, g.span()
}

func (g *seededIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.span()
}

func (g *seededIDs) span() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], g.rng.Uint64())
	}
	return sid
}
