package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/contract"
)

func TestUppercaseRoundTrip(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("uppercase")}, `{"output":"persistent://public/default/upper"}`)
	batch := msgs("hello", "streamrun", "")
	res, err := inst.Process(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results for 3 messages", len(res))
	}
	for i, want := range []string{"HELLO", "STREAMRUN", ""} {
		r := res[i]
		if r.Outcome != plugin.OutcomeAck || len(r.Outputs) != 1 {
			t.Fatalf("message %d: %+v", i, r)
		}
		o := r.Outputs[0]
		if o.Topic != "persistent://public/default/upper" || string(o.Payload) != want || o.Key != batch[i].Key {
			t.Errorf("message %d: output %+v, want payload %q to upper with key %q", i, o, want, batch[i].Key)
		}
	}
	if err := inst.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Exited():
	default:
		t.Fatal("Close returned before the process exited")
	}
	if st := inst.ExitStatus(); st != "exit status 0" {
		t.Errorf("graceful close ended the plugin with %q", st)
	}
	if _, err := inst.Process(context.Background(), batch); !errors.Is(err, ErrClosed) {
		t.Errorf("Process after Close: %v, want ErrClosed", err)
	}
}

func TestEveryMessageFieldReachesThePlugin(t *testing.T) {
	inst := start(t, selfPlugin(t, "sdk", nil), `{"mode":"fields"}`)
	in := []*plugin.Message{{
		ID:              "12:34:2:5",
		Topic:           "persistent://t/ns/orders-partition-2",
		Key:             "customer-1",
		OrderingKey:     []byte{0, 1, 2},
		Properties:      map[string]string{"a": "b", "traceparent": "x"},
		Payload:         []byte{0xff, 0, 'x'},
		PublishTime:     time.UnixMilli(1_700_000_000_123),
		EventTime:       time.UnixMilli(1_600_000_000_456),
		RedeliveryCount: 3,
		TraceParent:     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		TraceState:      "vendor=1",
	}, {ID: "12:35:2:-1", Topic: "persistent://t/ns/orders-partition-2", PublishTime: time.UnixMilli(1)}}
	res, err := inst.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range in {
		o := res[i].Outputs[0]
		var got seen
		if err := json.Unmarshal(o.Payload, &got); err != nil {
			t.Fatal(err)
		}
		want := seen{m.ID, m.Topic, m.Key, m.TraceParent, m.TraceState, m.OrderingKey, m.Properties,
			m.Payload, m.PublishTime, m.EventTime, m.RedeliveryCount, i}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if !bytes.Equal(wb, gb) {
			t.Errorf("message %d: the plugin saw\n%s\nwant\n%s", i, gb, wb)
		}
		if !bytes.Equal(o.OrderingKey, m.OrderingKey) || o.Properties["p"] != "q" || !o.EventTime.Equal(m.EventTime) {
			t.Errorf("message %d: output fields lost: %+v", i, o)
		}
	}
	if !in[1].EventTime.IsZero() || !res[1].Outputs[0].EventTime.IsZero() {
		t.Error("an unset event time came back set")
	}
}

func TestOutcomes(t *testing.T) {
	inst := start(t, selfPlugin(t, "sdk", nil), `{"mode":"outcomes"}`)
	res, err := inst.Process(context.Background(),
		msgs("ack", "retry", "retry-later", "dlq", "drop", "output-then-retry", "retry-then-ack"))
	if err != nil {
		t.Fatal(err)
	}
	want := []plugin.Result{
		{Outcome: plugin.OutcomeAck},
		{Outcome: plugin.OutcomeRetry, Reason: "not now"},
		{Outcome: plugin.OutcomeRetry, RetryDelay: 1500 * time.Millisecond, Reason: "later"},
		{Outcome: plugin.OutcomeDeadLetter, Reason: "poison"},
		{Outcome: plugin.OutcomeDrop, Reason: "filtered"},
		{Outcome: plugin.OutcomeRetry, Reason: "changed my mind"}, // its output is discarded
		{Outcome: plugin.OutcomeAck, Outputs: []plugin.Output{{Topic: "out", Payload: []byte("retry-then-ack")}}},
	}
	for i, w := range want {
		r := res[i]
		if r.Outcome != w.Outcome || r.RetryDelay != w.RetryDelay || r.Reason != w.Reason || len(r.Outputs) != len(w.Outputs) {
			t.Errorf("message %d: got %+v, want %+v", i, r, w)
			continue
		}
		for j := range w.Outputs {
			if r.Outputs[j].Topic != w.Outputs[j].Topic || !bytes.Equal(r.Outputs[j].Payload, w.Outputs[j].Payload) {
				t.Errorf("message %d output %d: %+v", i, j, r.Outputs[j])
			}
		}
	}
}

