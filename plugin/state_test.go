package plugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/plugin"
)

// counter adds one to its message's key's count; a payload "fail" makes
// the message's outcome a retry after its change.
var counter = plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
	var n int
	if _, err := m.State().GetJSON(&n); err != nil {
		return nil, err
	}
	if err := m.State().PutJSON(n + 1); err != nil {
		return nil, err
	}
	if string(m.Payload) == "fail" {
		return nil, errors.New("failed after its change")
	}
	return nil, nil
})

func stateBatch(keys ...string) []*plugin.Message {
	var b []*plugin.Message
	for i, k := range keys {
		payload := "ok"
		if strings.HasSuffix(k, "!") {
			k, payload = strings.TrimSuffix(k, "!"), "fail"
		}
		b = append(b, &plugin.Message{ID: "1:" + string(rune('0'+i)) + ":-1:-1", Key: k, Payload: []byte(payload)})
	}
	return b
}

// A MessageFunc sees the changes of the earlier messages of its key in
// the batch; a message that is not acknowledged has its change undone
// before the next, and its result carries none.
func TestStateSeesEarlierChangesAndUndoesUnacknowledgedOnes(t *testing.T) {
	b := stateBatch("a", "a", "b", "a!", "a")
	plugin.AttachState(b, []plugin.StateEntry{{Key: "a", Value: []byte("10")}})
	res, err := plugin.ProcessLocal(context.Background(), counter, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"11", "12", "1", "", "13"}
	for i, r := range res {
		got := ""
		if r.State != nil {
			got = string(r.State.Value)
			if r.State.Key != b[i].Key {
				t.Errorf("message %d: change of key %q, want %q", i, r.State.Key, b[i].Key)
			}
		}
		if got != want[i] {
			t.Errorf("message %d (%v): change %q, want %q", i, r.Outcome, got, want[i])
		}
	}
	if res[3].Outcome != plugin.OutcomeRetry {
		t.Errorf("the failed message: %v, want a retry", res[3].Outcome)
	}
}

// A batch handler that acknowledges a message which read a key after an
// earlier message of it changed it and was not acknowledged has that
// message retried instead: it rests on a change that did not happen.
func TestABatchHandlerCannotKeepAChangeBuiltOnADiscardedOne(t *testing.T) {
	h := plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
		for _, m := range batch {
			v, _ := m.State().Get()
			if err := m.State().Put(append(append([]byte(nil), v...), 'x')); err != nil {
				return err
			}
			if string(m.Payload) == "fail" {
				w.Retry(m, 0, "no")
			}
		}
		return nil
	})
	b := stateBatch("a!", "a", "b")
	plugin.AttachState(b, nil)
	res, err := plugin.ProcessLocal(context.Background(), h, b)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != plugin.OutcomeRetry || res[0].State != nil ||
		res[1].Outcome != plugin.OutcomeRetry || res[1].State != nil || !strings.Contains(res[1].Reason, "state") {
		t.Errorf("key a: %+v, %+v; want both retried without a change", res[0], res[1])
	}
	if res[2].Outcome != plugin.OutcomeAck || res[2].State == nil || string(res[2].State.Value) != "x" {
		t.Errorf("key b: %+v, want acknowledged with its change", res[2])
	}
}

// Without a state block, or for a message without a key, there is no
// state: Get finds nothing and Put says ErrNoState; a value over the
// limit is refused; Delete is a change that deletes.
func TestStateRefusesWhatItCannotKeep(t *testing.T) {
	m := &plugin.Message{ID: "1:1:-1:-1", Key: "k"}
	if _, ok := m.State().Get(); ok {
		t.Error("Get found a value without state")
	}
	if err := m.State().Put([]byte("v")); !errors.Is(err, plugin.ErrNoState) {
		t.Errorf("Put without state: %v", err)
	}
	b := stateBatch("", "k")
	plugin.AttachState(b, []plugin.StateEntry{{Key: "k", Value: []byte("v")}})
	if err := b[0].State().Put([]byte("v")); !errors.Is(err, plugin.ErrNoState) {
		t.Errorf("Put for a message without a key: %v", err)
	}
	if err := b[1].State().Put(make([]byte, plugin.MaxStateValueSize+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("Put over the limit: %v", err)
	}
	res, err := plugin.ProcessLocal(context.Background(), plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		if m.Key == "" {
			return nil, nil
		}
		return nil, m.State().Delete()
	}), b)
	if err != nil {
		t.Fatal(err)
	}
	if c := res[1].State; c == nil || !c.Delete || c.Value != nil {
		t.Errorf("Delete: %+v", c)
	}
}

// GetJSON and PutJSON answer for integers exactly as encoding/json does
// (they take a shorter way for a plain integer into an int or int64):
// the same value, or an error where encoding/json gives one, and the
// same bytes written.
func TestStateJSONIntegersAreEncodingJSONs(t *testing.T) {
	values := []string{"0", "-0", "7", "-7", "123456", "01", "-01", "-", "1e3", "1.0", "+1", " 1", "1 ", "null",
		`"1"`, "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"99999999999999999999", "12a", "true"}
	for _, v := range values {
		for _, wide := range []bool{false, true} {
			b := []*plugin.Message{{ID: "1:0:-1:-1", Key: "k"}}
			plugin.AttachState(b, []plugin.StateEntry{{Key: "k", Value: []byte(v)}})
			var got, want any
			var gotErr, wantErr error
			var written []byte
			h := plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
				if wide {
					n, w := int64(-5), int64(-5)
					_, gotErr = m.State().GetJSON(&n)
					wantErr = json.Unmarshal([]byte(v), &w)
					got, want = n, w
					if gotErr == nil {
						gotErr = m.State().PutJSON(n)
					}
				} else {
					n, w := -5, -5
					_, gotErr = m.State().GetJSON(&n)
					wantErr = json.Unmarshal([]byte(v), &w)
					got, want = n, w
					if gotErr == nil {
						gotErr = m.State().PutJSON(n)
					}
				}
				written, _ = m.State().Get()
				return nil, nil
			})
			if _, err := plugin.ProcessLocal(context.Background(), h, b); err != nil {
				t.Fatal(err)
			}
			if (gotErr != nil) != (wantErr != nil) || got != want {
				t.Errorf("%q (int64 %v): GetJSON gave %v, %v; encoding/json %v, %v", v, wide, got, gotErr, want, wantErr)
				continue
			}
			if gotErr == nil {
				enc, _ := json.Marshal(got)
				if string(written) != string(enc) {
					t.Errorf("%q (int64 %v): PutJSON wrote %q, encoding/json %q", v, wide, written, enc)
				}
			}
		}
	}
}
