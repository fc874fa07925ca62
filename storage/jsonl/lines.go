package jsonl

import (
	"bytes"
	"runtime"
	"sync"

	"github.com/pico-go/pico/internal/plant"
)

// parsedLine is one batch line of a file, cut at its newline and parsed.
// The replay decides what it means (a torn tail, a malformed line, a
// batch to apply), in order; parsing is all that may run ahead of it.
type parsedLine struct {
	text     []byte
	complete bool // it ends in a newline
	last     bool // nothing follows it in the file
	tooLong  bool // over batchBytesMax, and so not parsed
	l        line
	err      error // parseLine's
}

// lineReader yields a file's batch lines in order, each parsed. Parsing a
// line depends on nothing but its text and is most of a replay's time, so
// a file of at least parallelParseMin bytes, on a machine with more than
// one core, is parsed by goroutines of the reader's own (up to
// parseWorkersMax), each taking every Nth chunk of chunkLines lines and
// parsing up to chunksAhead of them ahead of the replay applying them: a
// cold open then takes about the time of the applying alone. A smaller
// file is parsed line by line as the replay asks. Either way the replay
// sees the same lines with the same results, and stops the reader (stop)
// when it is done.
type lineReader struct {
	rest    []byte        // not yet cut (inline parsing)
	one     parsedLine    // the line last yielded (inline parsing)
	workers []lineWorker  // parsing ahead, chunk i by workers[i%len]
	cur     *lineChunk    // the chunk being yielded
	next    int           // cur's next line
	chunk   int           // the index of the chunk after cur
	done    chan struct{} // closed by stop
	quit    sync.WaitGroup
	lines   int // a chunk's lines
}

// lineWorker is one parsing goroutine's two queues: its chunks parsed, in
// order (closed after its last), and those yielded, for it to refill.
type lineWorker struct {
	full, free chan *lineChunk
}

type lineChunk struct {
	lines []parsedLine
	n     int
}

// parallelParseMin, chunkLines and chunksAhead are variables only so that
// this package's tests can make every replay parse ahead, in small chunks.
var (
	parallelParseMin = 256 << 10
	chunkLines       = 256
	chunksAhead      = 2
)

// parseWorkersMax bounds the parsing goroutines of one replay: a
// replay's applying keeps up with about two.
const parseWorkersMax = 2

// newLineReader reads data's lines. aheadLines > 0 (Options.ParseAhead)
// parses ahead whatever data's size and the machine's cores, in chunks of
// that many lines.
func newLineReader(data []byte, aheadLines int) *lineReader {
	r := &lineReader{rest: data, lines: chunkLines}
	n := min(runtime.GOMAXPROCS(0), parseWorkersMax)
	if aheadLines > 0 {
		r.lines, n = aheadLines, parseWorkersMax
	} else if len(data) < parallelParseMin || n < 2 {
		return r
	}
	r.done = make(chan struct{})
	r.workers = make([]lineWorker, n)
	for k := range r.workers {
		w := lineWorker{full: make(chan *lineChunk, chunksAhead), free: make(chan *lineChunk, chunksAhead)}
		for range chunksAhead {
			w.free <- &lineChunk{lines: make([]parsedLine, r.lines)}
		}
		r.workers[k] = w
		r.quit.Add(1)
		go r.parseAhead(w, k, data)
	}
	return r
}

// line returns the next line, nil after the last. What it returns is the
// reader's until the next call: its writes' array is reused.
func (r *lineReader) line() *parsedLine {
	if r.workers == nil {
		if len(r.rest) == 0 {
			return nil
		}
		r.rest = cutAndParse(&r.one, r.rest)
		return &r.one
	}
	if r.cur != nil && r.next == r.cur.n {
		// Never blocks: the free queue has room for all its chunks.
		r.workers[(r.chunk-1)%len(r.workers)].free <- r.cur
		r.cur = nil
	}
	if r.cur == nil {
		c, ok := <-r.workers[r.chunk%len(r.workers)].full
		if !ok {
			return nil // the file has no such chunk
		}
		r.cur, r.next = c, 0
		r.chunk++
	}
	r.next++
	return &r.cur.lines[r.next-1]
}

// stop ends the parsing goroutines, if there are any, and waits for them.
func (r *lineReader) stop() {
	if r.done != nil {
		close(r.done)
		r.quit.Wait()
		r.done = nil
	}
}

// parseAhead is worker k's goroutine: it parses chunks k, k+N, k+2N... of
// rest for N workers, and skips the others'.
func (r *lineReader) parseAhead(w lineWorker, k int, rest []byte) {
	defer r.quit.Done()
	defer close(w.full)
	for i := 0; len(rest) > 0; i++ {
		if i%len(r.workers) != k {
			skip := r.lines
			if plant.On("jsonl-parse-ahead-skips-short") && skip > 1 {
				skip--
			}
			for range skip {
				_, rest, _ = bytes.Cut(rest, []byte{'\n'})
			}
			continue
		}
		var c *lineChunk
		select {
		case c = <-w.free:
		case <-r.done:
			return
		}
		c.n = 0
		for c.n < len(c.lines) && len(rest) > 0 {
			rest = cutAndParse(&c.lines[c.n], rest)
			c.n++
		}
		if plant.On("jsonl-parse-ahead-drops-last-chunk") && len(rest) == 0 && i > 0 {
			return
		}
		select {
		case w.full <- c:
		case <-r.done:
			return
		}
	}
}

// cutAndParse cuts the first line off rest into pl, parses it, and
// returns what follows. pl's previous writes' array is read into.
func cutAndParse(pl *parsedLine, rest []byte) []byte {
	text, after, complete := bytes.Cut(rest, []byte{'\n'})
	writes := pl.l.Writes
	*pl = parsedLine{text: text, complete: complete, last: len(after) == 0}
	if len(text) > batchBytesMax {
		pl.tooLong = true
	} else {
		pl.l, pl.err = parseLine(text, writes)
	}
	return after
}
