package boundary

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pico-go/pico/core"
)

// The lifecycle socket (DESIGN §11): the host serves a Unix socket in a
// private directory with a token made for this launch, and passes both to
// the provider's child in its environment; the hook command (cmd/pico-hook)
// connects and sends each lifecycle payload. A request without the token
// changes nothing. The adapter state of the launch, one State per provider,
// lives in the same directory.

// The environment variables the host sets for the provider's child.
const (
	EnvSocket = "PICO_LIFECYCLE_SOCKET"
	EnvToken  = "PICO_LIFECYCLE_TOKEN"
)

// requestMax bounds one request line: a payload and its envelope.
const requestMax = payloadMax + 4096

// Request is one line the hook command sends.
type Request struct {
	Token    string          `json:"token"`
	Provider Provider        `json:"provider"`
	Payload  json.RawMessage `json:"payload"`
}

// Response is the server's one-line answer.
type Response struct {
	OK         bool        `json:"ok"`
	Error      string      `json:"error,omitempty"`
	Transition *Transition `json:"transition,omitempty"`
}

// ErrBadToken is the answer to a request without this launch's token.
var ErrBadToken = errors.New("boundary: the request does not carry this launch's token")

// Server serves the lifecycle socket of one launch.
//
// Its actors, clock, lock and events are the harness's runtime's (DESIGN
// §5), like the rest of core; the socket itself is an OS one, so a Server
// serves only under the real runtime.
type Server struct {
	h     *core.Harness
	rt    core.Runtime
	dir   string
	path  string
	token string
	ln    net.Listener

	deliver1 core.Lock // one delivery at a time: the adapter state is read, classified and written whole
	states   map[Provider]State

	stop     core.Event // set by Close
	accepted core.Event // the accept actor has returned
	mu       sync.Mutex // guards conns, held only to append or copy, never across a wait
	conns    []core.Event
}

// Serve makes a private directory under parent (0700; parent "" is the
// system's temporary directory), listens on a socket in it (0600), and
// serves lifecycle deliveries to h until ctx is done or Close is called.
func Serve(ctx context.Context, h *core.Harness, parent string) (*Server, error) {
	dir, err := os.MkdirTemp(parent, "pico-lifecycle-")
	if err != nil {
		return nil, fmt.Errorf("boundary: lifecycle directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("boundary: lifecycle directory: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("boundary: lifecycle token: %w", err)
	}
	rt := h.Runtime()
	s := &Server{h: h, rt: rt, dir: dir, path: filepath.Join(dir, "lifecycle.sock"), token: hex.EncodeToString(raw), states: map[Provider]State{},
		deliver1: rt.NewLock("lifecycle.deliver"), stop: rt.NewEvent("lifecycle.stop"), accepted: rt.NewEvent("lifecycle.accepted")}
	if err := s.loadStates(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if s.ln, err = net.Listen("unix", s.path); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("boundary: lifecycle socket: %w", err)
	}
	if err := os.Chmod(s.path, 0o600); err != nil {
		s.ln.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("boundary: lifecycle socket: %w", err)
	}
	rt.Go(ctx, "lifecycle.accept", func(ctx context.Context) {
		defer s.accepted.Set()
		s.accept(ctx)
	})
	// Close, or ctx ending, stops the listener: Wait returns on either.
	rt.Go(context.WithoutCancel(ctx), "lifecycle.stop", func(context.Context) {
		_ = s.stop.Wait(ctx)
		s.ln.Close()
	})
	return s, nil
}

// Env is what the provider's child needs in its environment.
func (s *Server) Env() []string {
	return []string{EnvSocket + "=" + s.path, EnvToken + "=" + s.token}
}

// Dir is the launch's private directory.
func (s *Server) Dir() string { return s.dir }

// Close stops serving, waits for the deliveries in progress, and removes
// the directory.
func (s *Server) Close() error {
	s.stop.Set()
	err := s.ln.Close()
	bg := context.Background()
	_ = s.accepted.Wait(bg) // no connection is added after this
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, done := range conns {
		_ = done.Wait(bg)
	}
	if rerr := os.RemoveAll(s.dir); err == nil || errors.Is(err, net.ErrClosed) {
		err = rerr
	}
	return err
}

func (s *Server) accept(ctx context.Context) {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		done := s.rt.NewEvent("lifecycle.conn")
		s.mu.Lock()
		s.conns = append(slices.DeleteFunc(s.conns, core.Event.IsSet), done) // finished ones are forgotten
		s.mu.Unlock()
		s.rt.Go(ctx, "lifecycle.conn", func(ctx context.Context) {
			defer done.Set()
			defer conn.Close()
			s.serve(ctx, conn)
		})
	}
}

// requestTimeout bounds one connection: a client that sends nothing (or
// never reads the answer) cannot hold a delivery slot, nor make Close wait.
const requestTimeout = 10 * time.Second

// serve answers one connection's one request.
func (s *Server) serve(ctx context.Context, conn net.Conn) {
	if err := conn.SetDeadline(s.rt.Now().Add(requestTimeout)); err != nil {
		return
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	line, err := readLine(r, requestMax)
	resp := Response{}
	if err == nil {
		var req Request
		if err = json.Unmarshal(line, &req); err == nil {
			resp.Transition, err = s.deliver(ctx, req)
		}
	}
	if err != nil {
		resp.Error = err.Error()
	} else {
		resp.OK = true
	}
	out, _ := json.Marshal(resp)
	_, _ = conn.Write(append(out, '\n'))
}

// deliver checks the token, then parses, classifies and applies the
// payload, keeping the provider's adapter state only when all went well.
func (s *Server) deliver(ctx context.Context, req Request) (*Transition, error) {
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.token)) != 1 {
		return nil, ErrBadToken
	}
	ev, err := Parse(req.Provider, req.Payload)
	if err != nil {
		return nil, err
	}
	if err := s.deliver1.Lock(ctx); err != nil {
		return nil, err
	}
	defer s.deliver1.Unlock()
	b, next, err := Classify(s.states[req.Provider], ev, DefaultPolicy(req.Provider))
	if err != nil {
		return nil, err
	}
	tr, err := Apply(ctx, s.h, b)
	if err != nil {
		return nil, err
	}
	s.states[req.Provider] = next
	return &tr, s.saveStates()
}

// statesFile is where the adapter states live, in the private directory.
func (s *Server) statesFile() string { return filepath.Join(s.dir, "adapters.json") }

func (s *Server) loadStates() error {
	data, err := os.ReadFile(s.statesFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = json.Unmarshal(data, &s.states)
	}
	if err != nil {
		return fmt.Errorf("boundary: adapter states: %w", err)
	}
	return nil
}

// saveStates writes the states through a temporary file and a rename, so
// that a crash leaves the old states or the new, never half.
func (s *Server) saveStates() error {
	data, err := json.Marshal(s.states)
	if err != nil {
		return err
	}
	tmp := s.statesFile() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("boundary: adapter states: %w", err)
	}
	if err := os.Rename(tmp, s.statesFile()); err != nil {
		return fmt.Errorf("boundary: adapter states: %w", err)
	}
	return nil
}

// readLine reads one line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("boundary: a request of more than %d bytes", max)
		}
		if !isPrefix {
			return line, nil
		}
	}
}
