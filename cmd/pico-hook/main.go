// Command pico-hook is the lifecycle hook an agent CLI runs on its session
// events (Claude Code, Codex, Gemini CLI, Copilot CLI, or a generic
// harness): it reads the hook's JSON on stdin and sends it, with the
// launch's token, to the host's lifecycle socket, whose address and token
// the host put in the environment (PICO_LIFECYCLE_SOCKET,
// PICO_LIFECYCLE_TOKEN).
//
//	pico-hook --provider claude < payload.json
//
// It is fail-open: whatever goes wrong (no socket, a wrong token, a payload
// the adapter refuses, a host that does not answer in time), it exits 0,
// prints nothing on stdout — agent CLIs put a hook's stdout into the
// model's context — and writes one bounded line on stderr. The provider
// goes on; the host's current conversation and limits stay as they were.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/pico-go/pico/core/boundary"
)

// Bounds of one delivery.
const (
	payloadMax  = 1 << 20
	timeout     = 2 * time.Second
	stderrMax   = 200
	responseMax = 1 << 20
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Getenv); err != nil {
		msg := "pico-hook: " + strings.ReplaceAll(err.Error(), "\n", " ")
		if len(msg) > stderrMax {
			msg = msg[:stderrMax-1] + "…"
		}
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(0) // fail-open, always
}

func run(args []string, stdin io.Reader, getenv func(string) string) error {
	fl := flag.NewFlagSet("pico-hook", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	provider := fl.String("provider", "", "claude, codex, gemini, copilot or generic")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *provider == "" {
		return errors.New("--provider is required")
	}
	payload, err := io.ReadAll(io.LimitReader(stdin, payloadMax+1))
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if len(payload) > payloadMax {
		return fmt.Errorf("a payload of more than %d bytes", payloadMax)
	}
	socket, token := getenv(boundary.EnvSocket), getenv(boundary.EnvToken)
	if socket == "" || token == "" {
		return fmt.Errorf("%s and %s are not set: not under a pico host", boundary.EnvSocket, boundary.EnvToken)
	}
	req, err := json.Marshal(boundary.Request{Token: token, Provider: boundary.Provider(*provider), Payload: json.RawMessage(strings.TrimSpace(string(payload)))})
	if err != nil {
		return fmt.Errorf("the payload is not JSON: %w", err)
	}
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(conn, responseMax)).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("no answer from the host: %w", err)
	}
	var resp boundary.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("an answer that is not JSON: %w", err)
	}
	if !resp.OK {
		return errors.New(resp.Error)
	}
	return nil
}
