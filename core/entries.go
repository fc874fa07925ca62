package core

import (
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// SummaryData is a summary's data: the last entry it summarizes.
type SummaryData struct {
	SummarizedThrough storage.ID `json:"summarizedThrough"`
}

// HandoffData is a handoff's data: the message that starts the new context.
type HandoffData struct {
	Text string `json:"text"`
}

// SystemSection is one keyed section of the system prompt. In a delta, a nil
// Text (JSON null) removes the section.
type SystemSection struct {
	Key  string  `json:"key"`
	Text *string `json:"text"`
}

// SystemData is a system entry's data (§2.1): a baseline opens an epoch with
// every section and the full tool set; a delta carries only what changed.
// Tools are complete definitions as sent, never names resolved later.
type SystemData struct {
	Baseline     bool            `json:"baseline,omitempty"`
	Sections     []SystemSection `json:"sections,omitempty"`
	ToolsAdded   []ai.Tool       `json:"toolsAdded,omitempty"`
	ToolsRemoved []ai.Tool       `json:"toolsRemoved,omitempty"`
}

// The built-in entry kinds (§2.1).
var (
	UserKind       = storage.DefineEntryKind[struct{}]("user")
	AssistantKind  = storage.DefineEntryKind[struct{}]("assistant")
	ToolResultKind = storage.DefineEntryKind[map[string]any]("tool_result")
	SystemKind     = storage.DefineEntryKind[SystemData]("system")
	NoticeKind     = storage.DefineEntryKind[map[string]any]("notice")
	SummaryKind    = storage.DefineEntryKind[SummaryData]("summary")
	HandoffKind    = storage.DefineEntryKind[HandoffData]("handoff")
	ResetKind      = storage.DefineEntryKind[struct{}]("reset")
	// ProviderBoundaryKind is the data-only first entry of a conversation a
	// provider clear started (DESIGN §11); core/boundary writes it and
	// types its data.
	ProviderBoundaryKind = storage.DefineEntryKind[map[string]any]("provider_boundary")
)

// BuiltinEntryKinds lists the built-in entry kinds.
func BuiltinEntryKinds() []storage.Kinder {
	return []storage.Kinder{UserKind, AssistantKind, ToolResultKind, SystemKind, NoticeKind, SummaryKind, HandoffKind, ResetKind, ProviderBoundaryKind}
}

// AppendUser appends a user entry whose model is msg.
func AppendUser(tx *Tx, conversationID storage.ID, msg ai.Message) storage.ID {
	return tx.Entry(UserKind, conversationID, EntryDraft{Model: []ai.Message{msg}})
}

// AppendAssistant appends an assistant entry whose model is msg.
func AppendAssistant(tx *Tx, conversationID storage.ID, msg ai.Message) storage.ID {
	return tx.Entry(AssistantKind, conversationID, EntryDraft{Model: []ai.Message{msg}})
}

// AppendToolResult appends a tool result keyed by the call it answers, with
// the renderer's data and the exact message the model will see.
func AppendToolResult(tx *Tx, conversationID storage.ID, data any, msg ai.Message) storage.ID {
	return tx.Entry(ToolResultKind, conversationID, EntryDraft{Key: msg.ToolCallID, Data: data, Model: []ai.Message{msg}})
}

// AppendSystem appends a system entry: its structured data for the next
// comparison and its materialized message.
func AppendSystem(tx *Tx, conversationID storage.ID, data SystemData, msg ai.Message) storage.ID {
	return tx.Entry(SystemKind, conversationID, EntryDraft{Data: data, Model: []ai.Message{msg}})
}

// AppendNotice appends a notice; msg may be nil for a notice the model must
// not see.
func AppendNotice(tx *Tx, conversationID storage.ID, data any, msg *ai.Message) storage.ID {
	d := EntryDraft{Data: data}
	if msg != nil {
		d.Model = []ai.Message{*msg}
	}
	return tx.Entry(NoticeKind, conversationID, d)
}

// AppendSummary appends a summary whose context starts at firstRetained:
// the summary projects first, then the retained tail.
func AppendSummary(tx *Tx, conversationID storage.ID, data SummaryData, msg ai.Message, firstRetained storage.ID) storage.ID {
	return tx.Entry(SummaryKind, conversationID, EntryDraft{Data: data, Model: []ai.Message{msg}, Head: firstRetained})
}

// AppendHandoff appends a handoff: a head at itself whose message starts the
// new context.
func AppendHandoff(tx *Tx, conversationID storage.ID, text string, msg ai.Message) storage.ID {
	return tx.Entry(HandoffKind, conversationID, EntryDraft{Data: HandoffData{Text: text}, Model: []ai.Message{msg}, Head: HeadSelf})
}

// AppendReset appends a reset: a head at itself with no model, so the
// context starts empty after it.
func AppendReset(tx *Tx, conversationID storage.ID) storage.ID {
	return tx.Entry(ResetKind, conversationID, EntryDraft{Head: HeadSelf})
}
