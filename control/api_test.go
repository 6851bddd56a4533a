package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/control"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// The API lists the pipelines of the file with their state, instances
// (real plugin processes) and counts; a pause through it is written to
// the file and stops the flow while the subscription stays (messages
// published meanwhile wait at the broker), a resume brings every one of
// them out; nothing is lost or output twice.
func TestPauseAndResumeThroughTheAPI(t *testing.T) {
	h := startHost(t, control.Options{})
	ps := h.pipelines()
	if len(ps) != 2 {
		t.Fatalf("pipelines: %v, want up and other", ps)
	}
	up := ps["up"]
	if up.File != h.file || up.State != "healthy" || !up.Tap || ps["other"].Tap || len(up.Instances) != 2 {
		t.Fatalf("up: %+v", up)
	}
	for _, i := range up.Instances {
		if !i.Up || i.Pid <= 0 {
			t.Errorf("instance %+v: want up with a pid", i)
		}
	}
	if !slices.Equal(up.Inputs, []string{h.in}) || !slices.Equal(up.Outputs, []string{h.out}) {
		t.Errorf("up's topics: %v -> %v", up.Inputs, up.Outputs)
	}
	if bs := up.Config["handler"].(map[string]any)["batch_wait"]; bs != "10ms" {
		t.Errorf("config handler.batch_wait: %v, want 10ms as in a file", bs)
	}

	outs := h.readOutputs()
	h.publish("a", 200)
	brokertest.Eventually(t, time.Minute, "200 outputs", func() bool { n, _ := outs.count("A-"); return n == 200 })
	brokertest.Eventually(t, time.Minute, "a rate and the counts", func() bool {
		p := h.pipelines()["up"]
		return p.Counts.Acked == 200 && p.Backlog != nil
	})

	var paused pipeline
	h.want(http.StatusOK, "POST", "/pipelines/up/pause", nil, &paused)
	if paused.State != "paused" || !paused.Paused {
		t.Fatalf("after pause: %+v", paused)
	}
	if b, _ := os.ReadFile(h.file); !strings.Contains(string(b), "\n    paused: true\n") || !strings.HasPrefix(string(b), "# the control API's test file") {
		t.Fatalf("the file after pause:\n%s", b)
	}
	pids := func(p pipeline) []int {
		var out []int
		for _, i := range p.Instances {
			out = append(out, i.Pid)
		}
		return out
	}
	before := h.run.Host().Stats()[1] // by name: other, up
	h.publish("b", 100)
	// The messages wait at the broker: the backlog shows them, and the
	// pipeline receives none.
	brokertest.Eventually(t, time.Minute, "the backlog to show the messages published while paused", func() bool {
		p := h.pipelines()["up"]
		return p.Backlog != nil && *p.Backlog > 0
	})
	after := h.pipelines()["up"]
	if after.Counts.Received != before.Received {
		t.Fatalf("paused, the pipeline received %d more", after.Counts.Received-before.Received)
	}
	if n, _ := outs.count("B-"); n != 0 {
		t.Fatalf("paused, %d outputs came out", n)
	}
	if !slices.Equal(pids(after), pids(up)) {
		t.Errorf("the instances changed with the pause: %v, then %v", pids(up), pids(after))
	}

	var resumed pipeline
	h.want(http.StatusOK, "POST", "/pipelines/up/resume", nil, &resumed)
	if resumed.State != "healthy" || resumed.Paused {
		t.Fatalf("after resume: %+v", resumed)
	}
	brokertest.Eventually(t, time.Minute, "the 100 published while paused", func() bool { n, _ := outs.count("B-"); return n == 100 })
	h.publish("c", 100)
	brokertest.Eventually(t, time.Minute, "100 more", func() bool { n, _ := outs.count("C-"); return n == 100 })
	for _, prefix := range []string{"A-", "B-", "C-"} {
		if _, twice := outs.count(prefix); twice {
			t.Errorf("an output %s... came twice", prefix)
		}
	}
	if b, _ := os.ReadFile(h.file); !strings.Contains(string(b), "\n    paused: false\n") {
		t.Fatalf("the file after resume:\n%s", b)
	}
	if p := h.pipelines()["up"]; p.Counts.Acked != 400 {
		t.Errorf("acked: %d, want 400", p.Counts.Acked)
	}
}

