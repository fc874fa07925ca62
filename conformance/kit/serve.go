package kit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/pico-go/pico/sim"
)

// requestLineMax bounds one protocol line, in bytes.
const requestLineMax = 16 << 20

// Serve is this implementation as a port: it reads requests from r and
// writes one reply a line to w until close or the end of r. Each scenario
// runs on a simulated runtime of its own (seed 1), its session's actions
// applied one at a time on the simulation's main actor.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), requestLineMax)
	enc := json.NewEncoder(w)
	var cur *served
	defer func() {
		if cur != nil {
			cur.stop()
		}
	}()
	for line := 1; sc.Scan(); line++ {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("kit: serve: request line %d is not a request: %v", line, err)
		}
		var reply Reply
		switch req.Type {
		case RequestClose:
			return nil
		case RequestOpen:
			if cur != nil {
				cur.stop()
			}
			cur, reply = serveScenario(ctx, req)
		case RequestAction, RequestOutcome:
			if cur == nil {
				reply = Reply{Error: fmt.Sprintf("request line %d: %s before open", line, req.Type)}
				break
			}
			reply = cur.ask(req)
			if req.Type == RequestOutcome {
				cur.stop()
				cur = nil
			}
		default:
			reply = Reply{Error: fmt.Sprintf("request line %d: unknown request type %q", line, req.Type)}
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	return sc.Err()
}

// served is one scenario running on its simulation's main actor, which
// takes requests from reqs and answers on replies.
type served struct {
	reqs    chan Request
	replies chan Reply
	done    chan struct{}
	err     error
}

func serveScenario(ctx context.Context, open Request) (*served, Reply) {
	if open.Version != ProtocolVersion {
		return nil, Reply{Error: fmt.Sprintf("protocol version %d: this port speaks %d", open.Version, ProtocolVersion)}
	}
	sv := &served{reqs: make(chan Request), replies: make(chan Reply), done: make(chan struct{})}
	s := sim.New(sim.Options{Seed: 1})
	go func() {
		defer close(sv.done)
		sv.err = s.Run(ctx, func(ctx context.Context) { sv.main(ctx, s, open) })
	}()
	return sv, sv.reply()
}

// main is the simulation's main actor. Waiting on reqs, a channel the
// simulator does not know, holds the baton: nothing else runs between two
// actions, which is the protocol's rule anyway.
func (sv *served) main(ctx context.Context, s *sim.Sim, open Request) {
	se, err := newSession(s, open)
	if err == nil {
		err = se.open(ctx)
	}
	if err != nil {
		sv.replies <- Reply{Error: err.Error()}
		return
	}
	defer func() { _ = se.h.Close(ctx) }()
	sv.replies <- Reply{OK: true}
	for req := range sv.reqs {
		switch req.Type {
		case RequestAction:
			out, err := se.do(ctx, req.Op, req.Args, req.Line)
			if err != nil {
				sv.replies <- Reply{Error: err.Error()}
				continue
			}
			sv.replies <- Reply{OK: true, Action: &out}
		case RequestOutcome:
			o, err := se.outcome(ctx)
			if err != nil {
				sv.replies <- Reply{Error: err.Error()}
				return
			}
			sv.replies <- Reply{OK: true, Outcome: &o}
			return
		}
	}
}

// reply waits for the main actor's answer, or the simulation's end.
func (sv *served) reply() Reply {
	select {
	case r := <-sv.replies:
		return r
	case <-sv.done:
		err := sv.err
		if err == nil {
			err = errors.New("the scenario's simulation ended")
		}
		return Reply{Error: err.Error()}
	}
}

func (sv *served) ask(req Request) Reply {
	select {
	case sv.reqs <- req:
		return sv.reply()
	case <-sv.done:
		return sv.reply()
	}
}

// stop ends the scenario: its main actor returns and the simulation ends.
func (sv *served) stop() {
	close(sv.reqs)
	<-sv.done
}
