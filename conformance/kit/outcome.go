package kit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// An Outcome is what a scenario did that another implementation must
// reproduce (DESIGN §6): the result of every host action, the conversation
// tree with each conversation's own entries, tasks, input results and final
// folded view, the usage rows, and the events each watch saw, commit by
// commit. No scheduler record, time or storage sequence is in it.
//
// Lists are in the order the harness made them: conversations, entries,
// tasks and inputs in creation order; ids are opaque (numbers or strings)
// and compare only after Normalize renames them by order of first
// appearance.
type Outcome struct {
	Actions       []ActionOutcome       `json:"actions"`
	Conversations []ConversationOutcome `json:"conversations"`
	Usage         []UsageOutcome        `json:"usage"`
	Watches       []WatchOutcome        `json:"watches,omitempty"`
}

// ActionOutcome is one host action's result: refused (by rule, or by a
// typed error named in Refused) or done, with the ids it returned (the
// input an accept made, the conversation a fork made) and its answer (a
// cancel's result, a drive's result).
type ActionOutcome struct {
	Line    string `json:"line"`
	Refused string `json:"refused,omitempty"`
	IDs     []ID   `json:"ids,omitempty"`
	Result  string `json:"result,omitempty"`
}

// ConversationOutcome is one conversation of the tree.
type ConversationOutcome struct {
	ID     ID `json:"id"`
	Parent *struct {
		Conversation ID `json:"conversation"`
		At           ID `json:"at,omitempty"`
	} `json:"parent,omitempty"`
	Owner   ID              `json:"owner,omitempty"`
	Entries []EntryOutcome  `json:"entries"`
	Tasks   []TaskOutcome   `json:"tasks"`
	Inputs  []InputOutcome  `json:"inputs"`
	View    ViewOutcome     `json:"view"`
	Values  []ValueOutcome  `json:"values,omitempty"`
	Extra   json.RawMessage `json:"extra,omitempty"` // reserved for a port's notes; never compared
}

// EntryOutcome is one entry of the conversation's own transcript: its kind
// and facets, with the model messages as roles and text.
type EntryOutcome struct {
	ID     ID               `json:"id"`
	Kind   string           `json:"kind"`
	ByTask ID               `json:"byTask,omitempty"`
	Key    string           `json:"key,omitempty"`
	Data   json.RawMessage  `json:"data,omitempty"`
	Model  []MessageOutcome `json:"model,omitempty"`
	Head   ID               `json:"head,omitempty"`
	Edits  []EditOutcome    `json:"edits,omitempty"`
}

// MessageOutcome is a model message as its role, its text blocks joined,
// and its tool calls as NAME(ID).
type MessageOutcome struct {
	Role    string   `json:"role"`
	Text    string   `json:"text,omitempty"`
	Calls   []string `json:"calls,omitempty"`
	IsError bool     `json:"isError,omitempty"`
}

// EditOutcome is one context edit an entry carries.
type EditOutcome struct {
	Type   string `json:"type"`
	Target ID     `json:"target,omitempty"`
}

// TaskOutcome is one task: kind, status, its links, and the reason its
// state gives (why it ended, or why it started). The driver's role of a
// status is this implementation's own and is left out.
type TaskOutcome struct {
	ID         ID     `json:"id"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
	Background bool   `json:"background,omitempty"`
	Abort      bool   `json:"abort,omitempty"`
	After      []ID   `json:"after,omitempty"`
	Owns       []ID   `json:"owns,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// A job's exit code (of its last run, once one ended with one) and,
	// for a schedule, how many runs it finished.
	ExitCode *int `json:"exitCode,omitempty"`
	Runs     int  `json:"runs,omitempty"`
}

