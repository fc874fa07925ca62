package localenv

import (
	"os"
	"unicode/utf8"

	"github.com/pico-go/pico/core/agent"
)

// Limits of reading a process's output.
const (
	// readBufBytes is the most one read, and so one chunk, holds.
	readBufBytes = 32 << 10
	// chunkQueueMax bounds the chunks read but not yet delivered. When it
	// is full the readers stop reading, the pipe fills, and the process
	// blocks on its next write: a process that prints faster than the
	// caller takes output is held back instead of filling memory.
	chunkQueueMax = 16
)

// Stream names, as agent.OutputChunk carries them.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// readStream reads f until EOF or an error (including f being closed under
// it) and sends what it reads to out as chunks of stream, in order. A UTF-8
// sequence cut by the end of a read is held back and sent with the next
// read, so that a chunk of text is valid text; at the end, whatever is held
// is sent as it is.
func readStream(f *os.File, stream string, out chan<- agent.OutputChunk) {
	buf := make([]byte, readBufBytes)
	held := 0 // bytes at the front of buf kept from the last read
	for {
		n, err := f.Read(buf[held:])
		n += held
		cut := n
		if err == nil {
			cut = completeUTF8(buf[:n])
		}
		if cut > 0 {
			out <- agent.OutputChunk{Stream: stream, Data: string(buf[:cut])}
		}
		held = copy(buf, buf[cut:n])
		if err != nil {
			return
		}
	}
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a UTF-8 sequence: all of b, unless b ends with the start of a
// multi-byte sequence that lacks its last bytes. Invalid bytes count as
// complete; they would never be completed.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
