package consoletest

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/control"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

var screenshot = flag.String("screenshot", "", "write a picture of the console, taken mid-run, to this PNG file")

// chromium is the browser's binary, or "" when there is none.
func chromium() string {
	if p := os.Getenv("STREAMRUN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium-headless-shell", "chromium", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	for _, p := range []string{"/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/headless_shell"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

const file = `# The console's browser test: orders are uppercased, then audited.
pipelines:
  - name: shout
    source: {topics: [%[1]s], subscription: shout, initial_position: earliest}
    handler:
      plugin: %[2]s
      config: {output: %[1]s-loud}
      instances: 2
    outputs: [%[1]s-loud]
    tap: true
  - name: audit
    source: {topics: [%[1]s-loud], subscription: audit, initial_position: earliest}
    handler:
      plugin: %[2]s
      config: {output: %[1]s-audited}
    outputs: [%[1]s-audited]
`

// In a real browser, against a running host: the page loads with no
// console error, the graph shows the file's pipelines and topics, the
// rates move while messages flow, Pause on the page stops the flow and
// Resume restarts it, and the tap shows a message just produced.
func TestTheConsoleInABrowser(t *testing.T) {
	browser := chromium()
	if browser == "" {
		t.Skip("no Chromium: install Debian's chromium-headless-shell, or set STREAMRUN_CHROMIUM to a Chromium binary")
	}
	ctx := brokertest.Context(t, 3*time.Minute)
	peer := brokertest.Target(t)
	// The uppercase example plugin, built from the main module.
	plugins := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", plugins+string(filepath.Separator), "./examples/plugins/uppercase")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the uppercase plugin: %v\n%s", err, out)
	}
	// A short topic name keeps the picture readable; the suffix keeps runs
	// apart on a shared Apache Pulsar.
	name := brokertest.TopicName(t)
	topic := "orders-" + name[len(name)-8:]
	path := filepath.Join(t.TempDir(), "pipelines.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, file, topic, filepath.Join(plugins, "uppercase")), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "run"), nil))
	run, err := streamrun.Start(ctx, streamrun.Options{Files: []string{path}, ServiceURL: peer.URL, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run.Stop()
		if err := run.Wait(); err != nil {
			t.Errorf("the run ended with %v", err)
		}
	})
	brokertest.Eventually(t, time.Minute, "the pipelines to run", func() bool { return run.Host().Ready() == nil })
	srv, err := control.Serve(run, control.Options{Addr: "127.0.0.1:0", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.CloseQuietly)

	// Messages flow until the test ends.
	var sent atomic.Int64
	flowCtx, stopFlow := context.WithCancel(ctx)
	var flowing sync.WaitGroup
	flowing.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-flowCtx.Done():
				return
			case <-tick.C:
			}
			run.Publish(flowCtx, topic, pool.Message{Payload: fmt.Appendf(nil, "order %d", i)}, func(_ pulsarwire.MessageID, err error) {
				if err == nil {
					sent.Add(1)
				}
			})
		}
	})
	t.Cleanup(func() { stopFlow(); flowing.Wait() })

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1366, 900), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	var mu sync.Mutex
	var problems []string
	err = chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			problems = append(problems, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError || e.Type == cdpruntime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// eval is the value of a JavaScript expression on the page.
	eval := func(what, js string) any {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	do("open the console", chromedp.Navigate(srv.URL()))
	// until waits for the page to say what cond wants, as JavaScript.
	until := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if eval(what, js) == true {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waited a minute for %s (status: %v)", what, eval("status", `document.getElementById("status").textContent`))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cell := func(pipeline, field string) string {
		return fmt.Sprintf(`(document.querySelector('#pipelines tr[data-pipeline=%q] td[data-field=%q]')||{}).textContent`, pipeline, field)
	}
	state := func(pipeline string) string {
		return fmt.Sprintf(`((document.querySelector('#pipelines tr[data-pipeline=%q] .state')||{}).textContent||"")`, pipeline)
	}

	// The graph: both pipelines, and the three topics between them.
	until("the graph", `document.querySelectorAll('#graph g.pipe').length === 2 && document.querySelectorAll('#graph g.topic').length === 3`)
	for _, want := range []string{`#graph g.pipe[data-pipeline="shout"]`, `#graph g.pipe[data-pipeline="audit"]`,
		fmt.Sprintf(`#graph g.topic[data-topic=%q]`, "persistent://public/default/"+topic+"-loud")} {
		if n := eval("look for "+want, fmt.Sprintf(`document.querySelectorAll(%q).length`, want)); n != float64(1) {
			t.Errorf("the graph has %d of %s", n, want)
		}
	}

	// The rates move: the acked rate above 0 and the total growing.
	until("a rate above 0", "parseFloat("+cell("shout", "acked-rate")+") > 0")
	before := eval("read acked", "parseInt("+cell("shout", "acked")+")")
	until("the acked total to grow", fmt.Sprintf("parseInt(%s) > %v", cell("shout", "acked"), before))

	// Pause from the page: the state says so, and the pipeline receives
	// nothing more while messages are published.
	do("pause", chromedp.Click(chromedp.CSS(`button[data-action="pause"][data-pipeline="shout"]`)))
	until("paused", state("shout")+`.includes("paused")`)
	received := func() int64 {
		for _, st := range run.Host().Stats() {
			if st.Pipeline == "shout" {
				return st.Received
			}
		}
		return -1
	}
	r0, s0 := received(), sent.Load()
	brokertest.Eventually(t, time.Minute, "100 more published while paused", func() bool { return sent.Load() > s0+100 })
	if r := received(); r != r0 {
		t.Errorf("paused from the page, the pipeline received %d more", r-r0)
	}
	until("the acked rate at 0", "parseFloat("+cell("shout", "acked-rate")+") === 0")

	// Resume from the page: it takes up the flow again.
	do("resume", chromedp.Click(chromedp.CSS(`button[data-action="resume"][data-pipeline="shout"]`)))
	until("healthy again", state("shout")+`.includes("healthy")`)
	brokertest.Eventually(t, time.Minute, "the messages published while paused received", func() bool { return received() > r0+100 })
	until("a rate above 0 again", "parseFloat("+cell("shout", "acked-rate")+") > 0")

	// The tap shows a message just produced, on its way in and out.
	do("select shout", chromedp.Click(chromedp.CSS(`#pipelines tr[data-pipeline="shout"] a`)))
	do("start the tap", chromedp.Click(chromedp.ID("tap-toggle")))
	until("the tap to open", `document.querySelector('#tap-toggle').textContent === "Stop tap"`)
	stamp := "tapped " + strconv.FormatInt(time.Now().UnixNano(), 36)
	// The tap samples 5 a second out of 200: publish the marked message
	// until it is seen.
	deadline := time.Now().Add(time.Minute)
	for seen := false; !seen; {
		run.Publish(ctx, topic, pool.Message{Payload: []byte(stamp)}, nil)
		time.Sleep(300 * time.Millisecond)
		seen = eval("read the tap", fmt.Sprintf(
			`[...document.querySelectorAll('#tap td[data-field="payload"]')].some(td => td.textContent.toLowerCase().includes(%q))`, stamp)) == true
		if !seen && time.Now().After(deadline) {
			t.Fatal("the tap did not show the marked message within a minute")
		}
	}

	// The reload's dry run from the page.
	do("dry run", chromedp.Click(chromedp.ID("dry-run")))
	until("the plan", `document.querySelectorAll('#plan tr[data-pipeline]').length === 2`)

	if *screenshot != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("take the picture: %v", err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("the page said: %s", p)
	}
}