// InputOutcome is one input's result (pi.inputResult).
type InputOutcome struct {
	ID        ID     `json:"id"`
	Status    string `json:"status"`
	RequestID string `json:"requestId,omitempty"`
	Placement ID     `json:"placement,omitempty"`
	Result    ID     `json:"result,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ViewOutcome is the conversation's final folded view: a watch opened when
// the program first knew the conversation, folded event by event to the
// end. Context is the derived context's entries, Inbox the queued inputs,
// Tasks the live tasks, Entries the view's tail.
type ViewOutcome struct {
	Context []ID `json:"context"`
	Inbox   []ID `json:"inbox"`
	Tasks   []ID `json:"tasks"`
	Entries []ID `json:"entries"`
}

// ValueOutcome is a conversation value the scenario reads (the model, the
// collapse settings): by namespace and key, with its JSON.
type ValueOutcome struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// UsageOutcome is one usage row (pi.usage, §8.2): which attempt of which
// task, how it ended, and whether its cost is known and its output tokens.
type UsageOutcome struct {
	Conversation ID     `json:"conversation"`
	Task         ID     `json:"task"`
	Kind         string `json:"kind"`
	Attempt      int    `json:"attempt"`
	Outcome      string `json:"outcome"`
	Known        bool   `json:"known"`
	Output       int64  `json:"output,omitempty"`
}

// WatchOutcome is what one watch action's listener saw: each commit's
// events, in order, as TYPE or TYPE ID.
type WatchOutcome struct {
	Conversation ID         `json:"conversation"`
	Commits      [][]string `json:"commits"`
}

// ID is an opaque id as a port sends it: a JSON number or string, kept as
// its text. The empty ID is absent.
type ID string

// MarshalJSON writes a number as a number and anything else as a string.
func (id ID) MarshalJSON() ([]byte, error) {
	if _, err := strconv.ParseInt(string(id), 10, 64); err == nil {
		return []byte(id), nil
	}
	return json.Marshal(string(id))
}

// UnmarshalJSON reads a number or a string.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = ID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("an id must be a number or a string, not %s", b)
	}
	*id = ID(n.String())
	return nil
}

// Normalize renames every id to @1, @2, … by order of first appearance,
// walking the actions, then each conversation (its id, parent, owner,
// tasks, entries, inputs, view), the usage rows and the watches, so that implementations that
// number differently compare. It works on a copy.
func Normalize(o Outcome) Outcome {
	raw, err := json.Marshal(o)
	if err != nil {
		panic("kit: an outcome always marshals: " + err.Error())
	}
	var c Outcome
	if err := json.Unmarshal(raw, &c); err != nil {
		panic("kit: an outcome always reads back: " + err.Error())
	}
	c.fillEmpty()
	c.orderToolResults()
	jobs := map[ID]bool{} // the jobs' ids, which model text may name
	for _, cv := range c.Conversations {
		for _, t := range cv.Tasks {
			if t.Kind == jobKind {
				jobs[t.ID] = true
			}
		}
	}
	names := map[ID]ID{}
	rn := func(id *ID) {
		if *id == "" {
			return
		}
		n, ok := names[*id]
		if !ok {
			n = ID("@" + strconv.Itoa(len(names)+1))
			names[*id] = n
		}
		*id = n
	}
	all := func(ids []ID) {
		for i := range ids {
			rn(&ids[i])
		}
	}
	for i := range c.Actions {
		all(c.Actions[i].IDs)
	}
	for i := range c.Conversations {
		cv := &c.Conversations[i]
		rn(&cv.ID)
		if cv.Parent != nil {
			rn(&cv.Parent.Conversation)
			rn(&cv.Parent.At)
		}
		rn(&cv.Owner)
		// Tasks before entries, so that an entry's byTask (which one
		// implementation may set and another not) does not shift names.
		for j := range cv.Tasks {
			t := &cv.Tasks[j]
			rn(&t.ID)
			all(t.After)
			all(t.Owns)
		}
		for j := range cv.Entries {
			e := &cv.Entries[j]
			e.Data = dataOutcome(e.Kind, e.Data)
			rn(&e.ID)
			e.Data = renameDataIDs(e.Kind, e.Data, rn)
			for k := range e.Model {
				e.Model[k].Text = jobText(e.Model[k].Text, jobs, rn)
			}
			rn(&e.ByTask)
			rn(&e.Head)
			for k := range e.Edits {
				rn(&e.Edits[k].Target)
			}
		}
		for j := range cv.Inputs {
			in := &cv.Inputs[j]
			rn(&in.ID)
			rn(&in.Placement)
			rn(&in.Result)
		}
		all(cv.View.Context)
		all(cv.View.Inbox)
		all(cv.View.Tasks)
		all(cv.View.Entries)
		cv.Extra = nil
	}
	for i := range c.Usage {
		rn(&c.Usage[i].Conversation)
		rn(&c.Usage[i].Task)
	}
	for i := range c.Watches {
		w := &c.Watches[i]
		rn(&w.Conversation)
		for _, commit := range w.Commits {
			for k, ev := range commit {
				if typ, id, ok := strings.Cut(ev, " "); ok {
					x := ID(id)
					rn(&x)
					commit[k] = typ + " " + string(x)
				}
			}
		}
	}
	return c
}

// orderToolResults puts every run of consecutive tool results in the order
// of their keys (the call ids), in the transcripts and in the views: the
// tools of one answer run concurrently and each appends its result when it
// ends, so their order is the schedule's, which no port can be asked to
// reproduce.
func (o *Outcome) orderToolResults() {
	key := map[ID]string{} // tool result → its key
	for _, cv := range o.Conversations {
		for _, e := range cv.Entries {
			if e.Kind == toolResultKind {
				key[e.ID] = e.Key
			}
		}
	}
	sortRuns := func(ids []ID) {
		for i := 0; i < len(ids); {
			j := i
			for j < len(ids) {
				if _, ok := key[ids[j]]; !ok {
					break
				}
				j++
			}
			slices.SortStableFunc(ids[i:j], func(a, b ID) int { return strings.Compare(key[a], key[b]) })
			i = j + 1
		}
	}
	for i := range o.Conversations {
		cv := &o.Conversations[i]
		ids := make([]ID, len(cv.Entries))
		byID := map[ID]EntryOutcome{}
		for k, e := range cv.Entries {
			ids[k], byID[e.ID] = e.ID, e
		}
		sortRuns(ids)
		for k, id := range ids {
			cv.Entries[k] = byID[id]
		}
		sortRuns(cv.View.Context)
		sortRuns(cv.View.Entries)
	}
}

// toolResultKind is the entry kind of tool results.
const toolResultKind = "tool_result"

// fillEmpty makes absent lists empty, so that a port that sends null and
// one that sends [] print the same journal.
func (o *Outcome) fillEmpty() {
	o.Actions, o.Conversations, o.Usage = orEmpty(o.Actions), orEmpty(o.Conversations), orEmpty(o.Usage)
	for i := range o.Conversations {
		cv := &o.Conversations[i]
		cv.Entries, cv.Tasks, cv.Inputs = orEmpty(cv.Entries), orEmpty(cv.Tasks), orEmpty(cv.Inputs)
		v := &cv.View
		v.Context, v.Inbox, v.Tasks, v.Entries = orEmpty(v.Context), orEmpty(v.Inbox), orEmpty(v.Tasks), orEmpty(v.Entries)
	}
	for i := range o.Watches {
		o.Watches[i].Commits = orEmpty(o.Watches[i].Commits)
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Journal is an outcome's canonical printed form, what a scenario file
// holds after its separator: JSON, one member a line, with objects and
// lists that hold only scalars kept on one line when short.
func Journal(o Outcome) []byte {
	raw, err := json.Marshal(o)
	if err != nil {
		panic("kit: an outcome always marshals: " + err.Error())
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		panic("kit: an outcome always reads back: " + err.Error())
	}
	var b bytes.Buffer
	printJSON(&b, v, "")
	b.WriteByte('\n')
	return b.Bytes()
}

// journalLineMax is how long a one-line object or list may be.
const journalLineMax = 100

func printJSON(b *bytes.Buffer, v any, indent string) {
	compact, _ := json.Marshal(v)
	if flat(v) && len(compact) <= journalLineMax {
		b.Write(compact)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		b.WriteString("{\n")
		keys := sortedKeys(x)
		for i, k := range keys {
			kj, _ := json.Marshal(k)
			b.WriteString(indent + "  ")
			b.Write(kj)
			b.WriteString(": ")
			printJSON(b, x[k], indent+"  ")
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(indent + "  ")
			printJSON(b, e, indent+"  ")
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	default:
		b.Write(compact)
	}
}

// flat reports whether v holds no object or list below its own members,
// other than lists of scalars.
func flat(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !scalarOrList(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !scalar(e) {
				return false
			}
		}
	}
	return true
}

func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

func scalarOrList(v any) bool {
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if !scalar(e) {
				return false
			}
		}
		return true
	}
	return scalar(v)
}

// Difference is where two outcomes first differ: a path into the JSON
// (conversations[0].entries[2].model[0].text) and both values.
type Difference struct {
	Path      string
	Got, Want string // JSON text, or "(absent)"
}

func (d *Difference) String() string {
	return fmt.Sprintf("%s: got %s; want %s", d.Path, d.Got, d.Want)
}

// Diff compares two journals as JSON and reports the first difference,
// or nil when they are equal.
func Diff(got, want []byte) (*Difference, error) {
	ds, err := Diffs(got, want, 1)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return &ds[0], nil
}

// Diffs reports up to limit differences between two journals, in path
// order; a list that differs in length differs at its first extra or
// missing item.
func Diffs(got, want []byte, limit int) ([]Difference, error) {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return nil, fmt.Errorf("the outcome is not JSON: %w", err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return nil, fmt.Errorf("the expected outcome is not JSON: %w", err)
	}
	c := &differ{limit: limit}
	c.walk("", g, w)
	return c.out, nil
}

type differ struct {
	limit int
	out   []Difference
}

func (c *differ) full() bool { return len(c.out) >= c.limit }

func (c *differ) add(path, got, want string) {
	if !c.full() {
		c.out = append(c.out, Difference{orRoot(path), got, want})
	}
}

const absent = "(absent)"

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (c *differ) walk(path string, g, w any) {
	if c.full() {
		return
	}
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			c.add(path, show(g), show(w))
			return
		}
		keys := make([]string, 0, len(wv)+len(gv))
		for k := range wv {
			keys = append(keys, k)
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			gk, gok := gv[k]
			wk, wok := wv[k]
			switch {
			case !gok:
				c.add(p, absent, show(wk))
			case !wok:
				c.add(p, show(gk), absent)
			default:
				c.walk(p, gk, wk)
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok {
			c.add(path, show(g), show(w))
			return
		}
		for i := range max(len(gv), len(wv)) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(gv):
				c.add(p, absent, show(wv[i]))
				return
			case i >= len(wv):
				c.add(p, show(gv[i]), absent)
				return
			}
			c.walk(p, gv[i], wv[i])
		}
	default:
		if show(g) != show(w) {
			c.add(path, show(g), show(w))
		}
	}
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// dataOutcome is an entry's data as the outcome has it: a system entry's
// tool definitions by name only (their descriptions and schemas are an
// implementation's own), no tool result data; anything else as it is.
func dataOutcome(kind string, data json.RawMessage) json.RawMessage {
	switch {
	case kind == toolResultKind:
		return nil // ToolResultData is the renderer's, shaped by each implementation (§2.1)
	case kind != systemKind || len(data) == 0:
		return data
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	for _, k := range []string{"toolsAdded", "toolsRemoved"} {
		var tools []struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(m[k], &tools) != nil || tools == nil {
			continue
		}
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		m[k], _ = json.Marshal(names)
	}
	out, _ := json.Marshal(m)
	return out
}

// systemKind is the entry kind of system instructions.
const systemKind = "system"

// dataIDs are the members of an entry kind's data that hold ids (§2.1,
// §8.6), as paths of member names: renamed with the rest, so that a
// summary's boundary and a job notice's job and origin task compare across
// numberings. Ids inside model text (a subagent's id in its tool result)
// stay as they are, but for a job's (jobText).
var dataIDs = map[string][][]string{
	"summary": {{"summarizedThrough"}},
	"notice":  {{"job"}, {"origin", "task"}},
}

func renameDataIDs(kind string, data json.RawMessage, rn func(*ID)) json.RawMessage {
	fields := dataIDs[kind]
	if len(fields) == 0 || len(data) == 0 {
		return data
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if d.Decode(&m) != nil {
		return data
	}
	for _, path := range fields {
		at := m
		for _, f := range path[:len(path)-1] {
			if at, _ = at[f].(map[string]any); at == nil {
				break
			}
		}
		if at == nil {
			continue
		}
		f := path[len(path)-1]
		var id ID
		switch v := at[f].(type) {
		case json.Number:
			id = ID(v.String())
		case string:
			id = ID(v)
		default:
			continue
		}
		rn(&id)
		at[f] = id
	}
	out, _ := json.Marshal(m)
	return out
}

// jobKind is the kind of jobs (§8.6).
const jobKind = "job"

// jobMention is a job's id where tool results and notices name it:
// "Job 12", "job 12", "id 12".
var jobMention = regexp.MustCompile(`\b(Job|job|id) ([0-9]+)\b`)

// spillMention is where a truncated output says the whole of it is kept:
// a path of the execution environment's, not the harness's.
// (What it becomes starts with "(", so that a second pass leaves it.)
var spillMention = regexp.MustCompile(`full output at [^\s;()][^\s;)]*`)

// jobText renames the jobs' ids a model text names (bash's "still running
// as job 12", a notice's "Job 12 (cmd) exited"), since job ids are each
// implementation's own, and leaves a spill file's path out.
func jobText(text string, jobs map[ID]bool, rn func(*ID)) string {
	text = jobMention.ReplaceAllStringFunc(text, func(m string) string {
		word, id, _ := strings.Cut(m, " ")
		x := ID(id)
		if !jobs[x] {
			return m
		}
		rn(&x)
		return word + " " + string(x)
	})
	return spillMention.ReplaceAllString(text, "full output at (spill file)")
}
