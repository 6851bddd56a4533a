package runtime

import (
	"encoding/json"
	"testing"
)

// The window path's hand-written JSON is json.Marshal's, byte for byte,
// for what the changelog and the handlers read: plain and escaped
// strings, nil and empty slices and maps, properties in key order.
func TestWindowJSONIsJSONMarshals(t *testing.T) {
	msgs := []*winMsg{
		{ID: "12:3:-1:-1", Topic: "persistent://public/default/in", Key: "key-00001", Time: 1_700_000_000_123, Payload: []byte("xxxx"), Horizon: -9},
		{ID: "1:2:0:4", Topic: "t", Key: "", Time: -5, Payload: nil, Horizon: -9223372036854775808},
		{ID: "1:2:3:4", Topic: "t\"q\\<&>\n\x01é\u2028", Key: "k\xff\xfeend", Time: 0, Payload: []byte{},
			Properties: map[string]string{"z": "1", "a": "<b>", "é": "\t"}, EventTime: 17, PublishTime: -3, Horizon: 1},
		{ID: "x", Topic: "t", Key: "k", Payload: []byte{0, 255, 10}, Properties: map[string]string{}, EventTime: 1},
	}
	for i, m := range msgs {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWinMsg(nil, m); string(got) != string(want) {
			t.Errorf("message %d:\n got %s\nwant %s", i, got, want)
		}
	}
	payloads := []windowPayload{
		{Key: "k", Start: 60_000, End: 120_000, Fire: 1, Messages: msgs, Replaces: []int64{1, -2}},
		{Key: "k<", Start: -1, End: 0, Fire: 3, Messages: []*winMsg{}, Accumulator: []byte(`{"count":3}`)},
		{Key: "k", Messages: nil, Accumulator: []byte{}, Add: true, Replaces: []int64{}},
		{Key: "k", Messages: []*winMsg{msgs[0], nil}, Add: true, Accumulator: []byte{1}},
	}
	for i, p := range payloads {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWindowPayload(nil, &p); string(got) != string(want) {
			t.Errorf("window %d:\n got %s\nwant %s", i, got, want)
		}
	}
	recs := []accRecord{
		{},
		{Acc: []byte(`{"count":1,"sum":7}`), N: 4, HW: map[string]msgPos{"persistent://public/default/in-partition-1": {10, 20, -1}, "b\"": {-1, 0, 3}}},
		{Acc: []byte{}, N: -1, HW: map[string]msgPos{}},
	}
	for i, r := range recs {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendAccRecord(nil, &r); string(got) != string(want) {
			t.Errorf("accumulator %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
