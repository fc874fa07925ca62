package main

import (
	"fmt"
	"io"
)

const mainHelp = `usage: picosim [COMMAND] [ARGS]

With no command, runs the scenario suite: every built-in scenario over seeds 1-50 on JSONL (even
seeds with a fault plan drawn from the seed), each seed twice, and exits 1 if any run fails,
printing the command that reproduces it.

commands:
  list      the built-in scenarios, one line each
  run       one deterministic run of a scenario (picosim run --help)
  replay    re-run a trace and report the first line that differs (picosim replay --help)
  show      a trace as a timeline, the actors as columns, or as an HTML page (picosim show --help)
  fuzz      explore schedules and faults in parallel, shrink failures (picosim fuzz --help)
  check     validate a JSONL session or a SQLite database without writing (picosim check --help)
  bench     the peer's faux-turn workload (picosim bench --help)
  conform   the data scenarios on a port, each outcome diffed (picosim conform --help)
  demo      the kernel walk-through and a seeded pipeline sweep
  help      this text

Flags may come before or after a command's arguments. Exit status: 0 when all is well, 1 when a
run fails (or a replay differs, or a session is invalid), 2 for a mistake of use or a damaged
trace, 3 when the machine fails picosim (TMPDIR missing, read-only or full, a full disk, a build
without cgo asked for sqlite), 128+N after signal N, once temporary directories are removed.
`

func helpMain(w io.Writer) int {
	fmt.Fprint(w, mainHelp)
	return 0
}