func TestAHandlerErrorRetriesTheWholeBatch(t *testing.T) {
	for _, tc := range []struct{ mode, reason string }{
		{"fail", "batch failed: database down"},
		{"misuse", "batch failed: ResultWriter.Ack called with message 9:9:-1:-1, which is not in this batch"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			inst := start(t, selfPlugin(t, "sdk", nil), `{"mode":"`+tc.mode+`"}`)
			res, err := inst.Process(context.Background(), msgs("a", "b"))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Outcome != plugin.OutcomeRetry || r.Reason != tc.reason || len(r.Outputs) != 0 {
					t.Errorf("message %d: %+v, want a retry with reason %q and no outputs", i, r, tc.reason)
				}
			}
			if !inst.Alive() {
				t.Error("a failed batch killed the plugin")
			}
		})
	}
}

func TestJSONEnrichAndRoute(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("enrich")}, `{"large":"big","small":"small","threshold":100}`)
	res, err := inst.Process(context.Background(), msgs(
		`{"id":"o1","country":"DE","amount":250}`,
		`{"id":"o2","country":"US","amount":5}`,
		`not json`,
		`{"country":"JP"}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	check := func(i int, topic, key, payload string) {
		t.Helper()
		if res[i].Outcome != plugin.OutcomeAck || len(res[i].Outputs) != 1 {
			t.Fatalf("message %d: %+v", i, res[i])
		}
		o := res[i].Outputs[0]
		if o.Topic != topic || o.Key != key || string(o.Payload) != payload {
			t.Errorf("message %d: output to %s key %s payload %s, want %s %s %s", i, o.Topic, o.Key, o.Payload, topic, key, payload)
		}
	}
	check(0, "big", "o1", `{"id":"o1","country":"DE","amount":250,"region":"emea"}`)
	check(1, "small", "o2", `{"id":"o2","country":"US","amount":5,"region":"amer"}`)
	if r := res[2]; r.Outcome != plugin.OutcomeDeadLetter || !strings.Contains(r.Reason, "decode payload as main.order") {
		t.Errorf("bad JSON: %+v, want a dead letter naming the type", r)
	}
	if r := res[3]; r.Outcome != plugin.OutcomeDeadLetter || r.Reason != "order without id" {
		t.Errorf("order without id: %+v", r)
	}
}

func TestABadConfigFailsInit(t *testing.T) {
	for _, tc := range []struct{ plugin, config, want string }{
		{"uppercase", `{"outptu":"x"}`, `unknown field "outptu"`},
		{"enrich", `{}`, `both "large" and "small" topics are required`},
		{"slow", `{"delay":"soon"}`, `delay: time: invalid duration "soon"`},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			inst, err := Start(context.Background(), ClientOptions{Path: example(tc.plugin)})
			if err != nil {
				t.Fatal(err)
			}
			defer inst.Kill()
			err = inst.Init(context.Background(), []byte(tc.config))
			if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.plugin) {
				t.Fatalf("init error %v, want ErrInit naming %s and saying %s", err, tc.plugin, tc.want)
			}
		})
	}
}

// A panic whose value is not UTF-8 still reaches the host as a panic
// (protobuf strings must be UTF-8), not as a wrong answer.
func TestAPanicThatIsNotUTF8IsReported(t *testing.T) {
	inst := start(t, selfPlugin(t, "sdk", nil), `{"mode":"badpanic"}`)
	_, err := inst.Process(context.Background(), msgs("a"))
	var crash *CrashError
	if !errors.As(err, &crash) || crash.Panic != "b\uFFFDd" || crash.Stack == "" {
		t.Fatalf("Process: %v (%+v), want the panic reported", err, crash)
	}
}

func TestAPanicIsACrashNamingTheMessage(t *testing.T) {
	l, logger := newLogs()
	inst := start(t, ClientOptions{Path: example("panicky"), Logger: logger, InstanceID: "3"}, `{"payload":"boom"}`)
	batch := msgs("fine", "boom", "never")
	_, err := inst.Process(context.Background(), batch)
	var crash *CrashError
	if !errors.Is(err, ErrCrashed) || !errors.As(err, &crash) {
		t.Fatalf("Process: %v, want a crash", err)
	}
	if crash.Index != 1 || crash.MessageID != batch[1].ID || !strings.Contains(crash.Panic, "told to panic on message 7:1:-1:-1") {
		t.Errorf("crash %+v does not name message 1", crash)
	}
	if !strings.Contains(crash.Stack, "main.main") || crash.Pid != inst.Pid() {
		t.Errorf("crash lacks the stack or pid: %+v", crash)
	}
	t.Log(err)
	select {
	case <-inst.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the crashed plugin did not exit")
	}
	if inst.Alive() {
		t.Error("Alive after exit")
	}
	// The plugin's own report of the panic reaches the host's log, tagged.
	l.Wait(t, 10*time.Second, "handler panicked; the plugin exits", map[string]string{
		"plugin": "panicky", "instance": "3", "index": "1", "message": "7:1:-1:-1"})
	if _, err := inst.Process(context.Background(), batch); !errors.Is(err, ErrClosed) {
		t.Errorf("Process after a crash: %v, want ErrClosed", err)
	}
}

func TestAPanicOutsideTheHandlerIsACrashWithItsTraceLogged(t *testing.T) {
	l, logger := newLogs()
	inst := start(t, selfPlugin(t, "sdk", logger), `{"mode":"gopanic"}`)
	_, err := inst.Process(context.Background(), msgs("a"))
	var crash *CrashError
	if !errors.As(err, &crash) || crash.Exit != "exit status 2" || crash.Index != -1 || crash.Panic != "" {
		t.Fatalf("Process: %v (%+v), want a crash with exit status 2", err, crash)
	}
	<-inst.Exited()
	// The runtime's trace is one ERROR record; every line is there by the
	// time Exited is closed.
	r, ok := l.Find(func(r testkit.Record) bool { return r.Msg == "plugin crashed" && r.Attrs["trace"] != "" })
	if !ok || r.Level != slog.LevelError || r.Attrs["plugin"] != "test-sdk" ||
		!strings.HasPrefix(r.Attrs["trace"], "panic: in a goroutine of the handler") ||
		!strings.Contains(r.Attrs["trace"], "goroutine ") {
		t.Fatalf("no crash trace record; have:\n%s", l.String())
	}
}

func TestCloseReachesTheHandler(t *testing.T) {
	l, logger := newLogs()
	inst := start(t, selfPlugin(t, "sdk", logger), `{"mode":"echo"}`)
	if err := inst.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Close waits for the exit, and the exit for the plugin's stderr.
	if _, ok := l.Find(func(r testkit.Record) bool { return r.Msg == "test handler closed" && r.Attrs["mode"] == "echo" }); !ok {
		t.Fatalf("the handler's Close did not run; have:\n%s", l.String())
	}
	if err := inst.Close(context.Background()); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestKillDuringProcessIsACrashNotAHang(t *testing.T) {
	l, logger := newLogs()
	inst := start(t, ClientOptions{Path: example("slow"), Logger: logger}, `{"delay":"1h"}`)
	done := make(chan error, 1)
	go func() {
		_, err := inst.Process(context.Background(), msgs("a", "b"))
		done <- err
	}()
	l.Wait(t, 10*time.Second, "slow batch", nil) // the plugin is inside Process
	if err := syscall.Kill(inst.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var crash *CrashError
		if !errors.As(err, &crash) || !errors.Is(err, ErrCrashed) {
			t.Fatalf("Process: %v, want a crash", err)
		}
		if crash.Exit != "signal: killed" {
			t.Errorf("crash exit %q, want signal: killed", crash.Exit)
		}
		t.Log(err)
	case <-time.After(10 * time.Second):
		t.Fatal("Process hangs after the plugin was killed")
	}
	<-inst.Exited()
	l.Wait(t, 10*time.Second, "plugin exited unexpectedly", map[string]string{"plugin": "slow", "status": "signal: killed"})
}

func TestAHangEndsAtTheDeadline(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("slow")}, `{"delay":"1h"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := inst.Process(ctx, msgs("a"))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrCrashed) {
		t.Fatalf("Process: %v, want the deadline", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Process took %v to give up", d)
	}
	if !inst.Alive() {
		t.Error("a deadline killed the plugin; that is the caller's call")
	}
	inst.Kill()
	if inst.Alive() {
		t.Error("Alive after Kill")
	}
}

func TestSlowBatchFinishes(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("slow")}, `{"delay":"50ms","output":"o"}`)
	t0 := time.Now()
	res, err := inst.Process(context.Background(), msgs("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) < 50*time.Millisecond || len(res[1].Outputs) != 1 || string(res[1].Outputs[0].Payload) != "b" {
		t.Errorf("slow: %+v", res)
	}
}

func TestWrongAnswersAreErrorsNamingTheMessage(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"short", "plugin test-raw answered wrongly: 2 results for a batch of 3 messages"},
		{"outcome", "plugin test-raw answered wrongly for message 1 (7:1:-1:-1): unknown outcome 7"},
		{"unspecified", "plugin test-raw answered wrongly for message 1 (7:1:-1:-1): unknown outcome 0"},
		{"index", "plugin test-raw answered wrongly: result 1 is for message index 99, out of range for a batch of 3 messages"},
		{"dup", "plugin test-raw answered wrongly for message 0 (7:0:-1:-1): more than one result"},
		{"notopic", "plugin test-raw answered wrongly for message 1 (7:1:-1:-1): output 0 has no topic"},
		{"delay", "plugin test-raw answered wrongly for message 1 (7:1:-1:-1): negative retry delay -5ms"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			inst := start(t, selfPlugin(t, "raw", nil), `{"mode":"`+tc.mode+`"}`)
			res, err := inst.Process(context.Background(), msgs("a", "b", "c"))
			if !errors.Is(err, ErrBadResponse) || err.Error() != tc.want || res != nil {
				t.Fatalf("got %v, %v\nwant %s", res, err, tc.want)
			}
		})
	}
}

