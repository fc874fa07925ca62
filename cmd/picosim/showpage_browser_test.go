package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The page's script is tested where it runs, in a browser: Debian's
// Chromium, headless, driven through chromedriver's W3C WebDriver HTTP API
// with nothing but net/http.
const (
	chromiumPath     = "/usr/bin/chromium"
	chromedriverPath = "/usr/bin/chromedriver"
	// chromedriverStartMax bounds the wait for a chromedriver just started
	// to say it listens.
	chromedriverStartMax = 20 * time.Second
	// webDriverCallTimeout bounds one WebDriver call, a new session
	// (Chromium starting) the slowest of them.
	webDriverCallTimeout = 60 * time.Second
	// webDriverElementKey is the W3C name of an element reference.
	webDriverElementKey = "element-6066-11e4-a52e-4f735466cecf"
)

// The page in a browser: it opens on the failure, selected, its record in
// #details, scrolled into view beside the lane names; the lanes and marks
// are there; a click on a commit's mark shows that commit's writes, and a
// click on a host action whose text is markup shows the text as text and
// runs none of it.
func TestShowPageInChromium(t *testing.T) {
	needChromium(t)
	start := time.Now()
	lines := traceWith(t, append(hostile, failedCheck)...)
	html, err := showPage(lines, showOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(path, html, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startChromium(t)
	d.call("POST", d.in("/url"), map[string]string{"url": "file://" + path})

	var opened struct {
		Lanes    []string `json:"lanes"`
		Marks    int      `json:"marks"`
		Selected string   `json:"selected"`
		InView   bool     `json:"inView"`
		Details  string   `json:"details"`
	}
	d.script(&opened, `
		const chart = document.getElementById("chart").getBoundingClientRect();
		const names = document.querySelector(".lane .name").getBoundingClientRect();
		const failure = document.querySelector(".mark.failure");
		const f = failure.getBoundingClientRect();
		const selected = document.querySelector(".mark.selected");
		return {
			lanes: Array.from(document.querySelectorAll(".lane"), (l) => l.dataset.actor),
			marks: document.querySelectorAll(".lane .mark").length,
			selected: selected === failure ? failure.dataset.line : String(selected && selected.dataset.line),
			inView: f.left >= names.right && f.right <= chart.right && f.top >= chart.top && f.bottom <= chart.bottom,
			details: document.getElementById("details").innerText,
		};`)
	tl, err := readTimeline(lines)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]string{schedulerLane}, tl.actors...); !slices.Equal(opened.Lanes, want) || opened.Marks != len(lines) {
		t.Errorf("the page shows lanes %q and %d marks; want lanes %q and %d marks", opened.Lanes, opened.Marks, want, len(lines))
	}
	if opened.Selected != "141" || !opened.InView || !strings.Contains(opened.Details, "the check that failed\nthe watch fold differs from a fresh capture") {
		t.Errorf("on opening, the selected mark is line %s (in view: %v), #details says %q; want the failing check's, line 141, in view, and its message",
			opened.Selected, opened.InView, opened.Details)
	}

	commit := d.find(`.lane[data-actor="main"] .mark[data-step="8"][data-kind="commit"]`)
	d.click(commit)
	details := d.text(d.find("#details"))
	for _, want := range []string{"commit 3–7: list.append, entry user, list.remove, value.set, task generation", "line 16 · step 8 · main",
		"write 1 of 5: list.append", "write 2 of 5: entry user", `"content": "explain everything"`, "write 5 of 5: task generation", `"kind": "generation"`} {
		if !strings.Contains(details, want) {
			t.Errorf("after a click on the commit at step 8, #details says\n%s\nwithout %q", details, want)
		}
	}
	var selected bool
	d.script(&selected, `return document.querySelector(".mark.selected") === arguments[0]`, map[string]string{webDriverElementKey: commit})
	if !selected {
		t.Error("the clicked commit is not the selected mark")
	}

	d.click(d.find(`.mark[data-kind="host"][data-line="38"]`))
	details = d.text(d.find("#details"))
	var ran struct {
		Pwned   string `json:"pwned"`
		Scripts int    `json:"scripts"`
		Bold    int    `json:"bold"`
	}
	d.script(&ran, `return {pwned: typeof window.pwned, scripts: document.scripts.length, bold: document.querySelectorAll("b, i").length}`)
	if !strings.Contains(details, "host #9: "+hostileAction) || ran.Pwned != "undefined" || ran.Scripts != 2 || ran.Bold != 0 {
		t.Errorf("after a click on the hostile host action: #details says %q, window.pwned is %s, %d scripts, %d <b> or <i>; want its text as text and nothing of it run",
			details, ran.Pwned, ran.Scripts, ran.Bold)
	}
	t.Logf("Chromium opened the page and took two clicks in %s", time.Since(start).Round(time.Millisecond))
}

// needChromium makes sure Debian's chromium and chromium-driver are
// installed: when one is missing and the test runs as root where apt-get
// is, it installs them (updating the package lists once if the install
// fails); when they cannot be had it skips the test, saying why.
func needChromium(t *testing.T) {
	t.Helper()
	missing := func() []string {
		var m []string
		for _, p := range []string{chromiumPath, chromedriverPath} {
			if _, err := os.Stat(p); err != nil {
				m = append(m, p)
			}
		}
		return m
	}
	if len(missing()) == 0 {
		return
	}
	const how = "apt-get install chromium chromium-driver"
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		t.Skipf("%s missing; this test installs them only as root where apt-get is: %s", strings.Join(missing(), " and "), how)
	}
	apt := func(args ...string) ([]byte, error) {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	install := []string{"install", "-y", "--no-install-recommends", "chromium", "chromium-driver"}
	out, err := apt(install...)
	if err != nil {
		if out, err = apt("update"); err == nil {
			out, err = apt(install...)
		}
	}
	if m := missing(); len(m) > 0 {
		tail := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Skipf("%s missing and %s failed (%v): %s", strings.Join(m, " and "), how, err, strings.Join(tail[max(0, len(tail)-5):], "\n"))
	}
}

