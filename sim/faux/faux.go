package faux

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
)

// Reference defaults.
const (
	DefaultModelID       = "faux-1"
	DefaultProvider      = "faux"
	DefaultAPI           = "faux"
	DefaultContextWindow = 128000
	DefaultMaxTokens     = 16384
	tokenSizeMinDefault  = 3
	tokenSizeMaxDefault  = 5
)

// Recorder receives one record per call (and per deferred fetch and stream
// end); *sim.Sim satisfies it, so the calls land in the run's trace.
type Recorder interface {
	Record(kind string, detail any)
}

// TokenSize bounds a stream chunk, in tokens of four characters.
type TokenSize struct {
	Min, Max int
}

// DeferredOptions shapes deferred responses (see FetchDeferred).
type DeferredOptions struct {
	// PendingFetches is how many fetches of a handle answer "still
	// deferred" before the response is ready.
	PendingFetches int
	// PollAfterMs is copied into every handle the provider makes.
	PollAfterMs int64
}

// Options configures a Provider. The zero value is the reference's setup.
type Options struct {
	// Models the provider serves; empty means one model "faux-1". Blank
	// fields take the defaults.
	Models []ai.Model
	// TokensPerSecond paces the stream in virtual time: each chunk waits
	// ceil(len/4)/TokensPerSecond seconds. 0 means no pacing; each chunk is
	// still a scheduling point (a zero-duration sleep).
	TokensPerSecond float64
	// TokenSize bounds chunk sizes; the zero value means 3..5 tokens.
	TokenSize TokenSize
	// Deferred shapes deferred responses.
	Deferred DeferredOptions
	// Recorder, if set, records every call.
	Recorder Recorder
	// DiscardRequests keeps no copy of the requests (Requests returns none),
	// hands step functions the request itself rather than a copy, which
	// they must not modify, and skips the usage estimate (which serializes
	// the whole request) when a step scripts its usage. Long benchmark runs
	// use it: otherwise every call costs the size of a context that grows
	// with the run.
	DiscardRequests bool
	// LateStarts has each block's start event reach the reader only after
	// the provider appended the block's first chunk, and one block in two
	// its second too, to the live partial: as a reader late to a push
	// stream finds it, the start shows text its delta events repeat (the
	// frame encoder trims them). A tool call's start shows the arguments
	// its first member makes (one call in two, its first two members), as
	// parsed so far, and its deltas all follow (the encoder buffers them
	// until they reach what the start showed). The reference's partial is
	// shared, so a late reader meets this; a pulled stream never does
	// without it.
	LateStarts bool
	// SpacedArguments streams a tool call's arguments with a space after
	// each colon and comma (outside strings), as providers that format
	// their JSON do; its end event carries the arguments as scripted, so
	// a reader must take the end's, not what the deltas spelled.
	SpacedArguments bool
	// Price is what one token of each kind costs: an estimated usage's cost
	// is its tokens times these, and its total their sum. The zero value is
	// the reference's, whose answers cost nothing; a scripted usage keeps
	// its own cost.
	Price ai.Cost
}

// Provider is the faux provider. Its methods may be called from any actor;
// a Stream it returns is read by one actor at a time.
type Provider struct {
	rt       core.Runtime
	models   []ai.Model
	tps      float64
	tokMin   int
	tokMax   int
	deferOpt DeferredOptions
	rec      Recorder
	discard  bool
	late     bool
	spaced   bool
	price    ai.Cost

	// mu guards what follows. It is held only for bookkeeping that never
	// blocks, so under the simulator (one goroutine at a time) it is never
	// contended and never a scheduling point; under the real runtime it
	// keeps concurrent callers safe.
	mu              sync.Mutex
	rng             *rand.Rand
	queue           []Step
	calls           int
	requests        []ai.Request
	prompts         map[string]string // session id → previous prompt, for cache estimates
	deferred        map[string]*deferredEntry
	deferredFetches int
	cancelled       []ai.Deferred
}

var _ ai.Provider = (*Provider)(nil)

