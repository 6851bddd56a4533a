package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// These run against either broker: the embedded one, or Apache Pulsar
// when STREAMRUN_PULSAR_URL is set (brokertest.Target).

// stepsPeer is the broker of a steps test and a client of it.
func stepsPeer(t *testing.T) (url string, fresh func(what string) string) {
	t.Helper()
	p := brokertest.Target(t)
	base := brokertest.TopicName(t)
	return p.URL, func(what string) string { return base + "-" + what }
}

// order is an order as the tests publish it.
type order struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Country  string   `json:"country,omitempty"`
	Amount   *float64 `json:"amount,omitempty"`
	Seq      int      `json:"seq"`
}

func amount(f float64) *float64 { return &f }

// TestStepsAloneRouteOrders: a pipeline with steps and no handler, on
// Key_Shared with two instances, over orders of every kind: each step
// does what it says, every input is settled (published and
// acknowledged, filtered or dead-lettered), nothing twice, each
// customer's orders in order, and each step's counts add up.
func TestStepsAloneRouteOrders(t *testing.T) {
	url, fresh := stepsPeer(t)
	cl := clientURL(t, url)
	in, de, other := fresh("orders"), fresh("de"), fresh("other")
	dlq := in + "-route-DLQ"
	outDE, outOther, outDLQ := collect(t, cl, de), collect(t, cl, other), collect(t, cl, dlq)

	const n = 600
	want := map[string]int{}
	payload := func(i int) string {
		o := order{ID: fmt.Sprint("o", i), Customer: fmt.Sprint("c", i%7), Seq: i}
		switch i % 6 {
		case 0:
			o.Country, o.Amount = "DE", amount(float64(i))
			want["de"]++
		case 1, 2:
			o.Country, o.Amount = "FR", amount(float64(i)+0.5)
			want["other"]++
		case 3:
			o.Country, o.Amount = "DE", amount(-1)
			want["filtered"]++
		case 4:
			o.Amount = amount(3) // no country
			want["dlq"]++
		case 5:
			if i%12 == 5 {
				return "not json" // an error at run time: dead-lettered
			}
			o.Country = "DE" // no amount: an error at run time
			want["dlq"]++
			return mustJSON(t, o)
		}
		return mustJSON(t, o)
	}
	for i := range n {
		if i%6 == 5 && i%12 == 5 {
			want["dlq"]++
		}
	}
	publish(t, cl, in, n, payload, func(i int) string { return fmt.Sprint("c", i%7) })

	p := pipelines.Pipeline{
		Name:    "route",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "route", Type: pipelines.KeyShared, InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Instances: 2, BatchSize: 16},
		Outputs: []string{other},
		Steps: []pipelines.Step{
			{Name: "positive", Filter: "json.amount >= 0"},
			{Name: "has-country", DeadLetterIf: `!has(json.country)`, Reason: `"no country in " + json.id`},
			{Name: "reshape", Map: &pipelines.MapStep{
				Payload:    `{"id": json.id, "seq": json.seq, "amount": json.amount}`,
				Key:        `json.customer`,
				Properties: map[string]string{"country": `json.country`},
			}},
			{Name: "by-country", Route: &pipelines.RouteStep{To: fmt.Sprintf(`properties.country == "DE" ? %q : ""`, de), Default: other}},
		},
	}
	r := runHost(t, nil, streamrun.Options{Pool: poolOptsURL(url)}, p)
	waitFor(t, "every order settled", func() bool {
		s := r.stats("route")
		return s.Acked+s.Filtered+s.DeadLettered == n
	})
	gotDE, gotOther, gotDLQ := outDE.waitLen(t, want["de"]), outOther.waitLen(t, want["other"]), outDLQ.waitLen(t, want["dlq"])
	s := r.stats("route")
	if s.Acked != int64(want["de"]+want["other"]) || s.Filtered != int64(want["filtered"]) || s.DeadLettered != int64(want["dlq"]) {
		t.Errorf("stats %+v, want %v", s, want)
	}
	lastSeq := map[string]int{}
	for _, m := range append(gotDE, gotOther...) {
		var o order
		if err := json.Unmarshal(m.Payload, &o); err != nil {
			t.Fatalf("output %q: %v", m.Payload, err)
		}
		if o.Customer != "" || o.Amount == nil || *o.Amount < 0 {
			t.Errorf("output %s is not the map's", m.Payload)
		}
		if m.Key != fmt.Sprint("c", o.Seq%7) || m.Properties["country"] == "" {
			t.Errorf("output %s: key %q, properties %v", m.Payload, m.Key, m.Properties)
		}
		if prev, ok := lastSeq[m.Topic+m.Key]; ok && prev >= o.Seq {
			t.Errorf("customer %s on %s: order %d after %d", m.Key, m.Topic, o.Seq, prev)
		}
		lastSeq[m.Topic+m.Key] = o.Seq
	}
	for _, m := range gotDE {
		if m.Properties["country"] != "DE" {
			t.Errorf("%s routed to %s", m.Payload, de)
		}
	}
	reasons := map[string]int{}
	for _, m := range gotDLQ {
		r := m.Properties[streamrun.PropertyDeadLetterReason]
		switch {
		case strings.HasPrefix(r, "no country in o"):
			reasons["dead_letter_if"]++
		case strings.HasPrefix(r, "step positive: no such key: amount"):
			reasons["missing field"]++
		case strings.HasPrefix(r, "step positive: the payload is not JSON"):
			reasons["not json"]++
		default:
			t.Errorf("dead letter %q: reason %q", m.Payload, r)
		}
	}
	if reasons["dead_letter_if"] != n/6 || reasons["not json"] != n/12 || reasons["missing field"] != n/12 {
		t.Errorf("dead-letter reasons %v", reasons)
	}
	steps := s.Steps
	if len(steps) != 4 || steps[0].In != n || steps[0].Filtered != int64(want["filtered"]) || steps[0].Errors != int64(n/6) ||
		steps[1].DeadLettered != int64(n/6) || steps[3].Out != int64(want["de"]+want["other"]) {
		t.Errorf("step stats %+v", steps)
	}
	for what, c := range map[string]*collector{"de": outDE, "other": outOther, "dlq": outDLQ} {
		if got := c.len(); got != want[what] {
			t.Errorf("%s: %d messages, want %d", what, got, want[what])
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func poolOptsURL(url string) pool.Options { return pool.Options{ServiceURL: url} }

// TestStepsAroundAPluginAndAReloadOfAStep: steps before a plugin handler
// (a filter, a map the plugin sees) and after it (a route and a filter
// of its outputs, a dead letter of the input), with run-time errors
// that drop, skip and dead-letter as each step says, and an expression
// stopped at the cost limit. Then a reload that changes a step: the
// pipeline drains and runs on with the new step, the handler's plugin
// processes the same (same pids), nothing lost.
func TestStepsAroundAPluginAndAReloadOfAStep(t *testing.T) {
	url, fresh := stepsPeer(t)
	cl := clientURL(t, url)
	in, out, loud, dlq := fresh("in"), fresh("out"), fresh("loud"), fresh("dlq")
	outC, loudC, dlqC := collect(t, cl, out), collect(t, cl, loud), collect(t, cl, dlq)

	h := self(testConfig{Output: out}) // echoes each message to out
	h.Instances = 2
	pipe := func(skipPrefix string) pipelines.Pipeline {
		return pipelines.Pipeline{
			Name:        "around",
			Source:      pipelines.Source{Topics: []string{in}, Subscription: "around", InitialPosition: pipelines.Earliest},
			Handler:     h,
			Outputs:     []string{out},
			ErrorPolicy: pipelines.ErrorPolicy{DeadLetterTopic: dlq},
			Steps: []pipelines.Step{
				{Name: "skip", Filter: fmt.Sprintf("!text.startsWith(%q)", skipPrefix)},
				// properties.n is missing on some: those are dropped.
				{Name: "tag", OnError: "drop", Map: &pipelines.MapStep{Properties: map[string]string{"n2": `properties.n + properties.n`}}},
				// json is only there on some: the others go on unchanged.
				{Name: "shout", OnError: "skip", Map: &pipelines.MapStep{Payload: `json.loud ? text.upperAscii() : text`}},
				// Pairs of every word with every word of a long text: the
				// cost limit stops it, and the message is dead-lettered.
				{Name: "costly", Filter: `text.size() < 2000 || text.split(" ").map(a, text.split(" ").map(b, a + b)).size() > 0`},
				{Handler: true},
				{Name: "loud", Route: &pipelines.RouteStep{To: fmt.Sprintf(`text.startsWith("{\"LOUD\"") ? %q : ""`, loud)}},
				{Name: "no-secrets", DeadLetterIf: `text.contains("secret")`, Reason: `"a secret in the output"`},
			},
		}
	}
	r := runHost(t, nil, streamrun.Options{Pool: poolOptsURL(url)}, pipe("skip"))
	before := pids(r, "around")

	var want = map[string]int{}
	kinds := []string{"skip", "plain", "loud", "no-n", "secret", "costly"}
	publishKinds := func(round string, count int) {
		for i := range count {
			kind := kinds[i%len(kinds)]
			m := poolMessage(kind, round, i)
			publishOne(t, cl, in, m)
			want[round+"/"+kind]++
		}
	}
	publishKinds("a", 60)
	waitFor(t, "round a settled", func() bool { s := r.stats("around"); return settled(s) == 60 })
	s := r.stats("around")
	if s.Filtered != 10 || s.Dropped != 10 || s.DeadLettered != 20 || s.Acked != 20 {
		t.Errorf("round a: %+v", s)
	}
	outC.waitLen(t, 10)
	loudC.waitLen(t, 10)
	dlqC.waitLen(t, 20)
	for _, m := range loudC.all() {
		if !strings.HasPrefix(string(m.Payload), `{"LOUD"`) || m.Properties["n2"] != "11" {
			t.Errorf("loud output %q %v", m.Payload, m.Properties)
		}
	}
	reasons := map[string]bool{}
	for _, m := range dlqC.all() {
		reasons[m.Properties[streamrun.PropertyDeadLetterReason]] = true
	}
	if !reasons["a secret in the output"] || !reasons["step costly: the expression reached its cost limit"] || len(reasons) != 2 {
		t.Errorf("dead-letter reasons %v", reasons)
	}

	// A changed step: now "plain" messages are skipped, "skip" ones go on.
	ctx := testContext(t)
	if err := r.host.Reload(ctx, pipe("plain")); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if after := pids(r, "around"); fmt.Sprint(after) != fmt.Sprint(before) || before[0] == 0 {
		t.Errorf("the handler's processes changed: %v, then %v", before, after)
	}
	publishKinds("b", 60)
	waitFor(t, "round b settled", func() bool { return settled(r.stats("around")) == 120 })
	got := map[string]int{}
	for _, m := range outC.waitLen(t, 20) {
		got[string(m.Payload)[:1]]++
	}
	if got["b"] != 10 || got["p"] != 10 || len(got) != 2 {
		t.Errorf("after the reload, outputs by first letter %v: want the 'skip' kind through (b...) and 'plain' filtered", got)
	}
}

// settled counts what became of a pipeline's messages.
func settled(s streamrun.Stats) int64 { return s.Acked + s.Filtered + s.Dropped + s.DeadLettered }

// poolMessage is a message of the given kind for the around test.
func poolMessage(kind, round string, i int) pool.Message {
	m := pool.Message{Properties: map[string]string{"n": "1"}}
	switch kind {
	case "skip":
		m.Payload = []byte(fmt.Sprintf("skip %s %d", round, i))
	case "plain":
		m.Payload = []byte(fmt.Sprintf("plain %s %d", round, i))
	case "loud":
		m.Payload = []byte(`{"loud": true}`)
	case "no-n":
		m.Payload, m.Properties = []byte(fmt.Sprintf("no-n %s %d", round, i)), nil
	case "secret":
		m.Payload = []byte(fmt.Sprintf("a secret %s %d", round, i))
	case "costly":
		m.Payload = []byte(strings.Repeat("word ", 1000))
	}
	if kind == "skip" && round == "b" {
		m.Payload = []byte(fmt.Sprintf("b-skip %d", i))
	}
	return m
}

func publishOne(t testing.TB, cl *pool.Client, topic string, m pool.Message) {
	t.Helper()
	ctx := testContext(t)
	if _, err := cl.Publish(ctx, topic, m); err != nil {
		t.Fatalf("publish to %s: %v", topic, err)
	}
}