// webDriver is one chromedriver session: the few WebDriver calls the test
// makes.
type webDriver struct {
	t       *testing.T
	base    string // chromedriver's address, http://127.0.0.1:PORT
	session string
	client  http.Client
}

// startChromium starts chromedriver on a free port and a headless
// Chromium session through it; cleanup ends both.
func startChromium(t *testing.T) *webDriver {
	t.Helper()
	profile := t.TempDir() // removed after the browser is gone: cleanups run last first
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	driver := exec.Command(chromedriverPath, "--port="+strconv.Itoa(port))
	out, err := driver.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	driver.Stderr = driver.Stdout
	if err := driver.Start(); err != nil {
		t.Fatalf("starting %s: %v", chromedriverPath, err)
	}
	t.Cleanup(func() {
		driver.Process.Kill()
		driver.Wait()
	})
	// chromedriver says when it listens; wait for that line (or its exit),
	// not for a poll to succeed.
	var log strings.Builder
	listening, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said {
				log.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "started successfully") {
					said = true
					close(listening)
				}
			}
		}
	}()
	select {
	case <-listening:
	case <-ended:
		t.Fatalf("chromedriver exited before it listened:\n%s", log.String())
	case <-time.After(chromedriverStartMax):
		t.Fatalf("chromedriver did not say it listens on port %d within %s", port, chromedriverStartMax)
	}
	d := &webDriver{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port), client: http.Client{Timeout: webDriverCallTimeout}}
	if !d.ready() {
		t.Fatalf("chromedriver listens on port %d but is not ready to start a session", port)
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,800", "--user-data-dir=" + profile}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	value, status, err := d.try("POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":        "chrome",
		"goog:chromeOptions": map[string]any{"binary": chromiumPath, "args": args},
	}}})
	if err != nil || status != http.StatusOK {
		// Nothing of ours has run yet: a browser that cannot start is the
		// machine's (no display libraries, no shared memory, a sandbox).
		t.Skipf("Chromium is installed but cannot start a session here (%d %v): %s", status, err, value)
	}
	d.decode(&s, value)
	d.session = s.SessionID
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", d.base+d.in(""), nil)
		if resp, err := d.client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return d
}

// ready reports whether chromedriver answers that it can start a session.
func (d *webDriver) ready() bool {
	resp, err := d.client.Get(d.base + "/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var s struct {
		Value struct {
			Ready bool `json:"ready"`
		} `json:"value"`
	}
	return json.NewDecoder(resp.Body).Decode(&s) == nil && s.Value.Ready
}

// in is the path of a command of the session.
func (d *webDriver) in(path string) string { return "/session/" + d.session + path }

// call makes one WebDriver call and returns its value; a refused one
// fails the test with chromedriver's words.
func (d *webDriver) call(method, path string, body any) json.RawMessage {
	d.t.Helper()
	var data io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		data = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.base+path, data)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("webdriver %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	var v struct {
		Value json.RawMessage `json:"value"`
	}
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(answer, &v) != nil {
		d.t.Fatalf("webdriver %s %s: %s %s %v", method, path, resp.Status, answer, err)
	}
	return v.Value
}

// try is call for a request whose failure the caller judges: the answer's
// value (or its body when it has none), the HTTP status and a transport
// error.
func (d *webDriver) try(method, path string, body any) (json.RawMessage, int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	var v struct {
		Value json.RawMessage `json:"value"`
	}
	if err == nil && json.Unmarshal(answer, &v) == nil && v.Value != nil {
		return v.Value, resp.StatusCode, nil
	}
	return answer, resp.StatusCode, err
}

func (d *webDriver) decode(into any, value json.RawMessage) {
	d.t.Helper()
	if err := json.Unmarshal(value, into); err != nil {
		d.t.Fatalf("webdriver answered %s: %v", value, err)
	}
}

// find is the element the CSS selector finds first.
func (d *webDriver) find(css string) string {
	d.t.Helper()
	var el map[string]string
	d.decode(&el, d.call("POST", d.in("/element"), map[string]string{"using": "css selector", "value": css}))
	return el[webDriverElementKey]
}

// click scrolls an element to the middle of the page's view, as a reader
// would, and clicks it as a person does: chromedriver refuses if
// something else would take the click. (Its own scrolling would put the
// element at the chart's very edge, which the page's scroll-padding keeps
// clear for a reader but chromedriver does not heed, under the sticky
// lane names.)
func (d *webDriver) click(element string) {
	d.t.Helper()
	var none any
	d.script(&none, `arguments[0].scrollIntoView({block: "center", inline: "center"})`, map[string]string{webDriverElementKey: element})
	d.call("POST", d.in("/element/"+element+"/click"), struct{}{})
}

// text is an element's text as rendered.
func (d *webDriver) text(element string) string {
	d.t.Helper()
	var s string
	d.decode(&s, d.call("GET", d.in("/element/"+element+"/text"), nil))
	return s
}

// script runs a script's body in the page and decodes what it returns.
func (d *webDriver) script(into any, body string, args ...any) {
	d.t.Helper()
	d.decode(into, d.call("POST", d.in("/execute/sync"), map[string]any{"script": body, "args": append([]any{}, args...)}))
}
