package plugintest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/plugintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lifecycle records what the kit called.
type lifecycle struct {
	info   plugin.Info
	closed int
	seen   []*plugin.Message
}

func (l *lifecycle) Init(_ context.Context, info plugin.Info) error { l.info = info; return nil }
func (l *lifecycle) Close(context.Context) error                    { l.closed++; return nil }
func (l *lifecycle) Process(_ context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
	l.seen = append(l.seen, batch...)
	for _, m := range batch {
		switch string(m.Payload) {
		case "retry":
			w.Retry(m, 0, "not yet")
		}
	}
	return nil
}

func TestTheHandlerIsInitialisedClosedAndGivenWholeMessages(t *testing.T) {
	l := &lifecycle{}
	t.Run("inner", func(t *testing.T) {
		h := plugintest.New(t, l, plugintest.Options{Config: map[string]int{"n": 1}, Pipeline: "p"})
		if string(l.info.Config) != `{"n":1}` || l.info.Pipeline != "p" || l.info.InstanceID != "0" {
			t.Fatalf("Init got %+v", l.info)
		}
		own := &plugin.Message{ID: "9:9:-1:-1", Topic: "persistent://t/n/own", Payload: []byte("x")}
		a := h.Process(plugintest.Text("a"), own)
		b := h.Process(plugintest.Text("retry"))
		if a.Messages[0].ID != "1:0:-1:-1" || b.Messages[0].ID != "1:2:-1:-1" || own.ID != "9:9:-1:-1" {
			t.Errorf("ids %s %s %s: want 1:0, 1:2 and the message's own", a.Messages[0].ID, b.Messages[0].ID, own.ID)
		}
		if a.Messages[0].Topic != plugintest.DefaultTopic || own.Topic != "persistent://t/n/own" || a.Messages[0].PublishTime.IsZero() {
			t.Errorf("topics %q %q, publish time %v", a.Messages[0].Topic, own.Topic, a.Messages[0].PublishTime)
		}
		if a.Messages[1].Index() != 1 {
			t.Errorf("index %d, want 1", a.Messages[1].Index())
		}
		if b.Outcome(0) != plugin.OutcomeRetry || b.Reason(0) != "not yet" || a.Outcome(0) != plugin.OutcomeAck {
			t.Errorf("outcomes %v %v %q", a.Outcome(0), b.Outcome(0), b.Reason(0))
		}
		if l.closed != 0 {
			t.Error("closed before the test ended")
		}
	})
	if l.closed != 1 {
		t.Errorf("Close ran %d times, want once at the end of the test", l.closed)
	}
}

func TestAPanicIsAnsweredAsACrashNamingTheMessage(t *testing.T) {
	h := plugintest.New(t, plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		if string(m.Payload) == "boom" {
			panic("boom")
		}
		return nil, nil
	}), plugintest.Options{})
	a := h.Process(plugintest.Text("fine"), plugintest.Text("boom"))
	if a.Panic == nil || a.Panic.Index != 1 || a.Panic.Value != "boom" || a.Results != nil {
		t.Fatalf("answer %+v, panic %+v: want a panic on message 1", a, a.Panic)
	}
	if !strings.HasPrefix(a.String(), "panic: handler panicked on message 1 (1:1:-1:-1): boom") {
		t.Errorf("String() = %q", a.String())
	}
}

func TestABatchErrorRetriesEveryMessage(t *testing.T) {
	h := plugintest.New(t, plugin.HandlerFunc(func(context.Context, plugin.ResultWriter, []*plugin.Message) error {
		return errors.New("database down")
	}), plugintest.Options{})
	a := h.Process(plugintest.Text("a"), plugintest.Text("b"))
	for i := range 2 {
		if a.Outcome(i) != plugin.OutcomeRetry || a.Reason(i) != "batch failed: database down" {
			t.Errorf("message %d: %v %q", i, a.Outcome(i), a.Reason(i))
		}
	}
}

