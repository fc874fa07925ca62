package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// A failing hook's failure must be reported, as a HookError of its task
// and point carrying the hook's error (or, for a panic, saying so), before
// the invocation that ran it commits again; a report answers one failure.
func TestAFailedHookIsReportedBeforeItsInvocationCommits(t *testing.T) {
	exec := core.Invocation{Task: 6, Method: core.MethodExecute}
	failed := hookFailure{task: 6, method: core.MethodExecute, point: agent.HookBeforeRequest}
	report := &core.HookError{Kind: agent.GenerationKindName, Point: agent.HookBeforeRequest, Task: 6, Err: fmt.Errorf("hook 1: %w", errHookFails)}
	commit := func(o *oracle, inv core.Invocation) error {
		return o.failuresReported(inv, true, "task 6's execute", storage.Range{First: 30, Last: 30})
	}

	o := newOracle()
	o.hookFailed(failed)
	if !o.hookReported(report) {
		t.Fatal("the failure's own report was not taken")
	}
	if err := commit(o, exec); err != nil {
		t.Fatalf("a commit after the report: %v", err)
	}
	if o.hookReported(report) {
		t.Error("a second report of one failure was taken")
	}

	for name, r := range map[string]*core.HookError{
		"another task":  {Point: agent.HookBeforeRequest, Task: 7, Err: errHookFails},
		"another point": {Point: agent.HookAfterResponse, Task: 6, Err: errHookFails},
		"another error": {Point: agent.HookBeforeRequest, Task: 6, Err: errors.New("boom")},
	} {
		o := newOracle()
		o.hookFailed(failed)
		if o.hookReported(r) {
			t.Errorf("%s: the report was taken for the failure", name)
		}
	}

	o = newOracle()
	o.hookFailed(hookFailure{task: 6, method: core.MethodExecute, point: agent.HookSystemInstructions, panicked: true})
	if o.hookReported(&core.HookError{Point: agent.HookSystemInstructions, Task: 6, Err: errHookFails}) {
		t.Error("a panic's failure was answered by an error's report")
	}
	if !o.hookReported(&core.HookError{Point: agent.HookSystemInstructions, Task: 6, Err: errors.New("hook generation.system_instructions panicked: hook 2 panics")}) {
		t.Error("a panic's report was not taken")
	}

	o = newOracle()
	o.hookFailed(failed)
	if err := commit(o, core.Invocation{Task: 6, Method: core.MethodAbort}); err != nil {
		t.Errorf("another method of the task committing: %v", err)
	}
	var oe *oracleError
	if err := commit(o, exec); !errors.As(err, &oe) || oe.Rule != ruleHookFailures {
		t.Errorf("a commit before the report: %v; want a %s violation", err, ruleHookFailures)
	}
}

// A call a failing hook blocked names the hook, whether it failed by an
// error or a panic; other outputs name none.
func TestFailBlockedNamesTheFailingHook(t *testing.T) {
	for text, want := range map[string]int{
		"blocked: before_tool failed: hook 3 at before_tool: the host's hook fails":                  3,
		"blocked: before_tool failed: hook tool.before_tool panicked: hook 12 panics at before_tool": 12,
		"blocked: hook 3": -1,
		"blocked: before_tool failed: denied by policy": -1,
		"worked: hook 3 at before_tool":                 -1,
	} {
		if got := failBlocked(text); got != want {
			t.Errorf("failBlocked(%q) = %d; want %d", text, got, want)
		}
	}
}
