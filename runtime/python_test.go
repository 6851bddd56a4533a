package runtime_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// pythonSDKEnv names a Python interpreter that has the Python handler SDK
// (sdk/python) installed; scripts/python-sdk-env makes one and prints its
// path. The tests that run Python handlers skip without it.
const pythonSDKEnv = "STREAMRUN_PYTHON_SDK"

// pythonSDK is the interpreter of pythonSDKEnv, or skips t.
func pythonSDK(t testing.TB) string {
	t.Helper()
	py := os.Getenv(pythonSDKEnv)
	if py == "" {
		t.Skipf("%s is not set: these tests run Python handlers and need a Python with sdk/python installed "+
			"(%s=$(scripts/python-sdk-env))", pythonSDKEnv, pythonSDKEnv)
	}
	return py
}

// pythonScript is the handler config of a pipeline whose handler is the
// Python script at path (from the repository's root), run by the
// interpreter of pythonSDKEnv: named by its virtual environment's
// directory when it is a venv's bin/python, as a pipeline file would.
func pythonScript(t testing.TB, path string, config map[string]any) pipelines.Handler {
	py := pythonSDK(t)
	if venv := filepath.Dir(filepath.Dir(py)); filepath.Base(filepath.Dir(py)) == "bin" {
		if _, err := os.Stat(filepath.Join(venv, "pyvenv.cfg")); err == nil {
			py = venv
		}
	}
	return pipelines.Handler{Script: filepath.Join("..", path), Python: py, Config: config}
}

// pythonHandler is self's twin: the Python test handler
// (testdata/python/handler.py), which reads the same testConfig.
func pythonHandler(t testing.TB, cfg testConfig) pipelines.Handler {
	return pythonScript(t, "runtime/testdata/python/handler.py", cfg.asMap())
}

// The crash test of TestCrashes, on the Python handler: SIGKILLs of the
// Python process and its interpreter dying mid-batch lose nothing and
// never reach the broker connections.
func TestPythonCrashes(t *testing.T) {
	pythonSDK(t)
	for _, typ := range []pipelines.SubscriptionType{pipelines.KeyShared, pipelines.Shared} {
		t.Run(string(typ), func(t *testing.T) {
			testCrashes(t, typ, crashCase{
				messages: 100_000,
				minKills: 10,
				handler:  func(cfg testConfig) pipelines.Handler { return pythonHandler(t, cfg) },
				// An interpreter takes a good part of a second to start on
				// a busy machine, a Go plugin milliseconds.
				produceFor: 30 * time.Second,
				panics:     8,
			})
		})
	}
}

// An exception a Python handler raises for a message is that message's
// error, as an error a Go MessageFunc returns: it is retried under the
// pipeline's error policy, then dead-lettered with the exception as the
// reason, while the process goes on with the others: no crash, no
// restart. The traceback reaches the host's log as one WARN record.
func TestAPythonExceptionIsTheMessagesError(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
	var payloads []string
	for i := range 16 {
		payloads = append(payloads, fmt.Sprintf("fine-%d", i))
	}
	payloads[11] = "poison"
	h := pythonScript(t, "examples/plugins/python/raises/raises.py", map[string]any{"payload": "poison", "output": out})
	h.BatchWait = 200 * time.Millisecond // one batch of 16
	publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
	outs, dead := collect(t, cl, out), collect(t, cl, dlq)
	logs := &logLines{}
	r := runHost(t, c, streamrun.Options{Restart: fastRestarts, Logger: slog.New(slog.NewJSONHandler(logs, nil))}, pipelines.Pipeline{
		Name:    "poison",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "poison", InitialPosition: pipelines.Earliest},
		Handler: h,
		ErrorPolicy: pipelines.ErrorPolicy{DeadLetterTopic: dlq, MaxRetries: 2,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}},
	})
	got := outs.waitLen(t, 15)
	d := dead.waitLen(t, 1)
	if string(d[0].Payload) != "poison" {
		t.Fatalf("dead letter %q", d[0].Payload)
	}
	reason := d[0].Properties[streamrun.PropertyDeadLetterReason]
	if want := "retried 2 times; last reason: RuntimeError: raises: told to raise on message "; !strings.HasPrefix(reason, want) {
		t.Errorf("reason %q, want it to start %q", reason, want)
	}
	for _, m := range got {
		if string(m.Payload) == "poison" {
			t.Errorf("the poison message reached the output")
		}
	}
	waitFor(t, "everything settled", func() bool { s := r.stats("poison"); return s.Acked+s.DeadLettered == 16 })
	s := r.stats("poison")
	t.Logf("reason: %s; stats %+v", reason, s)
	if s.Crashes != 0 || s.Restarts != 0 || s.Retried != 2 || s.DeadLettered != 1 {
		t.Errorf("stats %+v: want no crash, no restart, 2 retries, 1 dead letter", s)
	}
	// The SDK's record of each exception reached the host's log as a
	// structured record of the plugin's: level, attributes, traceback.
	n := 0
	for _, line := range logs.all() {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "handler raised; the message will be retried" {
			continue
		}
		n++
		if rec["level"] != "WARN" || rec["plugin"] != "raises.py" || rec["message_id"] == nil ||
			!strings.Contains(fmt.Sprint(rec["stack"]), "told to raise") {
			t.Errorf("the exception's record: %v", rec)
		}
	}
	if n != 3 {
		t.Errorf("%d records of the exception in the host's log, want 3 (the first try and 2 retries):\n%s", n, strings.Join(logs.all(), ""))
	}
}