func TestAConfigThatDoesNotEncodeIsAnError(t *testing.T) {
	err := plugintest.Init(&lifecycle{}, plugintest.Options{Config: func() {}})
	if err == nil || !strings.Contains(err.Error(), "Options.Config") {
		t.Fatalf("err = %v", err)
	}
	if _, err := plugintest.Start(plugin.Configure(func(context.Context, struct{}) (plugin.Handler, error) {
		return nil, errors.New("no")
	}), plugintest.Options{}); err == nil || err.Error() != "Init: no" {
		t.Fatalf("Start: %v", err)
	}
}

// total keeps a running sum per key: the payload is an amount; "bad"
// is dead-lettered after it changed the state, "later" retried.
func total() plugin.Handler {
	return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		var sum int
		if _, err := m.State().GetJSON(&sum); err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(string(m.Payload))
		if err != nil {
			// Changed, then not acknowledged: the change must not count.
			_ = m.State().PutJSON(-1000)
			return nil, plugin.DeadLetter(err)
		}
		sum += n
		if err := m.State().PutJSON(sum); err != nil {
			return nil, err
		}
		return []plugin.Output{{Topic: "totals", Key: m.Key, Payload: []byte(strconv.Itoa(sum))}}, nil
	})
}

func keyed(key, payload string) *plugin.Message {
	return &plugin.Message{Key: key, Payload: []byte(payload)}
}

func TestKeyedStateIsSeededKeptAcrossBatchesAndOnlyAcknowledgedChangesCount(t *testing.T) {
	h := plugintest.New(t, total(), plugintest.Options{State: map[string][]byte{"a": []byte("10")}})
	a := h.Process(keyed("a", "1"), keyed("b", "2"), keyed("a", "x"), keyed("a", "3"))
	if got := a.String(); got != `0 ack
  -> totals key="a" payload="11"
  state "a" = "11"
1 ack
  -> totals key="b" payload="2"
  state "b" = "2"
2 dead-letter "strconv.Atoi: parsing \"x\": invalid syntax"
3 ack
  -> totals key="a" payload="14"
  state "a" = "14"
` {
		t.Errorf("answer:\n%s", got)
	}
	if c := a.StateChange(2); c != nil {
		t.Errorf("the dead-lettered message's change %+v kept", c)
	}
	b := h.Process(keyed("b", "5"), keyed("a", "1"))
	if string(b.Outputs()[0].Payload) != "7" || string(b.Outputs()[1].Payload) != "15" {
		t.Errorf("second batch did not start from the first's state:\n%s", b)
	}
	st := h.State()
	if len(st) != 2 || string(st["a"]) != "15" || string(st["b"]) != "7" {
		t.Errorf("State() = %q, want a=15 b=7", st)
	}
	st["a"] = []byte("0") // a copy: the kit's state is not the caller's
	if string(h.State()["a"]) != "15" {
		t.Error("State() handed out the kit's own map")
	}
}

func TestWithoutStateAPutFailsAsInAPipelineWithout(t *testing.T) {
	h := plugintest.New(t, total(), plugintest.Options{})
	a := h.Process(keyed("a", "1"))
	if a.Outcome(0) != plugin.OutcomeRetry || !strings.Contains(a.Reason(0), plugin.ErrNoState.Error()) {
		t.Errorf("answer %s: want a retry for no keyed state", a)
	}
	if h.State() != nil {
		t.Errorf("State() = %v, want nil", h.State())
	}
}

func TestADeleteRemovesTheKey(t *testing.T) {
	h := plugintest.New(t, plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		return nil, m.State().Delete()
	}), plugintest.Options{State: map[string][]byte{"a": []byte("1"), "b": []byte("2")}})
	a := h.Process(keyed("a", ""))
	if c := a.StateChange(0); c == nil || !c.Delete || c.Key != "a" {
		t.Errorf("change %+v, want a's delete", c)
	}
	if !strings.Contains(a.String(), `state "a" deleted`) {
		t.Errorf("String():\n%s", a)
	}
	if st := h.State(); len(st) != 1 || string(st["b"]) != "2" {
		t.Errorf("State() = %q, want only b", st)
	}
}
