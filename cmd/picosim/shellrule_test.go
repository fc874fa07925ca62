package main

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A bash call that saw its job end is an error exactly when the job ran
// badly, ending with the line that says how, and its details name the
// status and exit code the job settled with; one that saw it running is
// no error.
func TestAShellCallReportsItsJob(t *testing.T) {
	code := func(c int) *int { return &c }
	const job, call = storage.ID(63), storage.ID(45)
	cases := []struct {
		name    string
		end     *jobEnd // nil: the job is still running
		status  string  // the details' status
		exit    *int    // the details' exit code
		text    string
		isError bool
		broken  bool
	}{
		{name: "exited 0", end: &jobEnd{status: agent.JobExited, exitCode: code(0)}, status: agent.JobExited, exit: code(0), text: "ok\n"},
		{name: "exited 0 as an error", end: &jobEnd{status: agent.JobExited, exitCode: code(0)}, status: agent.JobExited, exit: code(0), text: "ok\nexit code 0", isError: true, broken: true},
		{name: "exited 1", end: &jobEnd{status: agent.JobExited, exitCode: code(1)}, status: agent.JobExited, exit: code(1), text: "bad\nexit code 1", isError: true},
		{name: "exited 1 as no error", end: &jobEnd{status: agent.JobExited, exitCode: code(1)}, status: agent.JobExited, exit: code(1), text: "bad\n", broken: true},
		{name: "exited 1 said stopped", end: &jobEnd{status: agent.JobExited, exitCode: code(1)}, status: agent.JobExited, exit: code(1), text: "bad\njob 63 was stopped", isError: true, broken: true},
		{name: "killed", end: &jobEnd{status: agent.JobKilled}, status: agent.JobKilled, text: "job 63 was stopped", isError: true},
		{name: "lost", end: &jobEnd{status: agent.JobLost}, status: agent.JobLost, text: "job 63 was lost: the session stopped while it ran", isError: true},
		{name: "crashed", end: &jobEnd{status: agent.JobExited, failed: true}, status: agent.JobExited, text: "warming up\njob 63 failed", isError: true},
		{name: "crashed said exited", end: &jobEnd{status: agent.JobExited, failed: true}, status: agent.JobExited, text: "warming up\n", broken: true},
		{name: "details with another status", end: &jobEnd{status: agent.JobKilled}, status: agent.JobExited, exit: code(0), text: "ok\n", broken: true},
		{name: "details with another code", end: &jobEnd{status: agent.JobExited, exitCode: code(1)}, status: agent.JobExited, exit: code(0), text: "bad\n", broken: true},
		{name: "still running", status: agent.JobRunning, text: "partial\n"},
		{name: "still running as an error", status: agent.JobRunning, text: "partial\njob 63 was stopped", isError: true, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[call], o.tools[call] = agent.ToolKindName, agent.BashToolName
			if tc.end != nil {
				o.kinds[job] = agent.JobKindName
				st, _ := json.Marshal(agent.JobState{Cmd: "lint", ExitCode: tc.end.exitCode, Output: &agent.ToolOutputState{ToolResultData: agent.ToolResultData{IsError: tc.end.failed}}})
				o.jobSettled(storage.Write{Type: storage.WriteSettle, ID: job, Status: tc.end.status, State: st}, 80)
			}
			details, _ := json.Marshal(map[string]any{"job": map[string]any{"id": job, "status": tc.status, "exitCode": tc.exit}})
			out := agent.ToolOutputState{Content: []ai.Block{ai.Text(tc.text)}, ToolResultData: agent.ToolResultData{Details: details, IsError: tc.isError}}
			st, _ := json.Marshal(map[string]any{"output": out})
			w := storage.Write{Type: storage.WriteSettle, ID: call, Status: "done", State: st}
			inv := core.Invocation{Task: call, ConversationID: 1, Method: core.MethodExecute}
			holdsOrBreaks(t, o.shellCallSettled(inv, true, w, "a test", 91), ruleShellCall, tc.broken)
		})
	}
}

// A job tool's stop or status reports a job that ended before the call
// started as it ended (a stop saying it had already ended), and one still
// live when it settles as live (a stop saying it stops it); one that ended
// while the call ran may be reported either way.
func TestAJobCallReportsTheJobAsItStood(t *testing.T) {
	const job, call = storage.ID(9), storage.ID(97)
	cases := []struct {
		name, command string
		endedAt       storage.ID // 0: still live
		status, text  string
		broken        bool
	}{
		{name: "stop of an ended job", command: "stop", endedAt: 50, status: agent.JobKilled, text: "Job 9 had already ended: killed."},
		{name: "stop of an ended job stopping it", command: "stop", endedAt: 50, status: agent.JobKilled, text: "Stopping job 9 (go test ./...).", broken: true},
		{name: "stop of an ended job reported running", command: "stop", endedAt: 50, status: agent.JobRunning, text: "Stopping job 9 (go test ./...).", broken: true},
		{name: "stop of a live job", command: "stop", status: agent.JobRunning, text: "Stopping job 9 (go test ./...)."},
		{name: "stop of a live job said ended", command: "stop", status: agent.JobRunning, text: "Job 9 had already ended: running.", broken: true},
		{name: "stop of a job that ended meanwhile", command: "stop", endedAt: 95, status: agent.JobRunning, text: "Stopping job 9 (go test ./...)."},
		{name: "status of an ended job", command: "status", endedAt: 50, status: agent.JobKilled, text: "Job 9 (go test ./...) is killed."},
		{name: "status of an ended job reported live", command: "status", endedAt: 50, status: agent.JobRunning, text: "Job 9 (go test ./...) is running.", broken: true},
		{name: "status of a live job", command: "status", status: agent.JobRunning, text: "Job 9 (go test ./...) is running."},
		{name: "status of a live job reported ended", command: "status", status: agent.JobExited, text: "Job 9 (go test ./...) is exited.", broken: true},
		{name: "status saying another status", command: "status", status: agent.JobRunning, text: "Job 9 (go test ./...) is planned.", broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[call], o.tools[call] = agent.ToolKindName, agent.JobToolName
			o.kinds[job] = agent.JobKindName
			o.jobCalls[call] = jobCall{command: tc.command, job: job}
			o.last = 60
			inv := core.Invocation{Task: call, ConversationID: 1, Method: core.MethodExecute}
			if err := o.invocation(inv, false); err != nil {
				t.Fatal(err)
			}
			if tc.endedAt != 0 {
				o.jobSettled(storage.Write{Type: storage.WriteSettle, ID: job, Status: agent.JobKilled, State: json.RawMessage(`{"cmd":"go test ./..."}`)}, tc.endedAt)
			}
			details, _ := json.Marshal(map[string]any{"job": map[string]any{"id": job, "status": tc.status}})
			st, _ := json.Marshal(map[string]any{"output": agent.ToolOutputState{Content: []ai.Block{ai.Text(tc.text)}, ToolResultData: agent.ToolResultData{Details: details}}})
			w := storage.Write{Type: storage.WriteSettle, ID: call, Status: "done", State: st}
			holdsOrBreaks(t, o.shellCallSettled(inv, true, w, "a test", 112), ruleShellCall, tc.broken)
		})
	}
}
