package benchrun

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPayloadStamp(t *testing.T) {
	now := time.Unix(1_790_000_000, 123_456_789)
	for _, size := range []int{StampLen, 100, 1024} {
		p := Payload(size, now)
		if len(p) != size {
			t.Fatalf("size %d: got %d bytes", size, len(p))
		}
		got, ok := Stamp(p)
		if !ok || !got.Equal(now) {
			t.Errorf("size %d: stamp %v %v, want %v", size, got, ok, now)
		}
		// Text transformations that keep digits keep the stamp.
		if got, ok := Stamp(bytes.ToUpper(p)); !ok || !got.Equal(now) {
			t.Errorf("size %d: uppercased stamp %v %v", size, got, ok)
		}
	}
	if _, ok := Stamp(Payload(StampLen-1, now)); ok {
		t.Error("a payload shorter than the stamp has one")
	}
	if _, ok := Stamp([]byte(strings.Repeat("x", 40))); ok {
		t.Error("letters read as a stamp")
	}
	pub := now.Add(-time.Second)
	if d, from := Since(now, []byte("short"), pub); d != time.Second || from != LatencyFromPublishTime {
		t.Errorf("Since without stamp: %v %q", d, from)
	}
	if d, from := Since(now.Add(2*time.Millisecond), Payload(100, now), pub); d != 2*time.Millisecond || from != LatencyFromPayload {
		t.Errorf("Since with stamp: %v %q", d, from)
	}
}

func TestRecorderPercentiles(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1 + g*250; i <= (g+1)*250; i++ {
				r.Record(time.Duration(i) * time.Millisecond) // 1..1000 ms
			}
		}()
	}
	wg.Wait()
	s := r.Summary()
	near := func(got, want float64) bool { return got >= want*0.999 && got <= want*1.001+0.001 }
	if s.Count != 1000 || !near(s.P50, 500) || !near(s.P99, 990) || !near(s.P999, 999) || !near(s.Max, 1000) {
		t.Errorf("summary %+v", s)
	}
	if _, p99, ok := r.Interval(); !ok || !near(float64(p99)/1e6, 990) {
		t.Errorf("interval p99 %v %v", p99, ok)
	}
	if _, _, ok := r.Interval(); ok {
		t.Error("a second interval with nothing recorded has percentiles")
	}
	// Out of range values are clamped, not lost.
	r.Record(time.Hour)
	r.Record(0)
	if s := r.Summary(); s.Count != 1002 || !near(s.Max, float64(histMax)/1e6) {
		t.Errorf("after clamping: %+v", s)
	}
}

func TestMeterResult(t *testing.T) {
	m := NewMeter()
	var out syncBuf
	m.StartProgress(context.Background(), &out, 10*time.Millisecond)
	for range 10 {
		m.Sent()
		m.Received(100, time.Millisecond, LatencyFromSend)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "msg/s") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	m.StopProgress()
	if !strings.Contains(out.String(), "p50 1.000 ms") {
		t.Errorf("progress %q lacks the interval's p50", out.String())
	}
	m.Failed(context.Canceled)
	r := m.Result("produce", Conditions{MessageSize: 100})
	if r.Messages != 10 || r.Sent != 10 || r.Bytes != 1000 || r.Failed != 1 || r.LatencyFrom != LatencyFromSend || r.Schema != SchemaVersion {
		t.Errorf("result %+v", r)
	}
	if n, err := m.FailedCount(); n != 1 || err != context.Canceled {
		t.Errorf("failed %d %v", n, err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSteadyRateLeavesOutStartAndTail(t *testing.T) {
	m := NewMeter()
	t0 := time.Unix(1_790_000_000, 0)
	// A slow start (100 messages in 1 s), 800 at 1000 msg/s, a slow tail
	// (100 in 2 s): the run's mean rate is 1000/3.8 s, its middle's 1000/s.
	at := t0
	for i := range 1000 {
		switch {
		case i < 100:
			at = at.Add(10 * time.Millisecond)
		case i < 900:
			at = at.Add(time.Millisecond)
		default:
			at = at.Add(20 * time.Millisecond)
		}
		m.Received(10, time.Millisecond, LatencyFromSend)
		m.MarkEnd(at)
	}
	r := m.Result("consume", Conditions{})
	if r.SteadyMsgPerSec < 990 || r.SteadyMsgPerSec > 1010 {
		t.Errorf("steady rate %.1f msg/s, want 1000", r.SteadyMsgPerSec)
	}
	if want := t0.Add(10 * time.Millisecond); !r.FirstMessageAt.Equal(want) {
		t.Errorf("first message at %v, want %v", r.FirstMessageAt, want)
	}
	if !r.LastMessageAt.Equal(at) {
		t.Errorf("last message at %v, want %v", r.LastMessageAt, at)
	}
	// Nothing measured: no rate, no times.
	r = NewMeter().Result("consume", Conditions{})
	if r.SteadyMsgPerSec != 0 || !r.FirstMessageAt.IsZero() || !r.LastMessageAt.IsZero() {
		t.Errorf("empty run: steady %v first %v last %v", r.SteadyMsgPerSec, r.FirstMessageAt, r.LastMessageAt)
	}
}

// Each pipeline's handler gets the config given, "{output}" in its
// strings (nested ones too) replaced by that pipeline's output topic; the
// config given stays as it was, for the conditions.
func TestEachPipelinesHandlerGetsItsOwnOutput(t *testing.T) {
	cfg := map[string]any{"to": "{output}", "routes": []any{map[string]any{"topic": "{output}-dlq"}}, "n": 3.0}
	o := Options{Handler: HandlerOptions{Plugin: "/bin/true", Config: cfg, BatchSize: 1, Instances: 1}}
	ps, kind, err := o.pipelineSet([]string{"a", "b"}, []string{"a-out", "b-out"})
	if err != nil || kind != "plugin" {
		t.Fatalf("pipelineSet: %v, %q", err, kind)
	}
	for i, want := range []string{"a-out", "b-out"} {
		got := fmt.Sprint(ps[i].Handler.Config)
		if exp := fmt.Sprintf("map[n:3 routes:[map[topic:%s-dlq]] to:%s]", want, want); got != exp {
			t.Errorf("pipeline %d's config %s, want %s", i, got, exp)
		}
	}
	if got := fmt.Sprint(cfg); got != "map[n:3 routes:[map[topic:{output}-dlq]] to:{output}]" {
		t.Errorf("the config given became %s", got)
	}
	o.Handler.Config = nil
	if ps, _, _ = o.pipelineSet([]string{"a"}, []string{"a-out"}); fmt.Sprint(ps[0].Handler.Config) != "map[output:a-out]" {
		t.Errorf("the default config %v, want map[output:a-out]", ps[0].Handler.Config)
	}
}

// Close ends the run whole: the client's goroutines and the embedded
// broker's are gone once it returns.
func TestCloseEndsEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{
		Client:         func(url string) (pool.Options, error) { return pool.Options{ServiceURL: url}, nil },
		ConnectTimeout: 30 * time.Second, CloseTimeout: 30 * time.Second, DrainTimeout: 30 * time.Second,
		Memory: true, Size: 100, Count: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	goleak.VerifyNone(t)
}