// A dry run says what a new version of the file would change, by
// pipeline and change class, and changes nothing; applying it writes the
// file and reloads as SIGHUP does, with the flow going on: every message
// published before and after is output once.
func TestDryRunAndApplyThroughTheAPI(t *testing.T) {
	h := startHost(t, control.Options{})
	outs := h.readOutputs()
	h.publish("a", 200)
	orig, _ := os.ReadFile(h.file)

	next := strings.Replace(string(orig), "      instances: 2\n", "      instances: 2\n      batch_size: 7\n", 1) +
		fmt.Sprintf("  - name: added\n    source: {topics: [%s-added], subscription: added, initial_position: earliest}\n"+
			"    steps: [{dead_letter_if: 'size(payload) > 0', reason: '\"not wanted\"'}]\n    outputs: [%s-added-out]\n", h.in, h.in)
	next = strings.Replace(next, "subscription: other", "subscription: other2", 1)
	var plan struct {
		File      string
		Applied   bool
		Pipelines []struct {
			Pipeline, Action string
			Effects          []string
			Fields           []struct{ Path, Reload string }
		}
		Restart []struct{ Path string }
	}
	h.want(http.StatusOK, "POST", "/reload/dry-run", map[string]any{"content": next}, &plan)
	got := map[string]string{}
	for _, p := range plan.Pipelines {
		var fs []string
		for _, f := range p.Fields {
			fs = append(fs, f.Path+"="+f.Reload)
		}
		got[p.Pipeline] = p.Action + " " + strings.Join(p.Effects, ",") + " " + strings.Join(fs, ",")
	}
	want := map[string]string{
		"up":    "changed flow handler.batch_size=flow",
		"other": "changed source source.subscription=source",
		"added": "added  ",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dry run of %s: %q, want %q", k, got[k], v)
		}
	}
	if plan.Applied || plan.File != h.file || len(plan.Restart) != 0 {
		t.Errorf("dry run: %+v", plan)
	}
	if b, _ := os.ReadFile(h.file); string(b) != string(orig) {
		t.Fatal("a dry run changed the file")
	}
	if p := h.pipelines(); len(p) != 2 {
		t.Fatalf("a dry run changed the pipelines: %v", p)
	}

	h.want(http.StatusOK, "POST", "/reload", map[string]any{"file": h.file, "content": next}, &plan)
	if !plan.Applied {
		t.Errorf("apply: %+v", plan)
	}
	if b, _ := os.ReadFile(h.file); string(b) != next {
		t.Fatalf("the file after apply:\n%s", b)
	}
	ps := h.pipelines()
	if _, ok := ps["added"]; !ok || len(ps) != 3 {
		t.Fatalf("after apply: %v", ps)
	}
	if bs := ps["up"].Config["handler"].(map[string]any)["batch_size"]; bs != float64(7) {
		t.Errorf("up's batch_size after apply: %v", bs)
	}
	h.publish("b", 200)
	brokertest.Eventually(t, time.Minute, "every output", func() bool {
		a, _ := outs.count("A-")
		b, _ := outs.count("B-")
		return a == 200 && b == 200
	})
	for _, prefix := range []string{"A-", "B-"} {
		if _, twice := outs.count(prefix); twice {
			t.Errorf("an output %s... came twice", prefix)
		}
	}

	// The new pipeline dead-letters what it takes, and the API says why.
	for i := range 5 {
		h.run.Publish(h.ctx, h.in+"-added", pool.Message{Payload: fmt.Appendf(nil, "x%d", i)}, nil)
	}
	var added struct {
		DeadLetterReasons []struct {
			Reason string
			Count  int64
		} `json:"dead_letter_reasons"`
	}
	brokertest.Eventually(t, time.Minute, "5 dead letters with their reason", func() bool {
		h.want(http.StatusOK, "GET", "/pipelines/added", nil, &added)
		r := added.DeadLetterReasons
		return len(r) == 1 && r[0].Reason == "not wanted" && r[0].Count == 5
	})
}

