package races

import "testing"

// row is one scenario of the reference's §10.2 table.
type row struct {
	// name is the scenario exactly as the reference's table names it; Go
	// turns its spaces into underscores in the subtest name.
	name string
	// required is the table's required observation, quoted in failures.
	required string
	// cell builds the row's program in one order.
	cell func(o order) cell
}

// order is one of the two orders every row runs in. What forward and reverse
// mean is the row's business; cell says it with the points it forces.
type order string

const (
	forward order = "forward"
	reverse order = "reverse"
)

var orders = []order{forward, reverse}

// matrix is the §10.2 table, in the reference's row order.
var matrix = []row{
	{
		name:     "Persistence paused after construction",
		required: "Queries/watchers still see the old complete state",
		cell:     persistencePaused,
	},
}

func TestRaceMatrix(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range matrix {
		if seen[r.name] {
			t.Fatalf("the matrix has two rows named %q; a cell must be selectable by name", r.name)
		}
		seen[r.name] = true
	}
	for _, r := range matrix {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			for _, o := range orders {
				t.Run(string(o), func(t *testing.T) { explore(t, r, o) })
			}
		})
	}
}