// Wrong state changes are wrong answers naming the message, in a
// pipeline that keeps state: a change to another key than the message's
// (one the batch's message does not have), a value over
// plugin.MaxStateValueSize, a delete with a value, an empty value that
// does not delete; and any change where the pipeline keeps none. The
// batch fails whole, so nothing of it is acknowledged or lost: the
// runtime retries it (TestAnAnswerAboutAnotherMessageRetriesTheBatch).
func TestWrongStateChangesAreErrorsNamingTheMessage(t *testing.T) {
	pre := "plugin test-raw answered wrongly for message 1 (7:1:-1:-1): "
	for _, tc := range []struct {
		mode  string
		keyed bool
		want  string
	}{
		{"statekey", true, pre + `a state change of key "k0", not the message's key "k1"`},
		{"statebig", true, pre + fmt.Sprintf("a state value of %d bytes, over the %d-byte limit", plugin.MaxStateValueSize+1, plugin.MaxStateValueSize)},
		{"statedelete", true, pre + "a state change that deletes and has a value"},
		{"stateempty", true, pre + "a state change with an empty value that does not delete"},
		{"statekey", false, pre + "a state change, and the pipeline keeps no state"},
	} {
		t.Run(fmt.Sprintf("%s/keyed=%v", tc.mode, tc.keyed), func(t *testing.T) {
			opts := selfPlugin(t, "raw", nil)
			opts.KeyedState = tc.keyed
			inst := start(t, opts, `{"mode":"`+tc.mode+`"}`)
			res, err := inst.Process(context.Background(), msgs("a", "b", "c"))
			if !errors.Is(err, ErrBadResponse) || err.Error() != tc.want || res != nil {
				t.Fatalf("got %v, %v\nwant %s", res, err, tc.want)
			}
		})
	}
}

