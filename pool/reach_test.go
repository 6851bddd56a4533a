package pool

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// retryLog keeps what a client's retry hooks were told.
type retryLog struct {
	mu          sync.Mutex
	retries     []RetryEvent
	ends        []RetryEvent
	unreachable []bool
}

func (l *retryLog) hooks(o *Options) {
	o.OnRetry = func(e RetryEvent) {
		l.mu.Lock()
		l.retries = append(l.retries, e)
		l.unreachable = append(l.unreachable, e.Unreachable())
		l.mu.Unlock()
	}
	o.OnRetryEnd = func(e RetryEvent) {
		l.mu.Lock()
		l.ends = append(l.ends, e)
		l.mu.Unlock()
	}
}

// A broker that cannot be reached is retried with a warning, each retry
// told as unreachable, and the end of the retrying told once with how it
// ended; a broker that answers "not now" is retried at info level.
func TestRetriesOfAnUnreachableBrokerAreWarningsAndTheirEndIsTold(t *testing.T) {
	recs := &testkit.Records{}
	var l retryLog
	o := Options{ServiceURL: "pulsar://" + deadAddr(t), Logger: slog.New(recs.Handler(nil)),
		OperationRetries: OperationRetries{Attempts: 3, Delay: 10 * time.Millisecond}}
	l.hooks(&o)
	_, err := New(brokertest.Context(t, time.Minute), o)
	var re *RetryError
	if !errors.As(err, &re) {
		t.Fatalf("New: %v, want a *RetryError", err)
	}
	if n := recs.Count("retrying", "op=connect to pulsar://"); n != 2 {
		t.Fatalf("%d retry records, want 2:\n%s", n, recs)
	}
	if r, _ := recs.Find(func(r testkit.Record) bool { return r.Msg == "retrying" }); r.Level != slog.LevelWarn {
		t.Errorf("a retry of an unreachable broker at %v, want WARN", r.Level)
	}
	if len(l.retries) != 2 || l.unreachable[0] != true || l.unreachable[1] != true {
		t.Errorf("OnRetry told %+v (unreachable %v), want 2 unreachable", l.retries, l.unreachable)
	}
	if len(l.ends) != 1 || l.ends[0].Attempt != 2 || !errors.Is(l.ends[0].Err, ErrRetriesExhausted) {
		t.Errorf("OnRetryEnd told %+v, want once, after attempt 2, with the final error", l.ends)
	}

	// Answered "not now": info, and the end told with no error.
	tg := embeddedTarget(t)
	recs = &testkit.Records{}
	l = retryLog{}
	o = Options{OperationRetries: fastRetries, Logger: slog.New(recs.Handler(nil))}
	l.hooks(&o)
	c := newClient(t, tg, o)
	topic := brokertest.TopicName(t)
	brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_LOOKUP, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 2})
	if _, err := c.Publish(brokertest.Context(t, time.Minute), topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n := recs.Count("retrying", "ServiceNotReady"); n != 2 {
		t.Fatalf("%d retry records, want 2:\n%s", n, recs)
	}
	if r, _ := recs.Find(func(r testkit.Record) bool { return r.Msg == "retrying" }); r.Level != slog.LevelInfo {
		t.Errorf("a retry the broker asked for at %v, want INFO", r.Level)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.retries) != 2 || l.unreachable[0] || len(l.ends) != 1 || l.ends[0].Err != nil || l.ends[0].Attempt != 2 {
		t.Errorf("OnRetry told %+v (unreachable %v), OnRetryEnd %+v: want 2 answered, then one end without error", l.retries, l.unreachable, l.ends)
	}
}

// A failed connection says whether its address came from the service URL
// or from a lookup answer, a broker's advertised address.
func TestConnectErrorSaysWhetherTheAddressWasAdvertised(t *testing.T) {
	_, err := New(brokertest.Context(t, time.Minute), Options{ServiceURL: "pulsar://" + deadAddr(t),
		OperationRetries: OperationRetries{Attempts: 1, Delay: 10 * time.Millisecond}})
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Advertised {
		t.Fatalf("the service URL unreachable: %v (%+v), want a ConnectError not Advertised", err, ce)
	}

	tg := embeddedTarget(t, func(o *broker.Options) { o.AdvertisedHost = "other-host.invalid" })
	port := tg.URL[strings.LastIndex(tg.URL, ":"):]
	c := newClient(t, tg, Options{ServiceURL: "pulsar://127.0.0.1" + port, OperationRetries: OperationRetries{Attempts: 1, Delay: 10 * time.Millisecond}})
	_, err = c.Publish(brokertest.Context(t, time.Minute), brokertest.TopicName(t), Message{Payload: []byte("x")})
	if !errors.As(err, &ce) || !ce.Advertised || !strings.HasPrefix(ce.Addr, "other-host.invalid:") {
		t.Fatalf("the advertised host unreachable: %v (%+v), want a ConnectError to it, Advertised", err, ce)
	}
	if !strings.Contains(err.Error(), "this client cannot reach it: the broker's advertised host") {
		t.Errorf("the advertised host unreachable: %v, want what is most likely wrong", err)
	}
}
