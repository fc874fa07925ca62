package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"reflect"
	"sort"
	"strings"
)

// Stream names a chunk may carry; they are agent.OutputChunk's.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Scripts is everything a fake execution environment does: what each
// command prints, when, and how it ends, plus the files that exist at the
// start. It is data with a JSON form so that a scenario can carry it, a
// trace can print it and a replay can parse it back.
type Scripts struct {
	// Commands maps an exact command string to its script. Matching is
	// exact on purpose: a scenario states the commands it expects, and any
	// other command is "not found" rather than a guess.
	Commands map[string]Script `json:"commands"`
	// Files are the initial contents of the in-memory file system, by path
	// (cleaned and resolved against "/" like every other path).
	Files map[string]string `json:"files,omitempty"`
}

// Script is one fake process.
type Script struct {
	// Chunks are emitted in order, each AfterMs virtual milliseconds after
	// the previous one (the first after the start).
	Chunks []Chunk `json:"chunks,omitempty"`
	// ExitCode is the status of a process that ends on its own.
	ExitCode int `json:"exitCode,omitempty"`
	// Hang keeps the process alive after its last chunk until it is killed.
	Hang bool `json:"hang,omitempty"`
	// IgnoreKillMs is how long the process keeps running (and emitting the
	// chunks that fall due) after it is killed, like a process that traps
	// SIGTERM before it is finally SIGKILLed.
	IgnoreKillMs int `json:"ignoreKillMs,omitempty"`
	// Crash, when set, makes the process fail after its chunks: Exec
	// returns a *CrashError with this message instead of a result. A script
	// with no chunks and a crash is a process that cannot be started.
	Crash string `json:"crash,omitempty"`
}

// Chunk is one piece of scripted output.
type Chunk struct {
	// AfterMs is the virtual delay since the previous chunk (or the start).
	AfterMs int `json:"afterMs,omitempty"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

// ParseScripts decodes the JSON form of Scripts strictly (unknown fields and
// trailing data are errors) and validates the result, so that a typo in a
// scenario file fails loudly instead of silently scripting nothing.
func ParseScripts(data []byte) (Scripts, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Scripts
	if err := dec.Decode(&s); err != nil {
		return Scripts{}, fmt.Errorf("proc: scripts: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Scripts{}, errors.New("proc: scripts: trailing data after the JSON object")
	}
	if err := checkFieldNames(data); err != nil {
		return Scripts{}, err
	}
	if err := s.Validate(); err != nil {
		return Scripts{}, err
	}
	return s, nil
}

// Validate reports every problem with the scripts, each naming its field
// path (commands["make"].chunks[2].afterMs), in a deterministic order. Besides
// the obvious (negative delays, unknown streams, empty names), it rejects
// endings that contradict each other: a process that hangs cannot also exit
// with a code or crash, and one that crashes has no exit code.
func (s Scripts) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("proc: "+format, args...))
	}
	for _, name := range sortedKeys(s.Commands) {
		sc := s.Commands[name]
		at := fmt.Sprintf("commands[%q]", name)
		if name == "" {
			bad("%s: empty command name", at)
		}
		for i, c := range sc.Chunks {
			cat := fmt.Sprintf("%s.chunks[%d]", at, i)
			if c.AfterMs < 0 {
				bad("%s.afterMs: negative delay %d", cat, c.AfterMs)
			}
			if c.Stream != StreamStdout && c.Stream != StreamStderr {
				bad("%s.stream: unknown stream %q (want %q or %q)", cat, c.Stream, StreamStdout, StreamStderr)
			}
		}
		if sc.IgnoreKillMs < 0 {
			bad("%s.ignoreKillMs: negative delay %d", at, sc.IgnoreKillMs)
		}
		if sc.Hang && sc.ExitCode != 0 {
			bad("%s.exitCode: %d on a script that hangs (it never exits on its own)", at, sc.ExitCode)
		}
		if sc.Hang && sc.Crash != "" {
			bad("%s.crash: set on a script that hangs (it never ends on its own)", at)
		}
		if sc.Crash != "" && sc.ExitCode != 0 {
			bad("%s.exitCode: %d on a script that crashes (a crash has no exit code)", at, sc.ExitCode)
		}
	}
	seen := make(map[string]string, len(s.Files))
	for _, name := range sortedKeys(s.Files) {
		at := fmt.Sprintf("files[%q]", name)
		p, err := resolve(name)
		if err != nil {
			bad("%s: %v", at, err)
			continue
		}
		if first, dup := seen[p]; dup {
			bad("%s: same file %s as files[%q]", at, p, first)
			continue
		}
		seen[p] = name
	}
	return errors.Join(errs...)
}

// clone returns a deep copy, so that an Env never shares maps or slices with
// its caller.
func (s Scripts) clone() Scripts {
	c := Scripts{Commands: make(map[string]Script, len(s.Commands))}
	for name, sc := range s.Commands {
		sc.Chunks = append([]Chunk(nil), sc.Chunks...)
		c.Commands[name] = sc
	}
	if s.Files != nil {
		c.Files = make(map[string]string, len(s.Files))
		for p, data := range s.Files {
			c.Files[p] = data
		}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// resolve turns a caller's path into the file system's key: cleaned, and
// relative paths taken against "/" because the fake environment has no
// working directory to resolve them against. The root itself is a
// directory, never a file.
func resolve(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	r := path.Join("/", p)
	if r == "/" {
		return "", fmt.Errorf("%s: is the root directory, not a file", p)
	}
	return r, nil
}

// checkFieldNames rejects field names that match only by case. The
// standard decoder matches "exitcode" to exitCode; a scenario file spelled
// that way would work, yet not be in the canonical form that traces print
// and compare, so ParseScripts refuses it. data has already decoded into
// Scripts, so every level has the expected shape.
func checkFieldNames(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("proc: scripts: %w", err)
	}
	if err := exactFields("", top, reflect.TypeFor[Scripts]()); err != nil {
		return err
	}
	var commands map[string]map[string]json.RawMessage
	if raw, ok := top["commands"]; ok {
		if err := json.Unmarshal(raw, &commands); err != nil {
			return fmt.Errorf("proc: scripts: commands: %w", err)
		}
	}
	for _, name := range sortedKeys(commands) {
		at := fmt.Sprintf("commands[%q]", name)
		sc := commands[name]
		if err := exactFields(at, sc, reflect.TypeFor[Script]()); err != nil {
			return err
		}
		var chunks []map[string]json.RawMessage
		if raw, ok := sc["chunks"]; ok {
			if err := json.Unmarshal(raw, &chunks); err != nil {
				return fmt.Errorf("proc: scripts: %s.chunks: %w", at, err)
			}
		}
		for i, c := range chunks {
			if err := exactFields(fmt.Sprintf("%s.chunks[%d]", at, i), c, reflect.TypeFor[Chunk]()); err != nil {
				return err
			}
		}
	}
	return nil
}

// exactFields checks that every key of obj is the JSON name of a field of t,
// spelled exactly.
func exactFields(at string, obj map[string]json.RawMessage, t reflect.Type) error {
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	for _, key := range sortedKeys(obj) {
		if !names[key] {
			if at == "" {
				return fmt.Errorf("proc: scripts: unknown field %q (field names are case-sensitive)", key)
			}
			return fmt.Errorf("proc: scripts: %s: unknown field %q (field names are case-sensitive)", at, key)
		}
	}
	return nil
}
