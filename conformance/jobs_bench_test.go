package conformance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/internal/memstat"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/storage"
)

// The job benchmarks of §10.3, on every backend: many live background
// tasks, and one job streaming a large output.
const (
	// liveJobsBench is how many jobs BenchmarkManyLiveJobs keeps live.
	liveJobsBench = 1000
	// streamBytesBench is what BenchmarkJobStreamingOutput's job prints,
	// in streamChunkBytes chunks streamChunkMs apart.
	streamBytesBench = 10 << 20
	streamChunkBytes = 64 << 10
	streamChunkMs    = 10
)

// BenchmarkManyLiveJobs starts liveJobsBench jobs, each a fake process
// that prints a line and runs until killed, waits until every one is
// running, reads the process's memory with all of them live, then stops
// them all and waits until every one settled killed. It reports commits
// per second over the whole run, the heap and resident set per thousand
// live jobs, and bytes on disk per job.
//
//	go test ./conformance -run XXX -bench ManyLiveJobs -benchtime 1x
func BenchmarkManyLiveJobs(b *testing.B) {
	scripts := proc.Scripts{Commands: map[string]proc.Script{
		"serve": {Chunks: []proc.Chunk{{Stream: proc.StreamStdout, Data: "listening\n"}}, Hang: true},
	}}
	for _, be := range turnBackends {
		if be.name == "jsonl-fsync" {
			continue // a job start is a few commits; fsync measures the disk
		}
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			var commits int64
			var elapsed time.Duration
			var heap, rss, disk float64
			for range b.N {
				dir := b.TempDir()
				store, err := be.open(ctx, dir)
				if err != nil {
					b.Fatal(err)
				}
				timed := &timedStorage{Storage: store}
				rt := core.RealRuntime()
				h, err := agent.Open(ctx, timed, agent.Options{Runtime: rt, Env: proc.New(rt, scripts)})
				if err != nil {
					b.Fatal(err)
				}
				heap0, rss0 := memstat.Settled()
				start := time.Now()
				if _, err := h.Drive(ctx); err != nil { // attach: background work runs from now on
					b.Fatal(err)
				}
				c := h.Root()
				jobs := make([]storage.ID, liveJobsBench)
				for i := range jobs {
					if jobs[i], err = c.StartJob(ctx, agent.JobSpec{Cmd: "serve"}); err != nil {
						b.Fatal(err)
					}
				}
				waitJobs(b, ctx, h, func(t *storage.Task) bool { return t.Status == agent.JobRunning }, jobs)
				elapsed += time.Since(start)
				h1, r1 := memstat.Settled()
				heap, rss = heap+(h1-heap0), rss+(r1-rss0)
				start = time.Now()
				for _, id := range jobs {
					if err := h.AbortTask(ctx, id); err != nil {
						b.Fatal(err)
					}
				}
				waitJobs(b, ctx, h, func(t *storage.Task) bool { return t.Status == agent.JobKilled }, jobs)
				elapsed += time.Since(start)
				disk += float64(dirBytes(b, dir))
				commits += timed.commits.Load()
				if err := h.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(commits)/elapsed.Seconds(), "commits/s")
			b.ReportMetric(heap/n*1000/liveJobsBench, "heapMB/1k-live")
			b.ReportMetric(rss/n*1000/liveJobsBench, "rssMB/1k-live")
			b.ReportMetric(disk/n/liveJobsBench, "bytes/job")
		})
	}
}

// waitJobs polls, with the wall clock (a benchmark under the real runtime),
// until every job satisfies ok.
func waitJobs(b *testing.B, ctx context.Context, h *agent.Harness, ok func(*storage.Task) bool, jobs []storage.ID) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		got, err := h.GetTasks(ctx, jobs)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, t := range got {
			if ok(t) {
				n++
			}
		}
		if n == len(jobs) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("the jobs did not get there within a minute")
}

// BenchmarkJobStreamingOutput runs one job that prints streamBytesBench
// bytes in streamChunkBytes chunks, streamChunkMs of virtual time apart,
// under the simulated runtime (so the figures are the same on every
// machine), with a watcher of its preview. It reports the bytes on disk
// after the job settled, the scratch writes and preview frames per MB
// printed, and the wall time per MB; the job's window is the default
// (50 kB, the end kept) and the rest is spilled by the environment.
//
//	go test ./conformance -run XXX -bench JobStreamingOutput -benchtime 1x
func BenchmarkJobStreamingOutput(b *testing.B) {
	chunk := strings.Repeat(strings.Repeat("y", 63)+"\n", streamChunkBytes/64)
	var chunks []proc.Chunk
	for range streamBytesBench / streamChunkBytes {
		chunks = append(chunks, proc.Chunk{AfterMs: streamChunkMs, Stream: proc.StreamStdout, Data: chunk})
	}
	scripts := proc.Scripts{Commands: map[string]proc.Script{"flood": {Chunks: chunks}}}
	for _, be := range turnBackends {
		if be.name == "jsonl-fsync" {
			continue
		}
		b.Run(be.name, func(b *testing.B) {
			var disk, frames, scratch float64
			var elapsed time.Duration
			for i := range b.N {
				dir := b.TempDir()
				s := sim.New(sim.Options{Seed: uint64(i + 1)})
				err := s.Run(context.Background(), func(ctx context.Context) {
					store, err := be.open(ctx, dir)
					if err != nil {
						panic(err)
					}
					timed := &timedStorage{Storage: store}
					h, err := agent.Open(ctx, timed, agent.Options{Runtime: s.Runtime(), Env: proc.New(s.Runtime(), scripts),
						OnTaskOutput: func(core.TaskOutput) { frames++ }})
					if err != nil {
						panic(err)
					}
					start := time.Now()
					if _, err := h.Drive(ctx); err != nil {
						panic(err)
					}
					job, err := h.Root().StartJob(ctx, agent.JobSpec{Cmd: "flood"})
					if err != nil {
						panic(err)
					}
					for {
						t, _, err := h.GetTask(ctx, job)
						if err != nil {
							panic(err)
						}
						if !t.Live() {
							break
						}
						if err := s.Runtime().Sleep(ctx, 100*time.Millisecond); err != nil {
							panic(err)
						}
					}
					elapsed += time.Since(start)
					scratch += float64(timed.commits.Load())
					if err := h.Close(ctx); err != nil {
						panic(err)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				disk += float64(dirBytes(b, dir))
			}
			n, mb := float64(b.N), float64(streamBytesBench)/(1<<20)
			b.ReportMetric(disk/n, "disk-bytes")
			b.ReportMetric(scratch/n/mb, "commits/MB")
			b.ReportMetric(frames/n/mb, "frames/MB")
			b.ReportMetric(elapsed.Seconds()*1e3/n/mb, "ms/MB")
		})
	}
}