// Several callers share an instance's Batches stream: each gets the
// answer to its own batch, from an SDK plugin and from one written on the
// generated code.
func TestCallersOnOneStreamGetTheirOwnAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   ClientOptions
		config string
	}{
		{"sdk", selfPlugin(t, "sdk", nil), `{"mode":"echo"}`},
		{"generated", selfPlugin(t, "raw", nil), `{"mode":"ok"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := start(t, tc.opts, tc.config)
			var wg sync.WaitGroup
			for c := range 8 {
				wg.Go(func() {
					for k := range 20 {
						batch := msgs(strings.Repeat("x", c*20+k+1), "b")
						res, err := inst.Process(context.Background(), batch)
						if err != nil || len(res) != 2 || res[0].Outcome != plugin.OutcomeAck {
							t.Errorf("caller %d, batch %d: %+v, %v", c, k, res, err)
							return
						}
						if tc.name == "sdk" && string(res[0].Outputs[0].Payload) != string(batch[0].Payload) {
							t.Errorf("caller %d got the answer to another batch: %q for %q", c, res[0].Outputs[0].Payload, batch[0].Payload)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func TestAnotherContractVersionIsRefusedAtStart(t *testing.T) {
	_, err := Start(context.Background(), selfPlugin(t, "future", nil))
	if want := fmt.Sprintf("Plugin version: %d", contract.Version+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start of a version %d plugin: %v", contract.Version+1, err)
	}
	t.Log(err)
}

func TestAPluginRunByHandSaysSo(t *testing.T) {
	out, err := exec.Command(example("uppercase")).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "This binary is a plugin") {
		t.Fatalf("run by hand: %v\n%s", err, out)
	}
}

func TestBatchesAbove4MiB(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("uppercase")}, `{"output":"o"}`)
	big := strings.Repeat("x", 3<<20) // 3 MiB each, 15 MiB a batch, each way
	batch := msgs(big, big, big, big, big)
	res, err := inst.Process(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if len(r.Outputs) != 1 || len(r.Outputs[0].Payload) != len(big) || r.Outputs[0].Payload[0] != 'X' {
			t.Fatalf("message %d came back wrong", i)
		}
	}
}

func TestABatchAboveTheLimitIsAClearError(t *testing.T) {
	opts := ClientOptions{Path: example("uppercase"), MaxMessageSize: 1 << 20}
	inst := start(t, opts, `{"output":"o"}`)
	_, err := inst.Process(context.Background(), msgs(strings.Repeat("x", 2<<20)))
	if err == nil || errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "MaxMessageSize is 1048576 bytes") {
		t.Fatalf("Process: %v", err)
	}
	if !inst.Alive() {
		t.Error("an oversized batch killed the plugin")
	}
	// Refused before it was sent, it left the stream as it was.
	res, err := inst.Process(context.Background(), msgs("small"))
	if err != nil || len(res) != 1 {
		t.Fatalf("the next batch: %v, %v", res, err)
	}
}

func TestPluginLogsReachTheHostLogger(t *testing.T) {
	l, logger := newLogs()
	opts := selfPlugin(t, "sdk", logger)
	opts.Pipeline, opts.InstanceID = "orders", "2"
	inst := start(t, opts, `{"mode":"print"}`)
	tags := map[string]string{"plugin": "test-sdk", "instance": "2"}
	with := func(more ...string) map[string]string {
		m := map[string]string{}
		for k, v := range tags {
			m[k] = v
		}
		for i := 0; i < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	l.Wait(t, 10*time.Second, "test handler ready", with("mode", "print", "pipeline", "orders"))
	if _, err := inst.Process(context.Background(), msgs("a")); err != nil {
		t.Fatal(err)
	}
	if r := l.Wait(t, 10*time.Second, "hello structured", with("n", "42", "batch", "1")); r.Level != 4 {
		t.Errorf("a WARN record arrived at %v", r.Level)
	}
	l.Wait(t, 10*time.Second, "hello on stdout", with("stream", "stdout"))
	l.Wait(t, 10*time.Second, "hello on stderr", with("stream", "stderr"))
	l.Wait(t, 10*time.Second, "hello from the log package", tags)
}

func TestStartHonoursItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Start(ctx, ClientOptions{Path: example("uppercase")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a done context: %v", err)
	}
	_, err = Start(context.Background(), ClientOptions{Path: "/nonexistent/plugin"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/plugin") {
		t.Fatalf("Start of a missing binary: %v", err)
	}
}

// The orphan test: a host killed with SIGKILL leaves no plugin behind.
func TestPluginsDieWithAKilledHost(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := exec.Command(exe)
	host.Env = append(os.Environ(), roleEnv+"=host", "STREAMRUN_TEST_PLUGIN="+example("uppercase"))
	host.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child host said nothing: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child host said %q", line)
	}
	if !running(pid) {
		t.Fatalf("plugin pid %d is not running before the host dies", pid)
	}
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	testkit.Eventually(t, 10*time.Second, "the plugin to die with its host", func() bool { return !running(pid) })
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// A plugin that dies before its handshake is reported with the end of
// its stderr, where it said why; a Python traceback there is logged as
// one ERROR record, not a record a line.
func TestAPluginThatDiesAtStartIsReportedWithItsStderr(t *testing.T) {
	l, logger := newLogs()
	_, err := Start(context.Background(), selfPlugin(t, "nosdk", logger))
	quoted := "  " + strings.ReplaceAll(noSDKTraceback, "\n", "\n  ")
	if err == nil || !strings.Contains(err.Error(), "exited before its handshake (exit status 1); the end of its stderr:\n"+quoted) ||
		strings.Contains(err.Error(), "Unrecognized remote plugin message") {
		t.Fatalf("start: %v\nwant the exit and the traceback quoted", err)
	}
	t.Logf("start: %v", err)
	r, ok := l.Find(func(r testkit.Record) bool { return r.Attrs["trace"] != "" })
	if !ok || r.Level != slog.LevelError || r.Attrs["trace"] != noSDKTraceback ||
		r.Attrs["error"] != "ModuleNotFoundError: No module named 'streamrun'" || r.Attrs["plugin"] != "test-nosdk" ||
		l.Count("stream=stderr") != 0 {
		t.Fatalf("want the traceback as one ERROR record, no line of it on its own; have:\n%s", l.String())
	}

	// A Go plugin's panic is quoted from its start: the value, then the
	// first frames.
	_, err = Start(context.Background(), selfPlugin(t, "panicstart", nil))
	if err == nil || !strings.Contains(err.Error(), "exited before its handshake (exit status 2); the end of its stderr:\n"+
		"  panic: no config file at /etc/handler.json\n  \n  goroutine 1 [running]:") {
		t.Fatalf("start of a plugin that panics: %v", err)
	}
}

// A plugin the host kills itself (it reported a panic) is logged as
// stopped by the host, with why, not as a plugin that exited
// unexpectedly; one that exits on its own still is.
func TestTheHostSaysWhyItStoppedAPlugin(t *testing.T) {
	l, logger := newLogs()
	inst := start(t, ClientOptions{Path: example("panicky"), Logger: logger}, `{"payload":"boom"}`)
	if _, err := inst.Process(context.Background(), msgs("boom")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Process: %v, want a crash", err)
	}
	<-inst.Exited()
	r, ok := l.Find(func(r testkit.Record) bool { return r.Msg == "plugin stopped by the host" })
	if !ok || r.Level != slog.LevelInfo || r.Attrs["status"] != "signal: killed" || r.Attrs["pid"] != strconv.Itoa(inst.Pid()) ||
		!strings.HasPrefix(r.Attrs["reason"], "it crashed: panic: panicky: told to panic on message 7:0:-1:-1") ||
		l.Count("plugin exited unexpectedly") != 0 {
		t.Fatalf("want one INFO record of the host's stop, with why; have:\n%s", l)
	}

	l, logger = newLogs()
	inst = start(t, selfPlugin(t, "sdk", logger), `{"mode":"gopanic"}`)
	if _, err := inst.Process(context.Background(), msgs("a")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Process: %v, want a crash", err)
	}
	<-inst.Exited()
	if l.Count("plugin exited unexpectedly", "status=exit status 2") != 1 || l.Count("plugin stopped by the host") != 0 {
		t.Fatalf("a plugin that exits on its own; have:\n%s", l)
	}
}
