package core

import (
	"errors"
	"fmt"

	"github.com/pico-go/pico/storage"
)

// Rule names a commit rule. A rejected commit's *CommitError carries the rule
// it broke, so callers and tests can tell rejections apart without parsing
// messages.
type Rule string

const (
	RuleStateAfterEntry   Rule = "rewindable-state-after-entry" // §3.2
	RuleScratchInMain     Rule = "scratch-write-in-main-commit"
	RuleMainInScratch     Rule = "non-scratch-write-in-scratch-commit"
	RuleUnknownEntryKind  Rule = "unknown-entry-kind"
	RuleUnknownTaskKind   Rule = "unknown-task-kind"
	RuleUnknownStatus     Rule = "unknown-status"
	RuleSettleNotTerminal Rule = "settle-needs-terminal-status"
	RulePatchTerminal     Rule = "patch-to-terminal-status"
	RuleTaskTerminal      Rule = "task-already-terminal"
	RuleUnknownTask       Rule = "unknown-task"
	RuleHeadNotVisible    Rule = "head-not-visible"
	RuleHeadBackwards     Rule = "head-before-previous-head"
	RuleEditTarget        Rule = "edit-target-not-visible"
	RuleDependency        Rule = "dependency-unknown-or-later"
	RuleDependencyTree    Rule = "dependency-outside-ownership-tree"
	RuleBadPayload        Rule = "payload-not-json"
	RuleBadAddress        Rule = "bad-address"
	RuleUnknownConv       Rule = "unknown-conversation"
	RuleStorage           Rule = "storage-structure"
	RuleNotOwner          Rule = "task-owned-by-another-invocation" // §6.1
	RuleAbortCreates      Rule = "abort-creates-new-work"           // §6.3
	RuleSelfWait          Rule = "new-work-creates-a-self-wait"     // §6.2
)

// CommitError reports a commit the line rejected before persistence. Nothing
// was written and no ids were consumed.
type CommitError struct {
	Rule Rule
	// ID is the offending record (task, entry, conversation), when there is one.
	ID storage.ID
	// Detail says what exactly was wrong.
	Detail string
	// Err is an underlying error (a storage *BatchError, say).
	Err error
}

func (e *CommitError) Error() string {
	msg := "core: commit rejected (" + string(e.Rule) + ")"
	if e.ID != 0 {
		msg += fmt.Sprintf(" at %d", e.ID)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CommitError) Unwrap() error { return e.Err }

// Rejectf builds the *CommitError of a broken rule: the rule, the offending
// record's id (0 for none) and what exactly was wrong. Rules are strings
// owned by the package that defines them (the kernel's here, the agent's
// input-result rule in core/agent).
func Rejectf(rule Rule, id storage.ID, format string, args ...any) *CommitError {
	return &CommitError{Rule: rule, ID: id, Detail: fmt.Sprintf(format, args...)}
}

// ErrClosed is returned by the line and handles after close.
var ErrClosed = errors.New("core: closed")

// RuleOf returns the rule a commit error broke, or "" if err is not one.
func RuleOf(err error) Rule {
	var ce *CommitError
	if errors.As(err, &ce) {
		return ce.Rule
	}
	return ""
}

// PersistenceError reports a commit whose persistence failed or is
// uncertain: the batch may or may not be durable. The session must stop
// using this handle and reopen (§3.3); a harness faults on it.
type PersistenceError struct{ Err error }

func (e *PersistenceError) Error() string { return "core: persistence failed: " + e.Err.Error() }
func (e *PersistenceError) Unwrap() error { return e.Err }

// ErrTaskCancelled rejects a mutation by an invocation whose task carries a
// durable abort mark: the mark revoked its authority (§6.3). Task code
// normally just returns it; the driver then runs the fresh abort invocation.
var ErrTaskCancelled = errors.New("core: task cancelled")

// ErrStaleInvocation rejects a call carrying a task identity that is not the
// current invocation of its task (it returned, or it belongs to another run).
var ErrStaleInvocation = errors.New("core: stale or foreign task identity")

// ErrShuttingDown rejects new work while the session shuts down.
var ErrShuttingDown = errors.New("core: shutting down")

// ErrShutdownInterrupted is what Shutdown returns when Close interrupted it;
// the remaining marked tasks recover on the next open.
var ErrShutdownInterrupted = errors.New("core: shutdown interrupted by close")

// ErrLifecycleFromTask rejects close, shutdown and session-wide drive called
// with a task identity: they would wait for the caller's own invocation.
var ErrLifecycleFromTask = errors.New("core: lifecycle call from inside a task")

// SelfWaitError rejects a wait that would wait for the caller itself: a
// foreground task driving its own foreground scope, or waiting for a task
// whose unresolved dependencies lead back to it (§6.2).
type SelfWaitError struct {
	Task   storage.ID // the waiting task
	Target string     // what it tried to wait for
}

func (e *SelfWaitError) Error() string {
	return fmt.Sprintf("core: task %d would wait for itself: %s", e.Task, e.Target)
}

// ConversationBusyError refuses the delete of a conversation whose subtree
// (it and the conversations its tasks own, at any depth) still has work
// (§6.4): a live task in conversation Busy, or, when Task is set, that
// task's invocation still running there.
type ConversationBusyError struct {
	Conversation storage.ID // the one to delete
	Busy         storage.ID // the conversation of its subtree with the work
	Task         storage.ID // the running invocation's task; 0 for live tasks
}

func (e *ConversationBusyError) Error() string {
	if e.Task != 0 {
		return fmt.Sprintf("core: conversation %d has a running invocation in its subtree (task %d, in conversation %d)", e.Conversation, e.Task, e.Busy)
	}
	return fmt.Sprintf("core: conversation %d has live tasks in its subtree (conversation %d)", e.Conversation, e.Busy)
}

// FaultError is a task-contract fault: the session fail-stopped. No outcome
// was manufactured; reopen starts nothing, so the host can inspect the task
// or replace its kind (§6.1).
type FaultError struct {
	Task   storage.ID
	Kind   string
	Method string
	Err    error
}

func (e *FaultError) Error() string {
	if e.Task == 0 {
		return "core: session faulted: " + e.Err.Error()
	}
	return fmt.Sprintf("core: session faulted: task %d (%s) %s: %v", e.Task, e.Kind, e.Method, e.Err)
}

func (e *FaultError) Unwrap() error { return e.Err }

// UnknownKindError rejects opening a session whose live task has a kind
// that is not registered.
type UnknownKindError struct {
	Task storage.ID
	Kind string
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("core: live task %d has unregistered kind %q; register or replace the kind before opening", e.Task, e.Kind)
}
