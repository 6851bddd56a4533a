package runtime_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// Handlers that answer wrongly, in a running pipeline: through the public
// SDK, and on the wire (a result missing or extra, which the SDK cannot
// write: rawHandler). The host refuses a wrong answer on the wire
// (plugin/host's TestWrongAnswersAreErrorsNamingTheMessage has every
// kind); the runtime handles the refusal as a failure of the batch that
// names no message: retried, split, the culprit dead-lettered alone.

// A handler that answers about a message that is not in its batch fails
// that batch: it is delivered again, and every message reaches the output,
// none dead-lettered, none acknowledged without its output.
func TestAnAnswerAboutAnotherMessageRetriesTheBatch(t *testing.T) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
	const n = 60
	payload := func(i int) string {
		if i%10 == 3 {
			return fmt.Sprintf("stale:%d", i)
		}
		return fmt.Sprintf("plain:%d", i)
	}
	publish(t, cl, in, n, payload, nil)
	outs, dead := collect(t, cl, out), collect(t, cl, dlq)
	logs := &brokertest.SyncBuffer{}
	r := runHost(t, c, streamrun.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, pipelines.Pipeline{
		Name:    "stale",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "stale", InitialPosition: pipelines.Earliest},
		Handler: self(testConfig{Output: out, MarkerDir: t.TempDir()}),
		ErrorPolicy: pipelines.ErrorPolicy{
			MaxRetries: 5, DeadLetterTopic: dlq,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		},
	})
	outs.waitLen(t, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("stale").Acked == n && c.Backlog(in, "stale") == 0 })
	var want []string
	for i := range n {
		want = append(want, payload(i))
	}
	got := outs.payloads()
	slices.Sort(got)
	got = slices.Compact(got) // a failed batch's others may come out twice
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %q\nwant %q", got, want)
	}
	if !strings.Contains(logs.String(), "which is not in this batch") {
		t.Errorf("the logs do not say why the batch was retried:\n%s", logs.String())
	}
	s := r.stats("stale")
	if s.Retried < n/10 || s.DeadLettered != 0 || len(dead.all()) != 0 {
		t.Errorf("stats %+v, dead letters %d: want at least %d retried, none dead-lettered", s, len(dead.all()), n/10)
	}
}

// An output larger than the broker takes cannot be published: its message
// is retried, then dead-lettered with a reason saying why, and only then
// acknowledged; the other messages flow as usual.
func TestAnOversizedOutputIsRetriedThenDeadLettered(t *testing.T) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
	payloads := []string{"plain-1", "huge:2", "plain-3"}
	publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
	outs, dead := collect(t, cl, out), collect(t, cl, dlq)
	r := runHost(t, c, streamrun.Options{Logger: testLogger(t, slog.LevelError)}, pipelines.Pipeline{
		Name:    "huge",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "huge", InitialPosition: pipelines.Earliest},
		Handler: self(testConfig{Output: out}),
		ErrorPolicy: pipelines.ErrorPolicy{
			MaxRetries: 2, DeadLetterTopic: dlq,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		},
	})
	d := dead.waitLen(t, 1)[0]
	if string(d.Payload) != "huge:2" || !strings.Contains(d.Properties[streamrun.PropertyDeadLetterReason], "publishing an output failed") {
		t.Errorf("dead letter %q, reason %q", d.Payload, d.Properties[streamrun.PropertyDeadLetterReason])
	}
	t.Logf("dead-letter reason: %s", d.Properties[streamrun.PropertyDeadLetterReason])
	waitFor(t, "everything settled", func() bool {
		s := r.stats("huge")
		return s.Acked == 2 && s.DeadLettered == 1 && c.Backlog(in, "huge") == 0
	})
	got := outs.payloads()
	slices.Sort(got)
	if want := []string{"plain-1", "plain-3"}; !slices.Equal(got, want) {
		t.Errorf("outputs %q, want %q", got, want)
	}
	if s := r.stats("huge"); s.Retried != 2 {
		t.Errorf("%d retries, want 2 (%+v)", s.Retried, s)
	}
}

// A handler that answers a batch with no result for one of its messages
// (written on the generated code: the SDK cannot) has its answer refused
// by the host, which names the problem; nothing of that batch is
// published. The batch is retried, split, and the message is
// dead-lettered alone with the host's error as its reason; every other
// message reaches the output once.
func TestAnAnswerMissingAResultLosesNothing(t *testing.T) {
	wrongAnswerLosesNothing(t, "missing", "0 results for a batch of 1 messages")
}

// A handler that answers a batch with two results for one of its
// messages, one more than the batch has messages: as with one missing,
// the host refuses the answer, the batch is retried and split, the
// message dead-lettered with the reason, the others published once.
func TestAnAnswerWithAnExtraResultLosesNothing(t *testing.T) {
	wrongAnswerLosesNothing(t, "twice", "2 results for a batch of 1 messages")
}

// wrongAnswerLosesNothing runs 12 messages, the 6th of which rawHandler
// answers wrongly as mode says, through a pipeline, and checks that
// the host logs its refusal naming the plugin and the problem, that the
// 6th is dead-lettered with a reason ending in problem (the message
// alone in its batch), and that the 11 others reach the output exactly
// once, every input acknowledged.
func wrongAnswerLosesNothing(t *testing.T, mode, problem string) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
	const n, bad = 12, 5
	payload := func(i int) string {
		if i == bad {
			return fmt.Sprintf("%s:%d", mode, i)
		}
		return fmt.Sprintf("plain:%d", i)
	}
	publish(t, cl, in, n, payload, nil)
	outs, dead := collect(t, cl, out), collect(t, cl, dlq)
	logs := &brokertest.SyncBuffer{}
	r := runHost(t, c, streamrun.Options{
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Restart: streamrun.RestartPolicy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
	}, pipelines.Pipeline{
		Name:    mode,
		Source:  pipelines.Source{Topics: []string{in}, Subscription: mode, InitialPosition: pipelines.Earliest},
		Handler: rawSelf(out),
		ErrorPolicy: pipelines.ErrorPolicy{
			MaxRetries: 5, DeadLetterTopic: dlq,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		},
	})
	d := dead.waitLen(t, 1)[0]
	reason := d.Properties[streamrun.PropertyDeadLetterReason]
	t.Logf("dead-letter reason: %s", reason)
	if string(d.Payload) != payload(bad) || !strings.Contains(reason, "answered wrongly: "+problem) {
		t.Errorf("dead letter %q, reason %q: want %q, its reason naming %q", d.Payload, reason, payload(bad), problem)
	}
	waitFor(t, "everything settled", func() bool {
		s := r.stats(mode)
		return s.Acked == n-1 && s.DeadLettered == 1 && c.Backlog(in, mode) == 0
	})
	outs.waitLen(t, n-1)
	var want []string
	for i := range n {
		if i != bad {
			want = append(want, payload(i))
		}
	}
	got := outs.payloads()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("outputs %q\nwant %q (each once)", got, want)
	}
	if !strings.Contains(logs.String(), "answered wrongly") || !strings.Contains(logs.String(), "results for a batch of") {
		t.Errorf("the logs do not say why the batch failed:\n%s", logs.String())
	}
	if len(dead.all()) != 1 {
		t.Errorf("%d dead letters, want 1", len(dead.all()))
	}
}
