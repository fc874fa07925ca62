// Package faux is a scripted model provider for the deterministic
// simulation harness (reference delta-and-messages §3). A scenario queues
// responses (Steps); each Stream call plays the next one as the event
// sequence a real provider would send: start, each block's start, deltas and
// end, then done or error.
//
// Every source of variation comes from outside: chunk sizes from the rng
// given to New (the simulator's, so a seed fixes them), time and waiting from
// the core.Runtime (the simulator's virtual clock, so pacing costs no wall
// time). Each chunk is a scheduling point, which lets the simulator
// interleave other actors mid-answer.
//
// The stream is pulled: Next computes, waits for and returns one event on
// the caller's actor. So no extra actor is started per call, and the live
// partial message is only ever touched by the goroutine reading the stream.
//
// How retryable errors and context overflows are told apart: see
// RawRateLimited and RawContextOverflow.
//
// # Files
//
//   - clone.go: deep copies of requests and messages, so the script and the recorded requests alias no caller memory.
//   - deferred.go: deferred responses: handles, fetches that answer deferred again or resolve, cancellation.
//   - faux.go: the Provider and its Options: served models, the response queue, recorded calls and requests.
//   - play.go: turning one call into its stream: resolving the step, the final message, chunks and pacing.
//   - script.go: Script, the JSON form of a response queue, read strictly by ParseScript.
//   - step.go: Step, one scripted response, its builders and validation, and the texts of made-up errors.
//   - stream.go: the stream one call returns, one event per Next, and how cancellation ends it.
//   - usage.go: the reference's usage estimate: four characters a token, cache reads from a session's previous prompt; its cost at Options.Price.
//   - wait.go: eitherCtx, a context done when either parent is, without a goroutine the simulator does not schedule.
//
// Tests: faux_test.go (event order, deltas and the live partial,
// cancellation, Func steps, usage, pacing, determinism, deferred answers,
// scripts), wait_test.go (eitherCtx).
package faux
