package plugin

import (
	"encoding/json"
	"reflect"
	"testing"
)

// windowSeeds are windows as the host writes them and as it never does
// (white space, escapes, unknown or misspelt names, bad values).
var windowSeeds = []string{
	`{"key":"k","start":60000,"end":120000,"fire":1,"messages":[{"id":"1:2:-1:-1","topic":"persistent://public/default/in","key":"k","time":60001,"payload":"eHh4","horizon":-9223372036854775808}]}`,
	`{"key":"k","start":-60000,"end":0,"fire":0,"messages":[{"id":"1:2:3:4","topic":"t","key":"k","time":-1,"payload":null,"properties":{"a":"1","é":"x"},"event_time":5,"publish_time":-6,"horizon":0},{"id":"x","topic":"t","key":"","time":0,"payload":"","properties":{},"horizon":3}],"accumulator":"eyJjb3VudCI6MX0=","add":true}`,
	`{"key":"k","start":1,"end":2,"fire":2,"messages":[],"accumulator":"","replaces":[1,-2,3]}`,
	`{"key":"k","start":1,"end":2,"fire":2,"messages":null,"replaces":[],"add":false}`,
	`{"key":null,"start":1,"end":2,"fire":1,"messages":[{"id":"i","topic":"t","key":"k","time":1,"payload":"AP8K","properties":null,"horizon":1}]}`,
	`{"key":"k\u003c","start":1,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k\"","start":1,"end":2,"fire":1,"messages":[{"id":"i","topic":"t\\","key":"k","time":1,"payload":"","horizon":1}]}`,
	` {"key":"k","start":1,"end":2,"fire":1,"messages":[]}`,
	`{"key" : "k","start":1,"end":2,"fire":1,"messages":[]}`,
	`{"Key":"k","START":1,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[],"other":{"a":[1,2]}}`,
	`{"key":"k","start":01,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":1.5,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":1e3,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":-,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":99999999999999999999,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[],"accumulator":"not base64!"}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[],"accumulator":"eHh"}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[],"add":1}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[{"id":1}]}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[}`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[]} x`,
	`{"key":"k","start":1,"end":2,"fire":1,"messages":[]`,
	`{"key":"k\xff","start":1,"end":2,"fire":1,"messages":[]}`,
	`{"key":"k` + "\x01" + `","start":1,"end":2,"fire":1,"messages":[]}`,
	`{}`,
	`[]`,
	`null`,
	``,
}

// decodeWindow reads every payload as encoding/json does: the same
// window, or an error where it has one.
func FuzzDecodeWindow(f *testing.F) {
	for _, s := range windowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want windowJSON
		gotErr := decodeWindow(b, &got)
		wantErr := json.Unmarshal(b, &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%s: error %v, encoding/json's %v", b, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", b, got, want)
		}
	})
}

// The host's plain form is read by hand, not by encoding/json's
// fallback: the speed is the point.
func TestDecodeWindowReadsTheHostsFormByHand(t *testing.T) {
	for _, s := range windowSeeds[:5] {
		var p windowJSON
		d := winDecoder{b: []byte(s)}
		if !d.window(&p) || d.i != len(s) {
			t.Errorf("%s: read by encoding/json, not by hand", s)
		}
	}
}