// Every refusal has its status and says why, and leaves the file and the
// pipelines as they were.
func TestTheAPIRefusesBadRequests(t *testing.T) {
	h := startHost(t, control.Options{})
	orig, _ := os.ReadFile(h.file)
	check := func(status int, method, path string, body any, says string) {
		t.Helper()
		var e struct {
			Error    string
			Problems []string
		}
		h.want(status, method, path, body, &e)
		if !strings.Contains(e.Error+strings.Join(e.Problems, "\n"), says) {
			t.Errorf("%s %s: %q %q, want it to say %q", method, path, e.Error, e.Problems, says)
		}
	}
	check(http.StatusNotFound, "GET", "/pipelines/nope", nil, `no pipeline named "nope"`)
	check(http.StatusNotFound, "POST", "/pipelines/nope/pause", nil, `no pipeline named "nope"`)
	check(http.StatusNotFound, "GET", "/nothing/here", nil, "no route GET /api/v1/nothing/here")
	check(http.StatusBadRequest, "POST", "/reload/dry-run", `{"content": `, "malformed JSON")
	check(http.StatusBadRequest, "POST", "/reload", `{"content": "x", "extra": 1}`, `unknown field "extra"`)
	check(http.StatusBadRequest, "POST", "/reload", `{}`, "content: missing")
	check(http.StatusBadRequest, "POST", "/reload/dry-run", ``, "empty body")
	check(http.StatusNotFound, "POST", "/reload", map[string]any{"file": "/etc/passwd", "content": "x"}, "not one of the run's files")
	check(http.StatusBadRequest, "GET", "/pipelines/up/tap?rate=fast", nil, `rate: "fast"`)
	check(http.StatusForbidden, "GET", "/pipelines/other/tap", nil, "does not allow a tap")

	// A file that does not load: validate's FILE:LINE:COL errors.
	bad := strings.Replace(string(orig), "instances: 2", "instances: two", 1)
	for _, path := range []string{"/reload/dry-run", "/reload"} {
		check(http.StatusUnprocessableEntity, "POST", path, map[string]any{"content": bad}, h.file+":8:18: pipelines[0].handler.instances")
	}
	// A setting that takes a restart.
	check(http.StatusConflict, "POST", "/reload", map[string]any{"content": "service_url: pulsar://elsewhere:6650\n" + string(orig)},
		"service_url changed")
	// A handler that does not exist is refused by the dry run already.
	missing := strings.Replace(string(orig), "uppercase\n      config: {output: "+h.out, "nothing-here\n      config: {output: "+h.out, 1)
	check(http.StatusUnprocessableEntity, "POST", "/reload/dry-run", map[string]any{"content": missing}, "nothing-here")

	// A file that cannot be written.
	if err := os.Chmod(h.file, 0o444); err != nil {
		t.Fatal(err)
	}
	check(http.StatusForbidden, "POST", "/pipelines/up/pause", nil, "cannot be written")
	check(http.StatusForbidden, "POST", "/reload", map[string]any{"content": string(orig) + "# more\n"}, "cannot be written")
	var files struct{ Files []struct{ Writable bool } }
	h.want(http.StatusOK, "GET", "/files", nil, &files)
	if len(files.Files) != 1 || files.Files[0].Writable {
		t.Errorf("files: %+v, want one, not writable", files)
	}

	if b, _ := os.ReadFile(h.file); string(b) != string(orig) {
		t.Fatalf("a refusal changed the file:\n%s", b)
	}
	for name, p := range h.pipelines() {
		if p.State != "healthy" {
			t.Errorf("%s after the refusals: %s", name, p.State)
		}
	}
	// The description of the API is served.
	if code, b := h.do("GET", "/openapi.yaml", nil); code != http.StatusOK || !strings.HasPrefix(string(b), "openapi: 3") {
		t.Errorf("GET /openapi.yaml: %d %.40s", code, b)
	}
	// The wrong method.
	if code, _ := h.do("DELETE", "/pipelines/up", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE /pipelines/up: %d, want 405", code)
	}
}

// read_only refuses every change, with 403, and keeps the looking.
func TestAReadOnlyAPIRefusesChanges(t *testing.T) {
	h := startHost(t, control.Options{ReadOnly: true})
	orig, _ := os.ReadFile(h.file)
	for _, path := range []string{"/pipelines/up/pause", "/pipelines/up/resume"} {
		h.want(http.StatusForbidden, "POST", path, nil, nil)
	}
	h.want(http.StatusForbidden, "POST", "/reload", map[string]any{"content": string(orig)}, nil)
	h.want(http.StatusOK, "POST", "/reload/dry-run", map[string]any{"content": string(orig)}, nil)
	h.want(http.StatusOK, "GET", "/pipelines", nil, nil)
	if b, _ := os.ReadFile(h.file); string(b) != string(orig) {
		t.Fatal("the file changed")
	}
}

// The tap streams what the pipeline takes in and puts out, with the
// trace id the message travels in, payloads truncated.
func TestTheTapShowsAMessageJustProduced(t *testing.T) {
	h := startHost(t, control.Options{TapMaxPayload: 16})
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/pipelines/up/tap?rate=50", nil)
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("tap: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan map[string]any, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e map[string]any
			if json.Unmarshal([]byte(data), &e) == nil {
				events <- e
			}
		}
	}()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	payload := "tapped-" + strings.Repeat("x", 40)
	h.run.Publish(h.ctx, h.in, pool.Message{Payload: []byte(payload),
		Properties: map[string]string{msgtrace.PropertyTraceParent: "00-" + traceID + "-00f067aa0ba902b7-01"}}, nil)
	seen := map[string]map[string]any{}
	deadline := time.After(time.Minute)
	for len(seen) < 2 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended; seen %v", seen)
			}
			seen[e["kind"].(string)] = e
		case <-deadline:
			t.Fatalf("no input and output event within a minute; seen %v", seen)
		}
	}
	in, out := seen["input"], seen["output"]
	if in["payload"] != payload[:16] || in["truncated"] != true || in["size"] != float64(len(payload)) ||
		in["trace_id"] != traceID || in["outcome"] != "acked" || in["message_id"] == "" {
		t.Errorf("input event: %v", in)
	}
	if out["payload"] != strings.ToUpper(payload[:16]) || out["trace_id"] != traceID || out["topic"] != h.out {
		t.Errorf("output event: %v", out)
	}
}
