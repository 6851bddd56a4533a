package steps

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// chainOf compiles steps given as kind and expressions, the way a
// pipeline file would.
func mustCompile(t testing.TB, env *Env, src string, want Want) *Expr {
	t.Helper()
	x, err := env.Compile(src, want)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return x
}

type id string

func (i id) String() string { return string(i) }

func order(payload string) *Message {
	return &Message{
		Payload: []byte(payload), Key: "c1", Properties: map[string]string{"region": "eu"},
		Topic: "persistent://public/default/orders", PublishTime: time.UnixMilli(1_700_000_000_000),
		ID: id("7:3:-1:0"), RedeliveryCount: 2,
	}
}

func TestFilterKeepsWhatItsConditionAccepts(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{{Name: "positive", Kind: Filter, If: mustCompile(t, env, `json.amount >= 0`, WantBool)}})
	r := c.NewRunner()
	if v := r.Run(order(`{"amount": 5}`)); v.Outcome != Pass {
		t.Errorf("amount 5: %+v, want it passed", v)
	}
	if v := r.Run(order(`{"amount": -1}`)); v.Outcome != Filtered || v.Step != 0 {
		t.Errorf("amount -1: %+v, want it filtered by step 0", v)
	}
	r.Flush()
	if got := c.Totals()[0]; got != (Counts{In: 2, Out: 1, Filtered: 1}) {
		t.Errorf("totals %+v", got)
	}
}

func TestMapSetsEveryFieldFromTheMessageBeforeIt(t *testing.T) {
	env := newTestEnv(t, Options{})
	set := []Assign{
		{Field: FieldPayload, Expr: mustCompile(t, env, `{"id": json.id, "total": json.amount * 2.0, "from": key}`, WantPayload)},
		{Field: FieldKey, Expr: mustCompile(t, env, `json.id`, WantString)},
		{Field: FieldOrderingKey, Expr: mustCompile(t, env, `properties.region`, WantString)},
		{Field: FieldEventTime, Expr: mustCompile(t, env, `publish_time + duration("1s")`, WantTime)},
		{Field: FieldProperty, Name: "seen", Expr: mustCompile(t, env, `message_id + "/" + string(redelivery_count)`, WantString)},
	}
	c := NewChain(env, []Step{{Name: "reshape", Kind: Map, Set: set}})
	m := order(`{"id": "o1", "amount": 2.5}`)
	props := m.Properties
	v := c.NewRunner().Run(m)
	if v.Outcome != Pass {
		t.Fatalf("%+v", v)
	}
	if got := string(m.Payload); got != `{"from":"c1","id":"o1","total":5}` {
		t.Errorf("payload %s", got)
	}
	if m.Key != "o1" || m.OrderingKey != "eu" || !m.EventTime.Equal(time.UnixMilli(1_700_000_001_000)) {
		t.Errorf("key %q, ordering key %q, event time %v", m.Key, m.OrderingKey, m.EventTime)
	}
	if m.Properties["seen"] != "7:3:-1:0/2" || m.Properties["region"] != "eu" {
		t.Errorf("properties %v", m.Properties)
	}
	if len(props) != 1 {
		t.Errorf("the message's own properties were written: %v", props)
	}
}

func TestTextAndJSONFollowTheMappedPayload(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{
		{Name: "json-before", Kind: Filter, If: mustCompile(t, env, `json.n == 1`, WantBool)},
		{Name: "shout", Kind: Map, Set: []Assign{{Field: FieldPayload, Expr: mustCompile(t, env, `text.upperAscii()`, WantPayload)}}},
		{Name: "text-after", Kind: Filter, If: mustCompile(t, env, `text == "{\"N\": 1}"`, WantBool)},
	})
	m := order(`{"n": 1}`)
	if v := c.NewRunner().Run(m); v.Outcome != Pass {
		t.Fatalf("%+v: the text after the map is not the mapped payload's", v)
	}
}

func TestRouteChoosesATopicOrTheDefault(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{{Name: "by-region", Kind: Route,
		To: mustCompile(t, env, `properties.region == "eu" ? topic + "-eu" : ""`, WantString), Default: "orders-other"}})
	r := c.NewRunner()
	if v := r.Run(order(`{}`)); v.Topic != "persistent://public/default/orders-eu" {
		t.Errorf("eu: topic %q", v.Topic)
	}
	m := order(`{}`)
	m.Properties = nil
	if v := r.Run(m); v.Outcome != DeadLetter || !strings.Contains(v.Reason, "no such key: region") {
		t.Errorf("no region: %+v, want a dead letter naming the missing key", v)
	}
	m.Properties = map[string]string{"region": "us"}
	if v := r.Run(m); v.Topic != "orders-other" {
		t.Errorf("us: topic %q, want the default", v.Topic)
	}
}

func TestDeadLetterIfGivesItsReason(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{
		{Name: "negative", Kind: DeadLetterIf, If: mustCompile(t, env, `json.amount < 0`, WantBool),
			Reason: mustCompile(t, env, `"negative amount " + string(json.amount)`, WantString)},
		{Name: "plain", Kind: DeadLetterIf, If: mustCompile(t, env, `key == ""`, WantBool)},
	})
	r := c.NewRunner()
	if v := r.Run(order(`{"amount": -3}`)); v.Outcome != DeadLetter || v.Reason != "negative amount -3" || v.Step != 0 {
		t.Errorf("%+v", v)
	}
	m := order(`{"amount": 3}`)
	m.Key = ""
	if v := r.Run(m); v.Outcome != DeadLetter || v.Reason != "dead_letter_if plain" || v.Step != 1 {
		t.Errorf("%+v", v)
	}
	r.Flush()
	if got := c.Totals(); got[0].DeadLettered != 1 || got[1].DeadLettered != 1 || got[0].Out != 1 {
		t.Errorf("totals %+v", got)
	}
}

