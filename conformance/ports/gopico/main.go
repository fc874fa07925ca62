// Command gopico is this implementation as a conformance port: it speaks
// the kit's protocol (fixtures/README.md) on stdin and stdout over the
// public API, so `picosim conform --port gopico` checks the kit itself.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/pico-go/pico/conformance/kit"
)

func main() {
	if err := kit.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gopico:", err)
		os.Exit(1)
	}
}
