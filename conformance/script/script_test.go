package script

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A printed program reads back to the same program, quoting what needs it.
func TestProgramPrintsAndParsesBack(t *testing.T) {
	p := &Program{Tail: 2, Retry: 1, Turns: 3, Calls: 2, Price: 1, Spend: 4096, Lines: []Line{
		{Op: "respond", Args: []string{"calls", "a,work:throw"}},
		{Op: "accept", Args: []string{"c0", "two\nlines \"quoted\" \\", "req=r1"}},
		{Op: "drive", Args: []string{"c0"}},
	}}
	q, err := Parse(p.String())
	if err != nil {
		t.Fatal(err)
	}
	if q.String() != p.String() || q.Lines[1].Args[1] != p.Lines[1].Args[1] || q.Turns != 3 || q.Calls != 2 || q.Queries != 0 || q.Price != 1 || q.Spend != 4096 {
		t.Fatalf("read back:\n%s\nwant:\n%s", q, p)
	}
}

// Value and list lines of every shape parse, and a conversation may be
// named from the newest back.
func TestStateLinesParse(t *testing.T) {
	text := Magic + `
value session ns/k sticky set {"a":1}
value c1 ns rewind delete
list c-1 ns/k rewind append "\"x\""
list c0 ns sticky remove -1
list session ns sticky clear
fork c-1 -2
fork c0 3 carry=ns/k:sticky,other:rewind abort
`
	p, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 7 || p.Lines[0].Args[4] != `{"a":1}` || p.Lines[2].Args[4] != `"x"` || p.Lines[3].Args[4] != "-1" {
		t.Fatalf("Parse read %+v", p.Lines)
	}
	abort, carry, err := ForkOf(p.Lines[6])
	if want := []Carried{{"ns/k", false}, {"other", true}}; err != nil || !abort || !slices.Equal(carry, want) {
		t.Fatalf("ForkOf(%v) = %t, %v, %v; want true, %v", p.Lines[6], abort, carry, err, want)
	}
	if abort, carry, err := ForkOf(p.Lines[5]); err != nil || abort || carry != nil {
		t.Fatalf("ForkOf(%v) = %t, %v, %v; want a plain fork", p.Lines[5], abort, carry, err)
	}
}

// Hook lines of every shape parse.
func TestHookLinesParse(t *testing.T) {
	p, err := Parse(Magic + "\nhook session section\nhook c-1/child block:work subtree\nhook c0 describe:a\nhook c0 instruct subtree\nunhook -1\nhook c0 fail subtree\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 6 || p.Lines[1].Args[2] != "subtree" || p.Lines[4].Op != "unhook" || p.Lines[5].Args[1] != "fail" {
		t.Fatalf("Parse read %+v", p.Lines)
	}
}

