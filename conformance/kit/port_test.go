package kit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePortEnv makes the test binary a broken port (see TestMain).
const fakePortEnv = "KIT_FAKE_PORT"

func TestMain(m *testing.M) {
	switch os.Getenv(fakePortEnv) {
	case "":
		os.Exit(m.Run())
	case "garbage":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("hello, I am not a port")
		}
	case "crash":
		bufio.NewScanner(os.Stdin).Scan()
		fmt.Fprintln(os.Stderr, "fake port: out of cheese")
		os.Exit(3)
	case "unsupported":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println(`{"ok":false,"unsupported":"no faux provider"}`)
		}
	}
	os.Exit(0)
}

// buildGoPort builds the Go adapter, this implementation as a port.
func buildGoPort(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gopico")
	if out, err := exec.Command("go", "build", "-o", bin, "../ports/gopico").CombinedOutput(); err != nil {
		t.Fatalf("go build the Go port: %v\n%s", err, out)
	}
	return bin
}

// This implementation, as a port speaking the protocol, reproduces every
// scenario's journal.
func TestGoPortConforms(t *testing.T) {
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sum, err := Conform(context.Background(), []string{buildGoPort(t)}, scs, &out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() || sum.Passed != len(scs) {
		t.Fatalf("the Go port: %+v\n%s", sum, out.String())
	}
	if !strings.HasSuffix(out.String(), fmt.Sprintf("DONE %d scenarios: %d ✓, 0 differ, 0 unsupported, 0 failed\n", len(scs), len(scs))) {
		t.Fatalf("summary line missing:\n%s", out.String())
	}
}

// A port that answers with something else than the expected outcome is
// reported with the scenario and the first differing path.
func TestAnEditedExpectationNamesScenarioAndPath(t *testing.T) {
	sc := mustScenario(t, "basic-turn")
	sc.Expected = []byte(strings.Replace(string(sc.Expected), `"text":"hello"`, `"text":"HELLO"`, 1))
	out, err := Run(context.Background(), sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Diff(Journal(out), sc.Expected)
	if err != nil || d == nil {
		t.Fatalf("Diff = %v, %v; want a difference", d, err)
	}
	if want := `conversations[0].entries[2].model[0].text: got "hello"; want "HELLO"`; d.String() != want {
		t.Fatalf("difference %q; want %q", d, want)
	}
}

func mustScenario(t *testing.T, name string) *Scenario {
	t.Helper()
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %s", name)
	return nil
}

// A port that breaks the protocol (sends garbage, exits) is a PortError
// naming the scenario and the request; an unsupported scenario is skipped.
func TestBrokenPortsAreNamed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sc := mustScenario(t, "basic-turn")
	for _, tc := range []struct {
		mode, want string
	}{
		{"garbage", `scenario basic-turn, open: the port answered "hello, I am not a port", which is not a reply`},
		{"crash", "scenario basic-turn, open: the port exited (exit status 3); its stderr ends: fake port: out of cheese"},
	} {
		t.Setenv(fakePortEnv, tc.mode)
		p, err := StartPort(context.Background(), []string{self})
		if err != nil {
			t.Fatal(err)
		}
		v := p.RunScenario(sc, 1)
		_ = p.Close()
		var pe *PortError
		if !errors.As(v.Err, &pe) || !strings.Contains(v.Err.Error(), tc.want) {
			t.Errorf("%s port: %v; want a PortError with %q", tc.mode, v.Err, tc.want)
		}
	}
	t.Setenv(fakePortEnv, "unsupported")
	var out strings.Builder
	sum, err := Conform(context.Background(), []string{self}, []*Scenario{sc}, &out, Options{})
	if err != nil || sum.Unsupported != 1 || !sum.OK() || !strings.Contains(out.String(), "- basic-turn: unsupported: no faux provider") {
		t.Fatalf("unsupported port: %+v, %v:\n%s", sum, err, out.String())
	}
}

// A scenario file that is not one is refused naming the file and line.
func TestBadScenarioFilesNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		text string
		line int
		want string
	}{
		{"picosim program 1\naccept c0 hi\n", 3, "no \"---- outcome\" line"},
		{"picosim program 1\nfly c0\n---- outcome\n", 2, "unknown op"},
		{"picosim program 1\n# a comment\nsleep 10\n---- outcome\n", 3, "depends on timing"},
		{"picosim program 1\nrespond slow 10 x\n---- outcome\n", 1, "depends on time"},
		{"picosim program 1\nswarm queue=3\n---- outcome\n", 2, "no watch queue bound"},
		// Process declarations: each mistake names its line.
		{"picosim program 1\nprocess build exit 0\n---- outcome\n", 2, "shell=true"},
		{"picosim program 1\nswarm shell=true\n\nprocess build out hi\n---- outcome\n", 4, "no end"},
		{"picosim program 1\nswarm shell=true\nprocess build wait soon exit 0\n---- outcome\n", 3, "wait \"soon\""},
		{"picosim program 1\nswarm shell=true\nprocess build exit 0 out late\n---- outcome\n", 3, "after the end"},
		{"picosim program 1\nswarm shell=true\nprocess build exit 300\n---- outcome\n", 3, "exit code 0 to 255"},
		{"picosim program 1\nswarm shell=true\nprocess build fly away hang\n---- outcome\n", 3, "unknown step \"fly\""},
		{"picosim program 1\nswarm shell=true\nprocess build wait 5 hang\n---- outcome\n", 3, "waits for nothing"},
		{"picosim program 1\nswarm shell=true\nprocess build exit 0\nprocess x exit 1\nprocess build exit 1\n---- outcome\n", 5, "declared twice"},
		{"picosim program 1\nswarm shell=true\nrespond text hi\nrespond calls job:status\n---- outcome\n", 4, "job:COMMAND:K"},
		{"picosim program 1\nswarm budget=10\n---- outcome\n", 2, "shell=true"},
		{"picosim program 1\nswarm turns=3\n---- outcome\n", 2, "session limits"},
		{"picosim program 1\nswarm spend=3\n---- outcome\n", 2, "session limits"},
		{"picosim program 1\nswarm price=1\n---- outcome\n", 2, "prices are picosim's"},
		{"picosim program 1\nswarm shell=true\njob build every=0\n---- outcome\n", 3, "every=MS"},
	} {
		_, err := ParseScenario("x.txt", tc.text)
		var se *ScenarioError
		if !errors.As(err, &se) || se.Line != tc.line || !strings.Contains(se.Reason, tc.want) || se.Path != "x.txt" {
			t.Errorf("ParseScenario(%q) = %v; want a ScenarioError at x.txt:%d mentioning %q", tc.text, err, tc.line, tc.want)
		}
	}
}

// Diffs reports each difference up to its limit, in path order.
func TestDiffsReportsUpToItsLimit(t *testing.T) {
	got := []byte(`{"a":[1,2,3],"b":{"c":"x","d":true},"e":1}`)
	want := []byte(`{"a":[1,5],"b":{"c":"y"},"e":1,"f":null}`)
	ds, err := Diffs(got, want, 10)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	wantLines := []string{"a[1]: got 2; want 5", "a[2]: got 3; want (absent)", `b.c: got "x"; want "y"`,
		"b.d: got true; want (absent)", "f: got (absent); want null"}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("Diffs:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
	if ds, _ := Diffs(got, want, 2); len(ds) != 2 {
		t.Fatalf("Diffs with limit 2 = %d differences", len(ds))
	}
}
