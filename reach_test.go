package streamrun

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
)

// A run whose broker cannot be reached says so while it lasts, at start
// and mid-run: its retries are warnings, /readyz answers 503 naming what
// waits (while /healthz stays 200: a restart would not bring the broker
// back), and the status lines are warnings saying so. Once the broker is
// back, it is ready again.
func TestARunThatCannotReachItsBrokerIsNotReadyAndSaysSo(t *testing.T) {
	brokerAddr, telemetryAddr := freeAddr(t), freeAddr(t)
	recs := &testkit.Records{}
	ctx := brokertest.Context(t, 2*time.Minute)
	o := Options{
		Pipelines: []pipelines.File{{
			OperationRetries: pipelines.OperationRetries{Delay: 100 * time.Millisecond},
			Pipelines: []pipelines.Pipeline{{
				Name:    "p",
				Source:  pipelines.Source{Topics: []string{brokertest.TopicName(t)}, Subscription: "s"},
				Handler: pipelines.Handler{Plugin: "/run/in/this/process"},
			}},
		}},
		ServiceURL:     "pulsar://" + brokerAddr,
		LocalHandlers:  map[string]func() plugin.Handler{"p": func() plugin.Handler { return plugin.HandlerFunc(ack) }},
		TelemetryAddr:  telemetryAddr,
		StatusInterval: 50 * time.Millisecond,
		Logger:         slog.New(recs.Handler(slog.NewTextHandler(testkit.LogWriter(t, "run"), nil))),
	}
	started := make(chan *Run, 1)
	go func() {
		r, err := Start(ctx, o)
		if err != nil {
			t.Errorf("Start: %v", err)
		}
		started <- r
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + telemetryAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	const want = "the broker cannot be reached: "
	saying := func() int { return recs.Count("status", "broker="+want) }
	// unreachable waits for the run to say the broker cannot be reached:
	// /readyz, and a status line more than the n before.
	unreachable := func(when string, n int) {
		t.Helper()
		brokertest.Eventually(t, time.Minute, "/readyz to answer 503 "+when, func() bool {
			code, body := get("/readyz")
			return code == http.StatusServiceUnavailable && strings.HasPrefix(body, want)
		})
		if code, _ := get("/healthz"); code != http.StatusOK {
			t.Errorf("/healthz %s: %d, want 200", when, code)
		}
		brokertest.Eventually(t, time.Minute, "a status line saying so "+when, func() bool { return saying() > n })
		if r, _ := recs.Find(func(r testkit.Record) bool { return r.Msg == "status" && r.Attrs["broker"] != "" }); r.Level != slog.LevelWarn {
			t.Errorf("the status line %v %s is at %v, want WARN", r, when, r.Level)
		}
	}

	// At start: nothing to connect to.
	unreachable("at start", 0)
	if r, ok := recs.Find(func(r testkit.Record) bool { return r.Msg == "retrying" }); !ok || r.Level != slog.LevelWarn ||
		!strings.Contains(r.Attrs["op"], "connect to pulsar://"+brokerAddr) {
		t.Errorf("the retry record %v, want a warning naming the connect", r)
	}
	c := brokertest.Start(t, func(bo *broker.Options) { bo.Listen = brokerAddr })
	r := <-started
	if r == nil {
		t.FailNow()
	}
	defer func() {
		r.Stop()
		if err := r.Wait(); err != nil {
			t.Errorf("Wait: %v", err)
		}
	}()
	brokertest.Eventually(t, time.Minute, "/readyz to answer 200 once the broker is up", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })

	// Mid-run: the broker goes away, then comes back.
	n := saying()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	unreachable("mid-run", n)
	brokertest.Start(t, func(bo *broker.Options) { bo.Listen = brokerAddr })
	brokertest.Eventually(t, time.Minute, "/readyz to answer 200 once the broker is back", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	n = saying()
	lines := recs.Count("status", "pipeline=p")
	brokertest.Eventually(t, time.Minute, "status lines without the broker", func() bool { return recs.Count("status", "pipeline=p") > lines+2 })
	if saying() > n+1 { // one may have been under way
		t.Errorf("status lines still say the broker cannot be reached once it is back")
	}
}

func ack(context.Context, plugin.ResultWriter, []*plugin.Message) error { return nil }

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
