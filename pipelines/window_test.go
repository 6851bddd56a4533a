package pipelines_test

import (
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// A window block is checked field by field, each problem at its line.
func TestWindowIsValidatedWithPositions(t *testing.T) {
	for _, c := range []struct{ window, want string }{
		{"{type: tumbling}", "w.yaml:6:7: pipelines[0].window.size: must be more than 0"},
		{"{type: hopping, size: 1m}", "w.yaml:6:13: pipelines[0].window.type: \"hopping\": use tumbling, sliding or session"},
		{"{type: sliding, size: 1m, slide: 7s}", "pipelines[0].window.slide: 7s does not divide size 1m0s"},
		{"{type: session, gap: 1m, size: 1m}", "pipelines[0].window.size: not for a session window"},
		{"{type: tumbling, size: 1m, time: field}", "pipelines[0].window.time_field: time: field needs the payload's field"},
		{"{type: tumbling, size: 1m, time: wall}", "pipelines[0].window.time: \"wall\": use processing, publish, event or field"},
		{"{type: tumbling, size: 1m, time_field: ts}", "pipelines[0].window.time_field: only with time: field"},
		{"{size: 1m}", "pipelines[0].window.type: is not set, and window has settings"},
		{"{type: tumbling, size: 1m, mode: batches}", "w.yaml:8:13: pipelines[0].window.mode: \"batches\": use messages or incremental"},
		{"{type: session, gap: 1m, mode: incremental}", "pipelines[0].window.mode: incremental is for tumbling and sliding windows"},
	} {
		body := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(c.window, "{"), "}"), ", ", "\n      ")
		src := "pipelines:\n  - name: w\n    source: {topics: [in], subscription: s, type: exclusive}\n    handler: {plugin: ./h}\n" +
			"    window:\n      " + body + "\n"
		_, err := pipelines.Parse("w.yaml", []byte(src), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.window, err, c.want)
		}
	}
	good := "pipelines:\n  - name: w\n    source: {topics: [in], subscription: s, type: exclusive}\n    handler: {plugin: ./h}\n" +
		"    window: {type: Sliding, size: 1m, slide: 10s, time: field, time_field: order.ts}\n"
	f, err := pipelines.Parse("w.yaml", []byte(good), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Pipelines[0].WithDefaults()
	if p.Window.Type != pipelines.Sliding || p.Window.IdleTimeout != pipelines.DefaultWindowIdleTimeout {
		t.Errorf("defaults: %+v", p.Window)
	}
	// Under exactly_once too, each kind in each mode its kind takes; but
	// not with topics that take no part in a transaction.
	for _, w := range []string{"{type: tumbling, size: 1m}", "{type: sliding, size: 1m, slide: 10s, mode: incremental}", "{type: session, gap: 30s}"} {
		eo := func(w string) string {
			return "pipelines:\n  - name: w\n    source: {topics: [in], subscription: s, type: exclusive}\n    handler: {plugin: ./h}\n" +
				"    guarantee: exactly_once\n    window: " + w + "\n"
		}
		if _, err := pipelines.Parse("w.yaml", []byte(eo(w)), nil); err != nil {
			t.Errorf("%s under exactly_once: %v", w, err)
		}
		np := eo(strings.TrimSuffix(w, "}") + ", late_topic: non-persistent://public/default/late}")
		want := "pipelines[0].window.late_topic: \"non-persistent://public/default/late\" is non-persistent"
		if _, err := pipelines.Parse("w.yaml", []byte(np), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s under exactly_once with a non-persistent late topic: %v, want %q", w, err, want)
		}
	}
	shared := strings.Replace(good, "exclusive", "shared", 1)
	if _, err := pipelines.Parse("w.yaml", []byte(shared), nil); err == nil || !strings.Contains(err.Error(), "window") {
		t.Errorf("a window on a shared subscription: %v", err)
	}
}
