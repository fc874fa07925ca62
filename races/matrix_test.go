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
	// seeds, when non-zero, is how many seeds of the sweep the row runs
	// (1..seeds) instead of seedsSweep; a row says why it needs fewer.
	seeds int
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
		seeds:    pausedSeeds,
	},
	{
		name:     "Accept commit durable, reply lost",
		required: "`acceptance(requestId)` returns the original conversation/input id",
		cell:     acceptReplyLost,
	},
	{
		name:     "Effect returns as abort starts",
		required: "one invocation per task; fresh abort only after return",
		cell:     effectReturnsAsAbortStarts,
	},
	{
		name:     "Post-mark main/scratch write",
		required: "reject before builder; sinks handle cancellation and drain callbacks",
		cell:     postMarkWrite,
	},
	{
		name:     "Status cycle returns to initial status",
		required: "epoch counts intermediate committed changes; no false fault",
		cell:     statusCycle,
	},
	{
		name:     "Host patches an owned task",
		required: "reject lifecycle/state mutation; abort marks remain allowed",
		cell:     hostPatchesOwnedTask,
	},
	{
		name:     "100,000 historical children, two live tasks",
		required: "query only live seed/needed ancestry, no history traversal",
		cell:     historicalChildrenTwoLive,
		seeds:    historySeeds,
	},
	{
		name:     "Repeated drive and cancelled waiter",
		required: "one attachment; remove waiter/listener exactly once",
		cell:     repeatedDrive,
	},
	{
		name:     "Known dependency self-drive",
		required: "reject before acceptance or cycle-creating admission",
		cell:     knownDependencySelfDrive,
	},
	{
		name:     "Close vs task commit",
		required: "earlier commit completes; later mutation rejects; completion still admitted",
		cell:     closeVsTaskCommit,
	},
	{
		name:     "Shutdown vs accept / idle nextRun inbox",
		required: "accept before mark batch or reject; queued items/results preserved",
		cell:     shutdownVsAccept,
	},
	{
		name:     "Shutdown crash before child cleanup",
		required: "reopened abort marks tasks only; child queues remain unchanged",
		cell:     shutdownCrash,
	},
	{
		name:     "Broken abort handler",
		required: "reject drives/shutdown, signal/join and close; replace kind before recovery",
		cell:     brokenAbortHandler,
	},
	{
		name:     "Parallel tools settle in either order",
		required: "post_tools starts once",
		cell:     parallelTools,
	},
	{
		name:     "Abort vs post_tools settlement",
		required: "no unmarked successor",
		cell:     abortVsPostTools,
	},
	{
		name:     "Two overlapping drives",
		required: "one execution per task",
		cell:     overlappingDrives,
	},
	{
		name:     "A drive caller cancels its wait",
		required: "other callers and tasks unaffected",
		cell:     driveCallerCancels,
	},
	{
		name:     "Cancel vs land of the same inbox item",
		required: "one wins on the line; one terminal input result",
		cell:     cancelVsLand,
	},
	{
		name:     "Abort vs generation/post_tools group transfer",
		required: "every active input resolves once; no unmarked owner escapes",
		cell:     abortVsGroupTransfer,
	},
	{
		name:     "Several inputs share one generation",
		required: "every result points to the same final answer entry",
		cell:     sharedGeneration,
	},
	{
		name:     "Watch registration races a commit",
		required: "base includes it or the stream delivers it",
		cell:     watchRegistrationRacesCommit,
	},
	{
		name:     "Summary lands after a competing head/reset",
		required: "rejected as stale; intervening edits do not stale it",
		cell:     summaryLandsAfterACompetingHead,
	},
	{
		name:     "Overflow retry while collapse runs",
		required: "no live task waits on the collapse",
		cell:     overflowRetryWhileCollapseRuns,
	},
	{
		name:     "Child finishes while its owning tool is marked",
		required: "tool settles aborted, not done",
		cell:     childFinishesWhileItsToolIsMarked,
	},
	{
		name:     "Parent cleanup vs already-terminal job",
		required: "already finished is successful cleanup",
		cell:     parentCleanupVsTerminalJob,
	},
	{
		name:     "Repeated boundary delivery",
		required: "one boundary: one new conversation, the same binding for both",
		cell:     repeatedBoundaryDelivery,
	},
	{
		name:     "Fork at the start races a write of a carried value",
		required: "the fork carries the value as of its place on the line and no source entry",
		cell:     forkAtStartRacesAWrite,
	},
	{
		name:     "A commit from inside a plan while another caller waits",
		required: "nested call refused at once (ErrNestedLineCall); both commits land in line order",
		cell:     nestedCommitWhileAnotherWaits,
	},
	// The storage rows below are about files rather than interleavings;
	// their cells are in files_test.go and run fileSeeds seeds.
	{
		name:     "Main and scratch writes in one batch",
		required: "reject, nothing written",
		cell:     mixedBatch,
		seeds:    fileSeeds,
	},
	{
		name:     "Torn final JSONL line",
		required: "only that line discarded",
		cell:     tornLine,
		seeds:    fileSeeds,
	},
	{
		name:     "Malformed complete line",
		required: "open fails; no silent truncation",
		cell:     malformedLine,
		seeds:    fileSeeds,
	},
	{
		name:     "Retirement committed, unlink fails",
		required: "old scratch invisible",
		cell:     retirementUnlinkFails,
		seeds:    fileSeeds,
	},
	{
		name:     "Main 100, live scratch through 150, crash",
		required: "reopen recovers lastSeq=150; next write=151",
		cell:     crashWithLiveScratch,
		seeds:    fileSeeds,
	},
	{
		name:     "Retired scratch still on disk",
		required: "ignore it even if malformed; later main settlement covers its sequences",
		cell:     retiredScratchOnDisk,
		seeds:    fileSeeds,
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
