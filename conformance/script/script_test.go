package script

import (
	"errors"
	"strings"
	"testing"
)

// A printed program reads back to the same program, quoting what needs it.
func TestProgramPrintsAndParsesBack(t *testing.T) {
	p := &Program{Tail: 2, Retry: 1, Lines: []Line{
		{Op: "respond", Args: []string{"calls", "a,work:throw"}},
		{Op: "accept", Args: []string{"c0", "two\nlines \"quoted\" \\", "req=r1"}},
		{Op: "drive", Args: []string{"c0"}},
	}}
	q, err := Parse(p.String())
	if err != nil {
		t.Fatal(err)
	}
	if q.String() != p.String() || q.Lines[1].Args[1] != p.Lines[1].Args[1] {
		t.Fatalf("read back:\n%s\nwant:\n%s", q, p)
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
		{Magic + "\naccept q0 hi\n", 2, "not a conversation"},
		{Magic + "\nentry c0 first\n", 2, "entry"},
		{Magic + "\nedit c0 1 drop\n", 2, "want omit or replace"},
		{Magic + "\nedit c0 one omit\n", 2, "edit"},
		{Magic + "\nedit c0 1\n", 2, "takes 3 to 3"},
		{Magic + "\nswarm shell=true\nprocess make out\n", 3, "out takes a TEXT"},
		{Magic + "\nprocess make exit 0 hang\n", 2, "after the end"},
		{Magic + "\nswarm budget=-1\n", 2, "budget"},
		{Magic + "\njob make every=soon\n", 2, "every=MS"},
		{Magic + "\ndrive-for c0 later\n", 2, "virtual ms"},
	} {
		_, err := Parse(tc.text)
		var pe *ProgramError
		if !errors.As(err, &pe) || pe.Line != tc.line || !strings.Contains(pe.Reason, tc.want) {
			t.Errorf("Parse(%q) = %v; want a ProgramError at line %d mentioning %q", tc.text, err, tc.line, tc.want)
		}
	}
}
