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

func rejectf(rule Rule, id storage.ID, format string, args ...any) *CommitError {
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
