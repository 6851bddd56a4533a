package testkit

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNamesAreFreshAndSafeForTopics(t *testing.T) {
	a, b := Name(t), Name(t)
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if !strings.HasPrefix(a, "testnamesarefreshandsafefortopics-") {
		t.Fatalf("name %q does not start with the test's", a)
	}
	if topic := TopicName(t); !strings.HasPrefix(topic, "persistent://public/default/testnames") {
		t.Fatalf("topic %q", topic)
	}
}

func TestRecordsKeepWhatIsLoggedAndWaitForIt(t *testing.T) {
	var recs Records
	var out SyncBuffer
	logger := slog.New(recs.Handler(slog.NewTextHandler(&out, nil))).With("component", "test")
	go logger.Warn("retrying", "err", errors.New("ConsumerBusy"))
	r := recs.Wait(t, 10*time.Second, "retrying", map[string]string{"component": "test"})
	if r.Level != slog.LevelWarn || r.Attrs["err"] != "ConsumerBusy" {
		t.Fatalf("record %+v", r)
	}
	if n := recs.Count("retrying", "ConsumerBusy"); n != 1 {
		t.Fatalf("counted %d", n)
	}
	logger.Debug("below the next handler's level")
	if _, ok := recs.Find(func(r Record) bool { return r.Msg == "below the next handler's level" }); ok {
		t.Fatal("kept a record the next handler does not want")
	}
	if !strings.Contains(out.String(), "component=test") {
		t.Fatalf("not passed on: %q", out.String())
	}
}
