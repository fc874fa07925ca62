// Package jsontest helps the tests that hold a hand-written JSON fast path
// to encoding/json.
package jsontest

import "pgregory.net/rapid"

// Splice draws one to three of tokens and splices each into text, now at
// any byte and now right after its first, where a member surely fits: a
// written value turned into the texts next to it (keys given twice or in
// another case, values of the wrong kind, broken grammar), which a fast
// path must read as encoding/json does or give up on.
func Splice(t *rapid.T, text string, tokens []string) string {
	for range rapid.IntRange(1, 3).Draw(t, "splices") {
		at := rapid.IntRange(0, len(text)).Draw(t, "at")
		if rapid.Bool().Draw(t, "afterBrace") {
			at = 1
		}
		text = text[:at] + rapid.SampledFrom(tokens).Draw(t, "token") + text[at:]
	}
	return text
}