// Input lines may name a conversation's newest child (cN/child); no other
// line but a hook may.
func TestInputLinesNameAChild(t *testing.T) {
	p, err := Parse(Magic + "\naccept c0/child look\nfollowup c-1/child more\nsteer c0/child now\nnext-run c0/child later\nwrite c2/child note\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 5 || p.Lines[1].Args[0] != "c-1/child" || p.Lines[4].Op != "write" {
		t.Fatalf("Parse read %+v", p.Lines)
	}
	for _, line := range []string{"abort c0/child", "drive c0/child", "accept c0/kid look", "steer x0/child now"} {
		if _, err := Parse(Magic + "\n" + line + "\n"); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
}

// A reset may carry a handoff's text.
func TestResetLinesTakeAHandoff(t *testing.T) {
	p, err := Parse(Magic + "\nreset c0\nreset c-1 \"carry on\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 2 || len(p.Lines[0].Args) != 1 || p.Lines[1].Args[1] != "carry on" {
		t.Fatalf("Parse read %+v", p.Lines)
	}
	if _, err := Parse(Magic + "\nreset c0 a b\n"); err == nil {
		t.Error("a reset with three arguments parsed")
	}
}

// A spawn's context mode is any word: one other than fresh or inherit is
// the harness's to refuse, so a script can ask that it is.
func TestSpawnLinesTakeAnyMode(t *testing.T) {
	p, err := Parse(Magic + "\nspawn c0 look\nspawn c0 look inherit\nspawn c-1 look sometimes\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 3 || len(p.Lines[0].Args) != 2 || p.Lines[1].Args[2] != "inherit" || p.Lines[2].Args[2] != "sometimes" {
		t.Fatalf("Parse read %+v", p.Lines)
	}
	if _, err := Parse(Magic + "\nspawn c0 look inherit now\n"); err == nil {
		t.Error("a spawn with four arguments parsed")
	}
}

// Nth picks among length things for any number, a negative one counting
// back from the end; a conversation index may be negative the same way.
func TestNthPicksFromEitherEnd(t *testing.T) {
	for _, tc := range []struct{ n, length, want int }{
		{0, 3, 0}, {4, 3, 1}, {-1, 3, 2}, {-3, 3, 0}, {-4, 3, 2}, {7, 1, 0},
	} {
		if got := Nth(tc.n, tc.length); got != tc.want {
			t.Errorf("Nth(%d, %d) = %d, want %d", tc.n, tc.length, got, tc.want)
		}
	}
	if n, err := ConvIndex("c-1"); err != nil || n != -1 {
		t.Errorf(`ConvIndex("c-1") = %d, %v; want -1`, n, err)
	}
}

// A line that does not parse is a ProgramError naming its line.
func TestBadLinesNameTheirLine(t *testing.T) {
	for _, tc := range []struct {
		text string
		line int
		want string
	}{
		{"", 1, "empty"},
		{"picosim program 2\n", 1, "want"},
		{Magic + "\n\n# a comment\nfly c0\n", 4, "unknown op"},
		{Magic + "\ndrive\n", 2, "takes 1 to 1"},
		{Magic + "\nswarm tail=-1\n", 2, "tail"},
		{Magic + "\nrespond slow soon x\n", 2, "slow"},
		{Magic + "\nrespond text\n", 2, "respond text takes one argument (TEXT), not 0"},
		{Magic + "\nrespond calls a b\n", 2, "respond calls takes one argument (NAMES), not 2"},
		{Magic + "\naccept q0 hi\n", 2, "not a conversation"},
		{Magic + "\nentry c0 first\n", 2, "entry"},
		{Magic + "\nedit c0 1 drop\n", 2, "want omit or replace"},
		{Magic + "\nfork c0 1 now\n", 2, `argument "now": want abort or carry=`},
		{Magic + "\nfork c0 1 abort abort\n", 2, "each once"},
		{Magic + "\nfork c0 1 carry=ns:forever\n", 2, `carried value "ns:forever"`},
		{Magic + "\nfork c0 1 carry=/k:sticky\n", 2, `carried value "/k:sticky"`},
		{Magic + "\nedit c0 one omit\n", 2, "edit"},
		{Magic + "\nedit c0 1\n", 2, "takes 3 to 3"},
		{Magic + "\nswarm shell=true\nprocess make out\n", 3, "out takes a TEXT"},
		{Magic + "\nprocess make exit 0 hang\n", 2, "after the end"},
		{Magic + "\nswarm budget=-1\n", 2, "budget"},
		{Magic + "\nhook q0 section\n", 2, "want session, a conversation"},
		{Magic + "\nhook c0 paint\n", 2, "effect \"paint\""},
		{Magic + "\nhook c0 section:a\n", 2, "name a tool"},
		{Magic + "\nhook c0 block\n", 2, "name a tool"},
		{Magic + "\nhook c0 decline:a\n", 2, "name a tool"},
		{Magic + "\nhook c0 block:a everywhere\n", 2, "want subtree"},
		{Magic + "\nhook session drop:a subtree\n", 2, "session hook has no subtree"},
		{Magic + "\nunhook last\n", 2, "unhook"},
		{Magic + "\nswarm queries=-2\n", 2, "queries"},
		{Magic + "\nswarm calls=many\n", 2, "calls"},
		{Magic + "\njob make every=soon\n", 2, "every=MS"},
		{Magic + "\njob make after=0\n", 2, "after=MS"},
		{Magic + "\njob make catchup=later every=5\n", 2, "catchup=once|skip"},
		{Magic + "\njob make catchup=skip\n", 2, "without every=MS"},
		{Magic + "\njob make every=5 every=6\n", 2, "given twice"},
		{Magic + "\ndrive-for c0 later\n", 2, "virtual ms"},
		{Magic + "\nboundary clear t1 cursor\n", 2, "boundary provider \"cursor\""},
		{Magic + "\nboundary clear t1 gemini:restart\n", 2, "boundary event \"restart\""},
		{Magic + "\nboundary restart t1\n", 2, "want startup, resume"},
		{Magic + "\nvalue c+1 ns rewind set 1\n", 2, "not a conversation"},
		{Magic + "\nvalue everyone ns rewind set 1\n", 2, "want session or a conversation"},
		{Magic + "\nvalue c0 /key rewind set 1\n", 2, "names no namespace"},
		{Magic + "\nvalue c0 ns forever set 1\n", 2, "want rewind or sticky"},
		{Magic + "\nvalue c0 ns sticky append 1\n", 2, "want one of delete, set"},
		{Magic + "\nvalue c0 ns sticky set {nope\n", 2, "is not JSON"},
		{Magic + "\nvalue c0 ns sticky delete 1\n", 2, "takes 0 arguments after the op, not 1"},
		{Magic + "\nlist session ns sticky append\n", 2, "takes 1 arguments after the op, not 0"},
		{Magic + "\nlist c0 ns/k rewind remove first\n", 2, "list remove"},
		{Magic + "\nlist c0 ns rewind pop\n", 2, "want one of append, clear, remove"},
		{Magic + "\nlist c0 ns rewind\n", 2, "takes 4 to 5"},
		{Magic + "\ntx c0\n", 2, "takes 2 to"},
		{Magic + "\ntx all set:ns:sticky:1\n", 2, "want session or a conversation"},
		{Magic + "\ntx c0 put:ns:sticky:1\n", 2, `tx write 1 "put:ns:sticky:1": verb "put"`},
		{Magic + "\ntx c0 set:ns:sticky:1 set:ns\n", 2, `tx write 2 "set:ns": want set:NS[/KEY]:POLICY`},
		{Magic + "\ntx c0 set::sticky:1\n", 2, "names no namespace"},
		{Magic + "\ntx c0 clr:ns:forever\n", 2, `policy "forever"`},
		{Magic + "\ntx c0 del:ns:rewind:1\n", 2, "del takes 0 arguments after the policy, not 1"},
		{Magic + "\ntx c0 add:ns:rewind\n", 2, "add takes 1 arguments after the policy, not 0"},
		{Magic + "\ntx c0 fill:ns:rewind:41\n", 2, "want 1 to 40 elements"},
		{Magic + "\ntx c0 fill:ns:rewind:0\n", 2, "want 1 to 40 elements"},
		{Magic + "\ntx c0 rm:ns:rewind:last\n", 2, "rm:"},
		{Magic + "\ntx c0 set:ns:rewind:{nope\n", 2, "is not JSON"},
		{Magic + "\ntx c0 note:ns\n", 2, "note takes nothing"},
		{Magic + "\ntx session note\n", 2, "a note needs a conversation"},
		{Magic + "\nshape c0 many\n", 2, `shape: steps "many": want 1 to 100`},
		{Magic + "\nshape c0 101\n", 2, `shape: steps "101"`},
		{Magic + "\nshape session 3\n", 2, "not a conversation"},
	} {
		_, err := Parse(tc.text)
		var pe *ProgramError
		if !errors.As(err, &pe) || pe.Line != tc.line || !strings.Contains(pe.Reason, tc.want) {
			t.Errorf("Parse(%q) = %v; want a ProgramError at line %d mentioning %q", tc.text, err, tc.line, tc.want)
		}
	}
}

// A tx line's writes parse, a value's JSON keeping its colons, a
// conversation's naming the session's state too, and print back as they
// were written.
func TestTxLinesParse(t *testing.T) {
	text := Magic + `
tx c-1 set:ns/k:rewind:{"a":{"b":1}} del:ns:sticky add:l:rewind:"x:y" fill:l:rewind:40 rm:l:rewind:-2 rerm:l:rewind clr:l:rewind note set:g:session:3
tx session set:g:sticky:2
`
	p, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := TxOf(p.Lines[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []TxWrite{
		{Verb: "set", Name: "ns/k", Policy: "rewind", Arg: `{"a":{"b":1}}`}, {Verb: "del", Name: "ns", Policy: "sticky"},
		{Verb: "add", Name: "l", Policy: "rewind", Arg: `"x:y"`}, {Verb: "fill", Name: "l", Policy: "rewind", Arg: "40"},
		{Verb: "rm", Name: "l", Policy: "rewind", Arg: "-2"}, {Verb: "rerm", Name: "l", Policy: "rewind"},
		{Verb: "clr", Name: "l", Policy: "rewind"}, {Verb: "note"}, {Verb: "set", Name: "g", Policy: "session", Arg: "3"},
	}
	if len(ws) != len(want) {
		t.Fatalf("got %d writes %+v; want %d", len(ws), ws, len(want))
	}
	for i, w := range ws {
		if w != want[i] || w.String() != p.Lines[0].Args[i+1] {
			t.Errorf("write %d = %+v (prints %q); want %+v (%q)", i+1, w, w.String(), want[i], p.Lines[0].Args[i+1])
		}
		if w.List() != (i >= 2 && i <= 6) {
			t.Errorf("write %d (%s): List() = %t", i+1, w, w.List())
		}
	}
	q, err := Parse(p.String())
	if err != nil || q.String() != p.String() || strings.Join(q.Lines[0].Args, " ") != strings.Join(p.Lines[0].Args, " ") {
		t.Fatalf("printed back to %v (%v):\n%s", q, err, p)
	}
}

// A job line's options read in any order.
func TestJobLinesParse(t *testing.T) {
	j, err := JobOf(Line{Op: "job", Args: []string{"backup", "catchup=skip", "rerun", "every=250", "after=40"}})
	want := Job{Cmd: "backup", Every: 250 * time.Millisecond, After: 40 * time.Millisecond, CatchUp: "skip", Rerun: true}
	if err != nil || j != want {
		t.Fatalf("JobOf = %+v, %v; want %+v", j, err, want)
	}
	if j, err := JobOf(Line{Op: "job", Args: []string{"make"}}); err != nil || j != (Job{Cmd: "make"}) {
		t.Fatalf("JobOf(make) = %+v, %v; want a one-off due at once", j, err)
	}
}
