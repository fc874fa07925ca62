package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Long commands report progress on stderr while they work: on a terminal
// one line redrawn every second, elsewhere (a CI log, a pipe) a plain line
// every plainEvery, so a log shows the command is alive without filling up.

// plainEvery is how often a progress line is written off a terminal.
const plainEvery = 10 * time.Second

// progressLine prints what status says about a running command.
type progressLine struct {
	w        io.Writer
	terminal bool
	name     string
	status   func() string
	start    time.Time
	wrote    bool
}

func newProgressLine(w io.Writer, name string, status func() string) *progressLine {
	f, ok := w.(*os.File)
	return &progressLine{w: w, terminal: ok && isTerminal(f), name: name, status: status, start: time.Now()}
}

// tick writes the current status once.
func (p *progressLine) tick(now time.Time) {
	line := fmt.Sprintf("%s: %s, %s", p.name, p.status(), now.Sub(p.start).Round(time.Second))
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s \033[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.wrote = true
}

// finish clears a terminal's line.
func (p *progressLine) finish() {
	if p.terminal && p.wrote {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// startProgress ticks a progress line until the returned stop is called.
func startProgress(w io.Writer, name string, status func() string) (stop func()) {
	p := newProgressLine(w, name, status)
	every := plainEvery
	if p.terminal {
		every = time.Second
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				p.finish()
				return
			case now := <-tick.C:
				p.tick(now)
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