// New returns a provider that waits through rt and draws chunk sizes from
// rng (under the simulator, pass s.Rand()).
func New(rt core.Runtime, rng *rand.Rand, opts Options) (*Provider, error) {
	switch {
	case rt == nil:
		return nil, errors.New("faux: New needs a runtime")
	case rng == nil:
		return nil, errors.New("faux: New needs a random source: the seed fixes token sizes and timings")
	case opts.TokensPerSecond < 0:
		return nil, fmt.Errorf("faux: TokensPerSecond %v must not be negative", opts.TokensPerSecond)
	case opts.Price.Input < 0 || opts.Price.Output < 0 || opts.Price.CacheRead < 0 || opts.Price.CacheWrite < 0:
		return nil, fmt.Errorf("faux: Price %+v must not be negative", opts.Price)
	}
	p := &Provider{
		rt:       rt,
		rng:      rng,
		tps:      opts.TokensPerSecond,
		deferOpt: opts.Deferred,
		rec:      opts.Recorder,
		discard:  opts.DiscardRequests,
		late:     opts.LateStarts,
		spaced:   opts.SpacedArguments,
		price:    opts.Price,
		prompts:  map[string]string{},
		deferred: map[string]*deferredEntry{},
	}
	// Like the reference: at least one token, and max never below min.
	lo, hi := opts.TokenSize.Min, opts.TokenSize.Max
	if lo == 0 {
		lo = tokenSizeMinDefault
	}
	if hi == 0 {
		hi = tokenSizeMaxDefault
	}
	p.tokMin = max(1, min(lo, hi))
	p.tokMax = max(p.tokMin, hi)
	models := opts.Models
	if len(models) == 0 {
		models = []ai.Model{{ID: DefaultModelID}}
	}
	for _, m := range models {
		p.models = append(p.models, withModelDefaults(m))
	}
	return p, nil
}

func withModelDefaults(m ai.Model) ai.Model {
	if m.Provider == "" {
		m.Provider = DefaultProvider
	}
	if m.API == "" {
		m.API = DefaultAPI
	}
	if m.ContextWindow == 0 {
		m.ContextWindow = DefaultContextWindow
	}
	if m.MaxTokens == 0 {
		m.MaxTokens = DefaultMaxTokens
	}
	return m
}

// Models returns the models the provider serves; the first is the default.
func (p *Provider) Models() []ai.Model { return slices.Clone(p.models) }

// Model returns the served model with the given id.
func (p *Provider) Model(id string) (ai.Model, bool) {
	for _, m := range p.models {
		if m.ID == id {
			return m, true
		}
	}
	return ai.Model{}, false
}

// requestModel is the model a call answers as: the requested one with its
// blanks filled from the served model of that id, or the default model when
// the request names none.
func (p *Provider) requestModel(m ai.Model) ai.Model {
	if m.ID == "" {
		return p.models[0]
	}
	if served, ok := p.Model(m.ID); ok {
		if m.Provider == "" {
			m.Provider = served.Provider
		}
		if m.API == "" {
			m.API = served.API
		}
		if m.ContextWindow == 0 {
			m.ContextWindow = served.ContextWindow
		}
		if m.MaxTokens == 0 {
			m.MaxTokens = served.MaxTokens
		}
	}
	return withModelDefaults(m)
}

// SetResponses replaces the queue.
func (p *Provider) SetResponses(steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = cloneSlice(steps, cloneStep)
	if p.queue == nil {
		p.queue = []Step{}
	}
}

// AppendResponses adds steps to the end of the queue.
func (p *Provider) AppendResponses(steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, cloneSlice(steps, cloneStep)...)
}

// cloneStep copies a step's message, so a caller that reuses or edits a
// message after queueing it does not change the script.
func cloneStep(s Step) Step {
	s.Message = cloneMessage(s.Message)
	return s
}

// Pending is the number of queued steps not yet played.
func (p *Provider) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// Calls is the number of Stream calls so far (the reference's callCount),
// including calls that found the queue empty.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Requests returns copies of every request sent, in call order, so a
// scenario can assert what the model was sent.
func (p *Provider) Requests() []ai.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cloneSlice(p.requests, cloneRequest)
}

// Stream plays the next queued step as a response to req. It never blocks:
// Func steps run here, but waiting (the step's Delay, pacing) happens in
// Next. ctx scopes the whole response; when it is done, the stream ends
// with an error event, reason aborted, at the next check (before start,
// before each block, after each chunk's wait).
func (p *Provider) Stream(ctx context.Context, req ai.Request) ai.Stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	call := p.calls
	if !p.discard {
		p.requests = append(p.requests, cloneRequest(req))
	}
	step, ok := Step{}, len(p.queue) > 0
	if ok {
		step, p.queue = p.queue[0], p.queue[1:]
	}
	s := p.play(ctx, call, req, step, ok)
	p.record("faux.call", callRecord{
		Call: call, Model: s.model.ID, Messages: len(req.Messages),
		Answer: s.answer(), Pending: len(p.queue),
	})
	return s
}

// callRecord is the trace detail of one call.
type callRecord struct {
	Call     int    `json:"call"`
	Model    string `json:"model"`
	Messages int    `json:"messages,omitempty"`
	Fetch    string `json:"fetch,omitempty"`
	Answer   string `json:"answer"`
	Pending  int    `json:"pending"`
}

func (p *Provider) record(kind string, detail any) {
	if p.rec != nil {
		p.rec.Record(kind, detail)
	}
}
