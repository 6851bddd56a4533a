package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/telemetry/scrape"
)

// scraped is one scrape of /metrics.
type scraped map[string]*dto.MetricFamily

// scrapeMetrics reads base/metrics.
func scrapeMetrics(ctx context.Context, base string) (scraped, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	return scraped(fams), err
}

// value sums the samples of family name whose labels include want
// ("k=v" pairs): a counter's or gauge's value, a histogram's count.
func (s scraped) value(name string, want ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func (s scraped) names() []string {
	var out []string
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// probe returns the status code of base+path.
func probe(ctx context.Context, base, path string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitProbe waits until base+path answers code.
func waitProbe(t *testing.T, ctx context.Context, base, path string, code int) {
	t.Helper()
	for {
		got, body := probe(ctx, base, path)
		if got == code {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s stayed %d (%s), want %d", path, got, strings.TrimSpace(body), code)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serveHost starts a meter provider and the endpoints for a host that
// New has yet to make; /readyz reads the host once set is called.
func serveHost(t *testing.T) (base string, opts streamrun.Options, set func(*streamrun.Host)) {
	t.Helper()
	mp, metrics, err := scrape.NewMeterProvider(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var host atomic.Pointer[streamrun.Host]
	srv, err := scrape.Listen(scrape.Options{Addr: ":0", Metrics: metrics, Ready: func() error {
		if h := host.Load(); h != nil {
			return h.Ready()
		}
		return errors.New("host not started")
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Errorf("listening on %s, not loopback", srv.Addr())
	}
	return "http://" + srv.Addr(), streamrun.Options{MeterProvider: mp}, func(h *streamrun.Host) { host.Store(h) }
}

// The counters on /metrics move by what the messages caused: N in, N
// acked with N outputs, the retries and dead letters the handler asked
// for; the histograms count the batches; /readyz answers 503 before the
// pipelines run, 200 once they consume.
func TestMetricsScrape(t *testing.T) {
	ctx := testContext(t)
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	base, opts, setHost := serveHost(t)
	if code, _ := probe(ctx, base, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the host: %d", code)
	}
	if code, _ := probe(ctx, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	p := pipelines.Pipeline{
		Name:    "counted",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "counted-sub", InitialPosition: pipelines.Earliest},
		Handler: selfHandler(out),
		Outputs: []string{out},
		ErrorPolicy: pipelines.ErrorPolicy{MaxRetries: 2,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}},
	}
	setHost(runHost(t, c, opts, p))
	waitProbe(t, ctx, base, "/readyz", http.StatusOK)

	const n = 10
	cl := client(t, c)
	var payloads []string
	for i := range n {
		payloads = append(payloads, fmt.Sprintf("ok-%d", i))
	}
	payloads = append(payloads, "poison", "poison", "retry")
	for _, pl := range payloads {
		if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte(pl)}); err != nil {
			t.Fatal(err)
		}
	}
	// "retry" comes three times: retried twice, then dead-lettered.
	const received, acked, retried, dead = n + 2 + 3, n, 2, 3
	pl := "streamrun_pipeline=counted"
	var s scraped
	for {
		var err error
		if s, err = scrapeMetrics(ctx, base); err != nil {
			t.Fatal(err)
		}
		// Settled, and the acknowledgements (sent in groups) reached the
		// broker, which reports the backlog gone.
		if s.value("streamrun_messages_settled_total", pl) >= acked+retried+dead &&
			s["streamrun_consumer_backlog"] != nil && s.value("streamrun_consumer_backlog", pl) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("messages never all settled: %v", s.names())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"messaging_client_consumed_messages_total", []string{pl}, received},
		{"streamrun_messages_processed_total", []string{pl}, received},
		{"streamrun_messages_settled_total", []string{pl, "streamrun_outcome=acked"}, acked},
		{"streamrun_messages_settled_total", []string{pl, "streamrun_outcome=retried"}, retried},
		{"streamrun_messages_settled_total", []string{pl, "streamrun_outcome=dead_lettered"}, dead},
		{"streamrun_messages_settled_total", []string{pl, "streamrun_outcome=dropped"}, 0},
		{"messaging_client_sent_messages_total", []string{pl, "messaging_destination_name=" + out}, acked},
		{"messaging_client_sent_messages_total", []string{pl}, acked + dead},
		{"streamrun_messages_in_flight", []string{pl}, 0},
		{"streamrun_handler_instances_up", []string{pl}, 1},
		{"streamrun_pipeline_healthy", []string{pl}, 1},
		{"streamrun_handler_crashes_total", []string{pl}, 0},
		{"streamrun_producer_pending_messages", nil, 0},
		{"streamrun_producer_pending_bytes", nil, 0},
		{"streamrun_broker_reconnects_total", nil, 0},
	} {
		if got := s.value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Every batch handed to the handler (none failed) is in the three
	// histograms.
	batches := s.value("streamrun_batch_size", pl)
	if batches < 3 || batches > received || s.value("messaging_process_duration_seconds", pl) != batches ||
		s.value("streamrun_batch_end_to_end_duration_seconds", pl) != batches {
		t.Errorf("batches: size histogram %v, duration histogram %v, end-to-end histogram %v", batches,
			s.value("messaging_process_duration_seconds", pl), s.value("streamrun_batch_end_to_end_duration_seconds", pl))
	}
	t.Logf("metrics: %v", s.names())
	if s["streamrun_consumer_backlog"] == nil || s["streamrun_consumer_permits"] == nil {
		t.Errorf("no backlog or permits")
	}
	if s.value("streamrun_broker_connections") < 1 {
		t.Errorf("no broker connection counted")
	}
}

// /readyz answers 503 while a handler keeps crashing, saying so, and the
// crash and restart counters move.
func TestReadyzCrashingHandler(t *testing.T) {
	ctx := testContext(t)
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	base, opts, setHost := serveHost(t)
	opts.Restart = streamrun.RestartPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, DegradedAfter: 3}
	// The crash message stays in flight: the stop hands it back then.
	opts.ShutdownTimeout = time.Second
	opts.Logger = testLogger(t, slog.LevelError+4) // the crash loop is the point
	p := pipelines.Pipeline{
		Name:        "crashy",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "crashy-sub", InitialPosition: pipelines.Earliest},
		Handler:     selfHandler(out),
		Outputs:     []string{out},
		ErrorPolicy: pipelines.ErrorPolicy{MaxCrashes: 1000},
	}
	setHost(runHost(t, c, opts, p))
	waitProbe(t, ctx, base, "/readyz", http.StatusOK)

	cl := client(t, c)
	if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte("crash")}); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, ctx, base, "/readyz", http.StatusServiceUnavailable)
	if _, body := probe(ctx, base, "/readyz"); !strings.Contains(body, "crashy") || !strings.Contains(body, "keeps crashing") {
		t.Errorf("/readyz says %q", body)
	}
	if code, _ := probe(ctx, base, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d while a handler crashes: the process itself is alive", code)
	}
	s, err := scrapeMetrics(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	pl := "streamrun_pipeline=crashy"
	if got := s.value("streamrun_handler_crashes_total", pl); got < 3 {
		t.Errorf("crashes %v, want at least 3", got)
	}
	if got := s.value("streamrun_pipeline_healthy", pl); got != 0 {
		t.Errorf("healthy %v while crashing", got)
	}
	if got := s.value("messaging_process_duration_seconds", pl, "error_type=crash"); got < 3 {
		t.Errorf("failed batches with error.type=crash: %v", got)
	}
}

// Every metric and label the Grafana dashboard uses is on /metrics of a
// host whose handler answered, dead-lettered and crashed.
func TestDashboardMetricsExist(t *testing.T) {
	ctx := testContext(t)
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	base, opts, setHost := serveHost(t)
	opts.Restart = streamrun.RestartPolicy{Initial: 10 * time.Millisecond}
	opts.Logger = testLogger(t, slog.LevelError+4) // the crash is the point
	p := pipelines.Pipeline{
		Name:        "dash",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "dash-sub", InitialPosition: pipelines.Earliest},
		Handler:     selfHandler(out),
		Outputs:     []string{out},
		ErrorPolicy: pipelines.ErrorPolicy{MaxCrashes: 1},
	}
	setHost(runHost(t, c, opts, p))
	waitProbe(t, ctx, base, "/readyz", http.StatusOK)
	cl := client(t, c)
	for _, pl := range []string{"ok", "poison", "crash"} {
		if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte(pl)}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		s, err := scrapeMetrics(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if s.value("streamrun_messages_settled_total", "streamrun_pipeline=dash") >= 3 && s["streamrun_consumer_backlog"] != nil &&
			s.value("streamrun_handler_restarts_total", "streamrun_pipeline=dash") >= 1 {
			checkDashboard(t, s)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never settled: %v", s.names())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkDashboard fails t for a metric or label the Grafana dashboard in
// examples/grafana uses that scrape s does not have: the dashboard is
// built on what the host serves, not on names remembered.
func checkDashboard(t *testing.T, s scraped) {
	t.Helper()
	b, err := os.ReadFile("../examples/grafana/streamrun.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	labels := map[string]bool{"le": true}
	for _, f := range s {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				labels[l.GetName()] = true
			}
		}
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	metricRef := regexp.MustCompile(`\b(?:messaging|streamrun)_[a-z0-9_]+\b`)
	labelRef := regexp.MustCompile(`(?:by \(([^)]*)\))|(?:[{,]\s*([a-z_]+)\s*(?:=~|!=|=))|(?:label_values\([^,]+,\s*([a-z_]+)\))`)
	used := 0
	for _, e := range exprs {
		if e == "" {
			continue
		}
		for _, name := range metricRef.FindAllString(e, -1) {
			if labels[name] {
				continue // a label, such as streamrun_pipeline
			}
			used++
			fam := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if s[fam] == nil && strings.HasSuffix(name, suffix) {
					fam = strings.TrimSuffix(name, suffix)
				}
			}
			if s[fam] == nil {
				t.Errorf("the dashboard uses %s (in %q), which /metrics does not serve", name, e)
			}
		}
		for _, m := range labelRef.FindAllStringSubmatch(e, -1) {
			for _, g := range m[1:] {
				for _, l := range strings.Split(g, ",") {
					if l = strings.TrimSpace(l); l != "" && !labels[l] {
						t.Errorf("the dashboard uses label %s (in %q), which no metric on /metrics has", l, e)
					}
				}
			}
		}
	}
	if used < 15 {
		t.Errorf("the dashboard uses only %d metrics: it did not parse as expected", used)
	}
}
