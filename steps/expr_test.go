package steps

import (
	"errors"
	"strings"
	"testing"
)

func newTestEnv(t testing.TB, opts Options) *Env {
	t.Helper()
	env, err := NewEnv(opts)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestCompileReportsProblemsAtTheirOffset(t *testing.T) {
	env := newTestEnv(t, Options{})
	for _, tc := range []struct {
		src    string
		want   Want
		offset int
		msg    string
	}{
		{`json.amount >= 0 && foo.bar`, WantBool, 20, "undeclared reference to 'foo'"},
		{"json.amount >= 0 &&\n  foo.bar", WantBool, 22, "undeclared reference to 'foo'"},
		{`json.amount >= (`, WantBool, 16, "Syntax error"},
		{`"é" + nope`, WantString, 6, "undeclared reference to 'nope'"},
		{`size(payload)`, WantBool, 0, "gives an int, want a bool"},
		{`key == 1`, WantBool, 4, "found no matching overload for '_==_'"},
		{`  `, WantBool, 0, "empty expression"},
		{`payload`, WantTime, 0, "gives a bytes, want a timestamp"},
	} {
		_, err := env.Compile(tc.src, tc.want)
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("%q: err = %v, want a *CompileError", tc.src, err)
		}
		p := ce.Problems[0]
		if p.Offset != tc.offset || !strings.Contains(p.Msg, tc.msg) {
			t.Errorf("%q: first problem at %d: %q; want at %d: ...%q...", tc.src, p.Offset, p.Msg, tc.offset, tc.msg)
		}
	}
}

func TestCompileAcceptsWhatEachFieldTakes(t *testing.T) {
	env := newTestEnv(t, Options{})
	for _, tc := range []struct {
		src  string
		want Want
	}{
		{`json.amount >= 0`, WantBool},
		{`json.ok`, WantBool}, // dyn: checked at run time
		{`text.upperAscii()`, WantPayload},
		{`payload`, WantPayload},
		{`{"id": json.id, "n": 1}`, WantPayload},
		{`[1, 2]`, WantPayload},
		{`publish_time`, WantTime},
		{`1700000000000`, WantTime},
		{`topic + "-out"`, WantString},
		{`properties["region"]`, WantString},
		{`message_id + ":" + string(redelivery_count)`, WantString},
		{`base64.encode(payload)`, WantString},
	} {
		if _, err := env.Compile(tc.src, tc.want); err != nil {
			t.Errorf("%q as %v: %v", tc.src, tc.want, err)
		}
	}
}

func TestBoundedExpressionsRunWithoutTheTracker(t *testing.T) {
	env := newTestEnv(t, Options{})
	for _, tc := range []struct {
		src     string
		want    Want
		bounded bool
	}{
		{`key != "drop"`, WantBool, true},
		{`json.amount >= 0`, WantBool, true},
		{`text.upperAscii()`, WantPayload, true},
		{`topic + "-out"`, WantString, true},
		{`json.items.all(i, i.qty > 0)`, WantBool, true}, // at most 64 Ki items
		{`json.items.all(i, json.items.all(j, i != j))`, WantBool, false},
		{`text.split(",").exists(w, text.contains(w))`, WantBool, false},
	} {
		x, err := env.Compile(tc.src, tc.want)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if x.Bounded() != tc.bounded {
			t.Errorf("%q: Bounded() = %v (estimate %d), want %v", tc.src, x.Bounded(), x.Estimate(), tc.bounded)
		}
	}
}
