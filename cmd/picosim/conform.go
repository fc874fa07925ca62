package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/pico-go/pico/conformance/kit"
)

// conformMain is `picosim conform --port 'CMD ARGS'`: it runs the data
// scenarios (fixtures/scenarios) on a port, a child process speaking the
// kit's protocol (fixtures/README.md), and prints per scenario ✓ or the
// first differing path with both values, then a summary. Exit 1 on any
// difference or broken protocol, 2 on a mistake of use or a scenario file
// that does not parse.
func conformMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("conform", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	port := fl.String("port", "", "the port's command line, split at spaces: 'node adapter.mjs'")
	dir := fl.String("scenarios", "fixtures/scenarios", "the directory of scenario files (*.txt)")
	run := fl.String("run", "", "only the scenarios whose name matches this regular expression")
	diffs := fl.Int("diffs", 1, "how many differences to print per scenario")
	timeout := fl.Duration("timeout", kit.ReplyTimeout, "how long to wait for one reply of the port")
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "picosim conform: %s\nusage: picosim conform --port 'CMD ARGS' [--scenarios DIR] [--run REGEXP] [--diffs N] [--timeout D]\n", msg)
		return exitUsage
	}
	pos, err := parseAnywhere(fl, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, "usage: picosim conform --port 'CMD ARGS' [--scenarios DIR] [--run REGEXP] [--diffs N] [--timeout D]")
		fl.SetOutput(stdout)
		fl.PrintDefaults()
		return 0
	case err != nil:
		return usage(err.Error())
	case len(pos) > 0:
		return usage(fmt.Sprintf("unexpected argument %q", pos[0]))
	case strings.TrimSpace(*port) == "":
		return usage("--port is required")
	}
	var match *regexp.Regexp
	if *run != "" {
		if match, err = regexp.Compile(*run); err != nil {
			return usage("--run: " + err.Error())
		}
	}
	scs, err := kit.LoadScenarios(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "picosim conform: %v\n", err)
		return exitUsage
	}
	var chosen []*kit.Scenario
	for _, sc := range scs {
		if match == nil || match.MatchString(sc.Name) {
			chosen = append(chosen, sc)
		}
	}
	if len(chosen) == 0 {
		return usage(fmt.Sprintf("no scenario in %s matches %q", *dir, *run))
	}
	sum, err := kit.Conform(ctx, strings.Fields(*port), chosen, stdout, kit.Options{Diffs: *diffs, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "picosim conform: %v\n", err)
		return exitUsage
	}
	if !sum.OK() {
		return exitFailed
	}
	return 0
}
