package runtime

import (
	"reflect"
	"testing"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/subscribe"
)

// An incremental window reads the same through plugin.ReadWindow in
// the compact form of contract version 5 as in its JSON: its key,
// bounds, fire, accumulator, add flag and every message's fields,
// properties, topics that change and keys that are not the window's
// included; and a compact form cut short or with bytes left over is an
// error, not a window.
func TestCompactWindowsReadAsTheirJSON(t *testing.T) {
	msgs := []*winMsg{
		{ID: "1:2:-1:-1", Topic: "persistent://public/default/in", Key: "k", Time: 1000, Payload: []byte("a\x00\xffb"), EventTime: 999, PublishTime: 1001, Horizon: 5},
		{ID: "1:3:-1:-1", Topic: "persistent://public/default/in", Key: "k", Time: 1002, Payload: []byte{}, Properties: map[string]string{"b": "2", "a": "é\"1"}},
		{ID: "7:1:0:3", Topic: "persistent://public/default/in-partition-1", Key: "other", Time: -5, Payload: []byte("x")},
	}
	cases := map[string]*windowPayload{
		"add":          {Key: "k", Start: 0, End: 60_000, Messages: msgs, Add: true, Accumulator: []byte(`{"count":2}`)},
		"first add":    {Key: "k", Start: 0, End: 60_000, Messages: msgs[:1], Add: true},
		"fire":         {Key: "k", Start: -60_000, End: 0, Fire: 3, Messages: []*winMsg{}, Accumulator: []byte("acc")},
		"add and fire": {Key: "k ü", Start: 120_000, End: 180_000, Fire: 1, Messages: msgs, Add: true, Accumulator: []byte{}},
		"replaces":     {Key: "k", Start: 1, End: 2, Fire: 2, Messages: msgs[1:], Replaces: []int64{-3, 0, 1 << 40}},
	}
	for name, wp := range cases {
		t.Run(name, func(t *testing.T) {
			read := func(form bool) *plugin.Window {
				it := &item{m: &subscribe.Message{}, win: &windowFire{wp: wp}}
				windowForm(it, form)
				w, ok, err := plugin.ReadWindow(&plugin.Message{ID: "x", Properties: map[string]string{PropertyWindowStart: "0"}, Payload: it.m.Payload})
				if !ok || err != nil {
					t.Fatalf("compact %v: ok %v, err %v", form, ok, err)
				}
				return w
			}
			fromJSON, compact := read(false), read(true)
			if wp.Add && wp.Fire > 0 {
				// JSON has no add and fire in one: only the compact form says both.
				fromJSON.Fire = wp.Fire
			}
			if wp.Accumulator != nil && len(wp.Accumulator) == 0 {
				fromJSON.Accumulator = []byte{} // JSON leaves out an empty one
			}
			if !reflect.DeepEqual(fromJSON, compact) {
				t.Errorf("the compact form reads\n%+v\nthe JSON\n%+v", compact, fromJSON)
			}
		})
	}
	b := appendCompactWindow(nil, cases["add"])
	for _, bad := range [][]byte{b[:len(b)-1], append(b[:len(b):len(b)], 0), b[:5], {compactWindowForm}} {
		_, ok, err := plugin.ReadWindow(&plugin.Message{ID: "x", Properties: map[string]string{PropertyWindowStart: "0"}, Payload: bad})
		if !ok || err == nil {
			t.Errorf("a compact form of %d bytes (of %d) was read without an error", len(bad), len(b))
		}
	}
}
