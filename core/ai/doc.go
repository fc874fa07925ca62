// Package ai holds the provider-neutral vocabulary the harness stores and
// sends: messages and their content blocks, tool definitions, usage and stop
// reasons. It is a leaf package (standard library only) so that a thin client
// or a port can read stored model projections without the harness.
//
// The JSON forms keep the reference field names (role, toolCallId, stopReason,
// …). Decoding is strict about the discriminators: an unknown role, block type
// or stop reason is an error that names it.
//
// # Files
//
//   - frame.go: compact frames of an assistant message in progress (§4): FrameEncoder writes them, ReduceFrames replays them.
//   - message.go: messages, content blocks, usage and cost, tool definitions, deferred handles and nested calls.
//   - stream.go: the provider interface: requests, stream events, the raw stop reasons that classify errors, deferred responses.
//
// Tests: message_test.go (JSON forms keep their bytes, strict decoding),
// frame_test.go (encoding then reducing rebuilds the message, cut streams,
// encoder errors).
package ai
