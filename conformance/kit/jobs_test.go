package kit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pico-go/pico/conformance/script"
)

// A job scenario's outcome compares across numberings: a port that numbers
// its ids otherwise — in the tasks, in a notice's data (job, origin task)
// and where tool results and notices name a job in their text — normalizes
// to the same journal.
func TestJobOutcomesCompareAcrossNumberings(t *testing.T) {
	scs, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`@([0-9]+)`)
	n := 0
	for _, sc := range scs {
		if !sc.Program.Shell {
			continue
		}
		n++
		renumber := func(m string) string {
			k, _ := strconv.Atoi(strings.TrimPrefix(strings.Trim(m, `"`), "@"))
			return strconv.Itoa(1000 + 7*k)
		}
		// Every name as a JSON number, then every name inside text.
		raw := regexp.MustCompile(`"@[0-9]+"`).ReplaceAllStringFunc(string(sc.Expected), renumber)
		raw = name.ReplaceAllStringFunc(raw, renumber)
		var o Outcome
		d := json.NewDecoder(strings.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&o); err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		if got := Journal(Normalize(o)); !bytes.Equal(got, sc.Expected) {
			df, _ := Diff(got, sc.Expected)
			t.Errorf("scenario %s renumbered: %v", sc.Name, df)
		}
	}
	if n < 8 {
		t.Fatalf("%d shell scenarios; want at least 8", n)
	}
}

// A process line prints and parses back, and reads as the process it
// declares.
func TestProcessLines(t *testing.T) {
	p, err := script.Parse(script.Magic + "\nswarm shell=true budget=1000\n" +
		`process "go test" out "a b\n" wait 200 err "x" trap 300 repeat 2 ab wait 50 exit 3` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	q, err := script.Parse(p.String())
	if err != nil || q.String() != p.String() || q.Budget != 1000 || !q.Shell {
		t.Fatalf("read back %v:\n%s\nwant:\n%s", err, q, p)
	}
	ps, err := processes(q)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ps)
	want := `[{"command":"go test","chunks":[{"stream":"stdout","data":"a b\n"},{"afterMs":200,"stream":"stderr","data":"x"},` +
		`{"stream":"stdout","data":"abab"}],"endAfterMs":50,"exitCode":3,"trapMs":300}]`
	if string(got) != want {
		t.Fatalf("processes:\n%s\nwant:\n%s", got, want)
	}
}
