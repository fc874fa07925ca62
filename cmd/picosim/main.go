package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "bench" {
		setGCPercent(simGCPercent) // bench measures the harness at Go's default
	}
	os.Exit(dispatch(signalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the command args name and returns its exit status. Every
// command returns (its temporary directories removed) before main exits.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return suiteMain(ctx, stdout, stderr)
	}
	switch args[0] {
	case "bench":
		return benchMain(ctx, args[1:], stdout, stderr)
	case "run":
		return runMain(ctx, args[1:], stdout, stderr)
	case "list":
		return listMain(stdout)
	case "help", "--help", "-h":
		return helpMain(stdout)
	case "replay":
		return replayMain(ctx, args[1:], stdout, stderr)
	case "show":
		return showMain(args[1:], stdout, stderr)
	case "check":
		return checkMain(ctx, args[1:], stdout, stderr)
	case "fuzz":
		return fuzzMain(ctx, args[1:], stdout, stderr)
	case "conform":
		return conformMain(ctx, args[1:], stdout, stderr)
	case "demo":
		return demoMain(ctx, stdout, stderr)
	}
	fmt.Fprintf(stderr, "picosim: unknown command %q (picosim help lists the commands)\n", args[0])
	return exitUsage
}

// parseAnywhere parses fl's flags wherever they stand among args, before,
// between or after the positional arguments, which it returns in order
// (the flag package alone stops at the first positional one). After "--"
// everything is positional.
func parseAnywhere(fl *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			return nil, flagError(err)
		}
		rest := fl.Args()
		switch {
		case len(rest) == 0:
			return pos, nil
		case len(rest) < len(args) && args[len(args)-len(rest)-1] == "--":
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// flagError makes the flag package's complaint a usage error; asking for
// help stays flag.ErrHelp.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &usageError{err.Error()}
}

func demoMain(ctx context.Context, stdout, stderr io.Writer) int {
	if err := demo(ctx, stdout); err != nil {
		return fail(stderr, "demo", err)
	}
	fmt.Fprintln(stdout)
	if sweep(stdout, true) > 0 {
		return exitFailed
	}
	return 0
}

// modelValue is the generation's model config, the value a fork rewinds.
var modelValue = agent.ModelValue

func demo(ctx context.Context, w io.Writer) error {
	store := memory.New()
	line := core.NewLine(core.RealRuntime(), store, core.NewKinds(), core.LineOptions{
		AfterCommit: func(_ context.Context, b storage.CommitBatch, r storage.Range) func() {
			fmt.Fprintf(w, "commit %d–%d: %d writes\n", r.First, r.Last, len(b.Writes))
			return nil
		},
	})
	var conv, answer, fork storage.ID
	steps := []func(tx *core.Tx){
		func(tx *core.Tx) { conv = tx.CreateConversation(core.ConversationSpec{}) },
		func(tx *core.Tx) {
			core.TxValue(tx, modelValue.In(conv)).Set(agent.ModelRef{ModelID: "faux-1"})
			core.AppendUser(tx, conv, ai.UserText("Inspect the parser", 0))
		},
		func(tx *core.Tx) {
			answer = core.AppendAssistant(tx, conv, ai.Message{Role: ai.RoleAssistant,
				Content: ai.Blocks(ai.Text("The parser is fine.")), StopReason: ai.StopStop})
		},
		func(tx *core.Tx) { core.AppendUser(tx, conv, ai.UserText("Now the lexer", 0)) },
		func(tx *core.Tx) {
			core.AppendSummary(tx, conv, core.SummaryData{SummarizedThrough: answer},
				ai.UserText("Summary: the parser was inspected and is fine.", 0), answer+1)
		},
		func(tx *core.Tx) { fork = tx.Fork(conv, answer) },
		func(tx *core.Tx) { core.TxValue(tx, modelValue.In(conv)).Set(agent.ModelRef{ModelID: "faux-2"}) },
	}
	for _, step := range steps {
		if _, err := line.Commit(ctx, func(tx *core.Tx) error { step(tx); return nil }); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		id   storage.ID
	}{{"root", conv}, {"fork at the answer", fork}} {
		cx, err := core.DeriveContext(ctx, store, c.id, 0)
		if err != nil {
			return err
		}
		v, _, err := store.GetValue(ctx, modelValue.In(c.id).Address, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s (conversation %d): context %v, model %s\n", c.name, c.id, cx.IDs(), v.Value)
		for _, m := range cx.Messages() {
			fmt.Fprintf(w, "  %-9s %s\n", m.Role, m.Content.TextOf())
		}
	}
	return nil
}
