package main

import (
	"context"
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
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "bench":
			os.Exit(benchMain(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
		case "run":
			os.Exit(runMain(os.Args[2:], os.Stdout, os.Stderr))
		case "list":
			os.Exit(listMain(os.Stdout))
		case "help", "--help", "-h":
			os.Exit(helpMain(os.Stdout))
		case "replay":
			os.Exit(replayMain(os.Args[2:], os.Stdout, os.Stderr))
		case "check":
			os.Exit(checkMain(os.Args[2:], os.Stdout, os.Stderr))
		case "fuzz":
			os.Exit(fuzzMain(os.Args[2:], os.Stdout, os.Stderr))
		case "demo":
			if err := demo(context.Background(), os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "picosim:", err)
				os.Exit(1)
			}
			fmt.Println()
			if sweep(os.Stdout, true) > 0 {
				os.Exit(1)
			}
			os.Exit(0)
		default:
			fmt.Fprintf(os.Stderr, "picosim: unknown command %q (picosim help lists the commands)\n", os.Args[1])
			os.Exit(2)
		}
	}
	if runSuite(os.Stdout, suiteSeeds, suiteBackend, isTerminal(os.Stdout)) > 0 {
		os.Exit(1)
	}
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