func TestARunTimeErrorIsTheOutcomeItsStepSays(t *testing.T) {
	env := newTestEnv(t, Options{})
	cond := func() *Expr { return mustCompile(t, env, `json.amount >= 0`, WantBool) }
	for _, tc := range []struct {
		payload string
		onError OnError
		want    Outcome
		reason  string
	}{
		{`{"total": 1}`, ErrorDeadLetter, DeadLetter, "step check: no such key: amount"},
		{`{"amount": "1"}`, ErrorDeadLetter, DeadLetter, "step check: no such overload"},
		{`not json`, ErrorDeadLetter, DeadLetter, "step check: the payload is not JSON"},
		{`{"total": 1}`, ErrorDrop, Dropped, ""},
		{`{"total": 1}`, ErrorSkip, Pass, ""},
	} {
		c := NewChain(env, []Step{{Name: "check", Kind: Filter, If: cond(), OnError: tc.onError}})
		r := c.NewRunner()
		v := r.Run(order(tc.payload))
		if v.Outcome != tc.want || !strings.HasPrefix(v.Reason, tc.reason) || v.Err == nil {
			t.Errorf("%s, on error %v: %+v; want %v, reason %q...", tc.payload, tc.onError, v, tc.want, tc.reason)
		}
		r.Flush()
		if n := c.Totals()[0].Errors; n != 1 {
			t.Errorf("%s: errors counted %d", tc.payload, n)
		}
	}
}

func TestTextOfAPayloadThatIsNotUTF8IsAnError(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{{Name: "t", Kind: Filter, If: mustCompile(t, env, `text != ""`, WantBool)}})
	if v := c.NewRunner().Run(order("\xff\xfe")); v.Outcome != DeadLetter || !strings.Contains(v.Reason, "not UTF-8") {
		t.Errorf("%+v", v)
	}
	// payload itself is fine.
	c = NewChain(env, []Step{{Name: "b", Kind: Filter, If: mustCompile(t, env, `size(payload) == 2`, WantBool)}})
	if v := c.NewRunner().Run(order("\xff\xfe")); v.Outcome != Pass {
		t.Errorf("%+v", v)
	}
}

func TestAMapThatFailsSetsNothing(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{{Name: "m", Kind: Map, OnError: ErrorSkip, Set: []Assign{
		{Field: FieldKey, Expr: mustCompile(t, env, `"new"`, WantString)},
		{Field: FieldPayload, Expr: mustCompile(t, env, `json.missing`, WantPayload)},
	}}})
	m := order(`{}`)
	v := c.NewRunner().Run(m)
	if v.Outcome != Pass || m.Key != "c1" || !strings.Contains(v.Err.Error(), "payload: no such key: missing") {
		t.Errorf("%+v, key %q", v, m.Key)
	}
}

func TestADynValueOfTheWrongTypeIsAnError(t *testing.T) {
	env := newTestEnv(t, Options{})
	c := NewChain(env, []Step{{Name: "k", Kind: Map, Set: []Assign{{Field: FieldKey, Expr: mustCompile(t, env, `json.n`, WantString)}}}})
	if v := c.NewRunner().Run(order(`{"n": 1}`)); v.Outcome != DeadLetter || !strings.Contains(v.Reason, "key: gave double, want a string") {
		t.Errorf("%+v", v)
	}
}

func TestTheCostLimitStopsAPathologicalExpression(t *testing.T) {
	env := newTestEnv(t, Options{CostLimit: 100_000})
	// Every pair of words of the text: far more than 100,000 operations
	// for a payload of a few hundred words.
	x := mustCompile(t, env, `text.split(" ").map(a, text.split(" ").map(b, a + b)).size() == 0`, WantBool)
	if x.Bounded() {
		t.Fatalf("a cubic expression is estimated within the limit: %d", x.Estimate())
	}
	c := NewChain(env, []Step{{Name: "slow", Kind: Filter, If: x}})
	words := strings.Repeat("word ", 300)
	t0 := time.Now()
	v := c.NewRunner().Run(order(words))
	took := time.Since(t0)
	if v.Outcome != DeadLetter || !errors.Is(v.Err, ErrCostLimit) {
		t.Fatalf("%+v, want a dead letter for the cost limit", v)
	}
	t.Logf("stopped after %v: %s", took, v.Reason)
	// Short messages are within the limit.
	if v := c.NewRunner().Run(order("a b")); v.Outcome != Filtered {
		t.Errorf("short: %+v", v)
	}
}

func TestALargeMessageRunsUnderTheTracker(t *testing.T) {
	env := newTestEnv(t, Options{MaxSize: 16, CostLimit: 1000})
	x := mustCompile(t, env, `text.upperAscii() != ""`, WantBool)
	if !x.Bounded() {
		t.Fatalf("estimate %d", x.Estimate())
	}
	c := NewChain(env, []Step{{Name: "up", Kind: Filter, If: x}})
	if v := c.NewRunner().Run(order("small")); v.Outcome != Pass {
		t.Errorf("small: %+v", v)
	}
	if v := c.NewRunner().Run(order(strings.Repeat("x", 5000))); !errors.Is(v.Err, ErrCostLimit) {
		t.Errorf("large: %+v, want the cost limit", v)
	}
}