// An interpreter that dies (os._exit) on a message is a crash, supervised
// as a Go handler's: the handler restarted, the batch retried and split
// until the message is found alone, then dead-lettered after MaxCrashes.
func TestAPythonInterpreterThatDiesIsSupervised(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
	payloads := []string{"fine-0", "fine-1", "poison", "fine-3"}
	h := pythonScript(t, "examples/plugins/python/raises/raises.py", map[string]any{"payload": "poison", "exit": true, "output": out})
	h.BatchWait = 200 * time.Millisecond // one batch of 4
	publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
	outs, dead := collect(t, cl, out), collect(t, cl, dlq)
	r := runHost(t, c, streamrun.Options{Restart: fastRestarts, Logger: testLogger(t, slog.LevelError+4)}, pipelines.Pipeline{
		Name:        "crash",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "crash", InitialPosition: pipelines.Earliest},
		Handler:     h,
		ErrorPolicy: pipelines.ErrorPolicy{DeadLetterTopic: dlq},
	})
	outs.waitLen(t, 3)
	d := dead.waitLen(t, 1)
	reason := d[0].Properties[streamrun.PropertyDeadLetterReason]
	if string(d[0].Payload) != "poison" || !strings.Contains(reason, "failed 3 times on it alone") || !strings.Contains(reason, "exit status 3") {
		t.Errorf("dead letter %q, reason %q", d[0].Payload, reason)
	}
	waitFor(t, "everything settled", func() bool { s := r.stats("crash"); return s.Acked+s.DeadLettered == 4 })
	if s := r.stats("crash"); s.Crashes < 3 || s.Restarts < 3 {
		t.Errorf("stats %+v: want the crashes counted and the handler restarted", s)
	}
}

// A key and properties that are not UTF-8 (Pulsar carries bytes) cross a
// Python handler and a Go handler unchanged: each echoes key and
// properties to its output.
func TestKeysAndPropertiesThatAreNotUTF8PassThroughHandlers(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, outPy, outGo := topic(t, "in"), topic(t, "out-py"), topic(t, "out-go")
	msgs := []pool.Message{
		{Key: "k\xff\xfe-0", Properties: map[string]string{"name\xc3(": "value\xa0\xa1", "plain": "text", "utf8": "ünï"}, Payload: []byte("m-0")},
		{Key: "\x80", Properties: map[string]string{"\xff": ""}, Payload: []byte("m-1")},
		{Key: "plain", Payload: []byte("m-2")},
	}
	ctx := testContext(t)
	for _, m := range msgs {
		if _, err := cl.Publish(ctx, in, m); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	gotPy, gotGo := collect(t, cl, outPy), collect(t, cl, outGo)
	runHost(t, c, streamrun.Options{}, pipelines.Pipeline{
		Name:    "python",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "python", InitialPosition: pipelines.Earliest},
		Handler: pythonHandler(t, testConfig{Output: outPy}),
	}, pipelines.Pipeline{
		Name:    "go",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "go", InitialPosition: pipelines.Earliest},
		Handler: self(testConfig{Output: outGo}),
	})
	for name, got := range map[string]*collector{"python": gotPy, "go": gotGo} {
		outs := got.waitLen(t, len(msgs))
		for i, m := range msgs {
			o := outs[i]
			if string(o.Payload) != string(m.Payload) || o.Key != m.Key || !maps.Equal(o.Properties, m.Properties) {
				t.Errorf("%s handler: message %d came out as key %q, properties %q, payload %q; want key %q, properties %q, payload %q",
					name, i, o.Key, o.Properties, o.Payload, m.Key, m.Properties, m.Payload)
			}
		}
	}
}

// A script handler whose interpreter or script is missing fails its
// pipeline's start with an error naming the field; no SDK needed.
func TestAScriptHandlerThatCannotRunFailsItsStartClearly(t *testing.T) {
	c := cluster(t)
	for _, tc := range []struct {
		name string
		h    pipelines.Handler
		want string
	}{
		{"no interpreter", pipelines.Handler{Script: "testdata/python/handler.py", Python: "/nonexistent/python3"}, "handler.python"},
		{"not in PATH", pipelines.Handler{Script: "testdata/python/handler.py", Python: "no-such-python-here"}, `handler.python "no-such-python-here"`},
		{"no script", pipelines.Handler{Script: "testdata/python/nonexistent.py"}, "handler.script"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			h, err := streamrun.New(ctx, streamrun.Options{Pool: pool.Options{ServiceURL: c.ServiceURL()}, Logger: testLogger(t, slog.LevelError+4)})
			if err != nil {
				t.Fatal(err)
			}
			err = h.Run(ctx, pipelines.Pipeline{
				Name:    "script",
				Source:  pipelines.Source{Topics: []string{topic(t, "in")}, Subscription: "script"},
				Handler: tc.h,
			})
			t.Logf("Run: %v", err)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error naming %s", err, tc.want)
			}
		})
	}
}

// BenchmarkPipelinePython is BenchmarkPipeline (see there for the load,
// the metrics and the environment that tunes them) with the identity
// handler in Python (testdata/python/handler.py) beside the Go one
// (the test binary's testHandler), at batches of 100 and 1000:
//
//	STREAMRUN_PYTHON_SDK=$(scripts/python-sdk-env) go test ./runtime -run '^$' -bench PipelinePython -benchtime 200000x
func BenchmarkPipelinePython(b *testing.B) {
	pythonSDK(b)
	for _, batch := range []int{100, 1000} {
		for _, mode := range []string{"plugin", "python"} {
			b.Run(fmt.Sprintf("handler=%s/batch=%d", mode, batch), func(b *testing.B) {
				benchPipeline(b, mode, batch)
			})
		}
	}
}

// logLines keeps every line written to it, whole.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	return len(p), nil
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}
