package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A summarizer's request is its collapse's prefix between a system prompt
// and a user request carrying the instructions: that request passes once;
// one missing the prefix's newest message, one without the instructions
// and one offering tools break the rule; a generation's request and a
// settled collapse's are not the rule's.
func TestTheSummarizerRuleHoldsWhatTheSummarizerIsSent(t *testing.T) {
	o := newOracle()
	o.kinds[9], o.convs[9] = agent.CollapseKindName, 1
	sysData, _ := json.Marshal(map[string]bool{"baseline": true})
	first := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("first")), StopReason: ai.StopStop}
	second := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("second")), StopReason: ai.StopStop}
	o.transcripts.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: "system", Data: sysData, Model: []ai.Message{{Role: ai.RoleSystem, Content: ai.PlainText("be brief")}}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("one", 1)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: "assistant", Model: []ai.Message{first}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("two", 1)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: "assistant", Model: []ai.Message{second}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 7, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("three", 1)}}},
	}})
	note := func() {
		o.summarizerStarts(storage.Write{Type: storage.WritePatch, ID: 9, Status: "summarizing",
			State: json.RawMessage(`{"at":7,"through":6,"firstRetained":7,"instructions":"keep-paths","attempt":1}`)})
	}
	request := func(prefix ...ai.Message) ai.Request {
		ms := []ai.Message{{Role: ai.RoleSystem, Content: ai.PlainText("you summarize")}}
		ms = append(ms, prefix...)
		return ai.Request{Messages: append(ms, ai.UserText("Summarize.\n\nAlso: keep-paths", 1))}
	}
	prefix := []ai.Message{ai.UserText("one", 1), first, ai.UserText("two", 1), second}

	note()
	if err := o.summarizerRequest(ai.Request{SessionID: "conversation-1", Messages: []ai.Message{ai.UserText("x", 1)}}); err != nil {
		t.Fatalf("a generation's request: %v", err)
	}
	if err := o.summarizerRequest(request(prefix...)); err != nil {
		t.Fatalf("the prefix itself: %v", err)
	}
	if len(o.summaries) != 0 {
		t.Fatalf("the matched attempt is still noted: %v", o.summaries)
	}

	noInstructions := request(prefix...)
	noInstructions.Messages[len(noInstructions.Messages)-1] = ai.UserText("Summarize.", 1)
	withTools := request(prefix...)
	withTools.Tools = []ai.Tool{{Name: "read"}}
	for name, req := range map[string]ai.Request{
		"without the newest message": request(prefix[:3]...),
		"with the system message":    request(append([]ai.Message{{Role: ai.RoleSystem, Content: ai.PlainText("be brief")}}, prefix...)...),
		"without the instructions":   noInstructions,
		"offering tools":             withTools,
	} {
		o.first = nil
		note()
		var oe *oracleError
		if err := o.summarizerRequest(req); !errors.As(err, &oe) || oe.Rule != ruleSummarizer {
			t.Errorf("a request %s: %v; want a %s violation", name, err, ruleSummarizer)
		}
	}

	o.first = nil
	note()
	o.summarizerSettled(storage.Write{Type: storage.WriteSettle, ID: 9})
	if err := o.summarizerRequest(request()); err != nil {
		t.Fatalf("a request after the collapse settled: %v", err)
	}
}

// A collapse whose prefix follows a head summarizes from the head on: the
// summary goes first, and what it replaced is not sent again.
func TestTheSummarizerRuleStartsAtTheHead(t *testing.T) {
	o := newOracle()
	o.kinds[20], o.convs[20] = agent.CollapseKindName, 1
	o.transcripts.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("old", 1)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("kept", 1)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: "summary", Head: 4, Model: []ai.Message{ai.UserText("the summary", 1)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("new", 1)}}},
	}})
	o.summarizerStarts(storage.Write{Type: storage.WritePatch, ID: 20, Status: "summarizing",
		State: json.RawMessage(`{"at":6,"through":4,"firstRetained":6,"head":5,"attempt":1}`)})
	want := []ai.Message{ai.UserText("the summary", 1), ai.UserText("kept", 1)}
	if got := o.summaries[20].messages; !sameOrEmpty(got, want) {
		t.Fatalf("noted %s; want %s", describeMessages(got), describeMessages(want))
	}
}

// A collapse that publishes its summary keeps from the entry after its
// prefix: a state that names another entry, or a summary entry whose head
// or summarizedThrough differ from the state's, breaks the rule.
func TestTheSummaryKeepsWhatFollowsThePrefix(t *testing.T) {
	settle := func(firstRetained, head, through storage.ID) error {
		o := newOracle()
		o.kinds[9], o.convs[9] = agent.CollapseKindName, 1
		o.transcripts.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("one", 1)}}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("two", 1)}}},
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("three", 1)}}},
		}})
		data, _ := json.Marshal(map[string]storage.ID{"summarizedThrough": through})
		state, _ := json.Marshal(agent.CollapseState{At: 6, Through: 4, FirstRetained: firstRetained, Summary: 10})
		b := storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 10, ConversationID: 1, Kind: "summary", Head: head, Data: data}},
			{Type: storage.WriteSettle, ID: 9, Status: "done", State: state},
		}}
		return o.summaryBoundary(b.Writes[1], b, "the test", 11)
	}
	if err := settle(6, 6, 4); err != nil {
		t.Fatalf("a summary that keeps what follows its prefix: %v", err)
	}
	for name, err := range map[string]error{
		"a state keeping the prefix's last entry": settle(4, 4, 4),
		"a head at the prefix's last entry":       settle(6, 4, 4),
		"another summarizedThrough":               settle(6, 6, 3),
	} {
		var oe *oracleError
		if !errors.As(err, &oe) || oe.Rule != ruleSummaryBoundary {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleSummaryBoundary)
		}
	}
}
