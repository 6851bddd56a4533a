package runtime

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/subscribe"
)

// stateInstance answers a batch of keyed state through answer, having
// counted the call.
type stateInstance struct {
	fakeInstance
	answer func(b host.Batch) []plugin.Result
}

func (f *stateInstance) ProcessBatch(_ context.Context, b host.Batch) ([]plugin.Result, error) {
	f.calls.Add(1)
	return f.answer(b), nil
}

// When the spill cannot be read (its read transaction cannot begin: here
// its file is closed under it), the batch fails instead of the host
// panicking: a batch whose keys' values cannot be read is not handed to
// the handler, and each message is retried with a reason that names the
// key and the spill file; an answer whose change cannot be kept, because
// the value it replaces cannot be read, is retried with its key's later
// messages in the batch, while the other keys' changes are kept. At
// least once and exactly once.
func TestKeyedStateSpillThatCannotBeReadFailsTheBatch(t *testing.T) {
	for _, eo := range []bool{false, true} {
		s := newKeyedState("changelog", 0, eo, spillBound(), t.TempDir(), slog.New(slog.DiscardHandler))
		keys := spillKeyNames()
		counter(t, s, keys, true)
		if s.vals.onDisk == 0 {
			t.Fatal("nothing spilled")
		}
		var onDisk, inMem string
		for _, k := range keys {
			if _, ok := s.vals.mem[k]; ok {
				inMem = k
			} else {
				onDisk = k
			}
		}
		if onDisk == "" || inMem == "" {
			t.Fatalf("want a key on disk only and one in memory: %q, %q", onDisk, inMem)
		}
		spill := s.vals.path
		bump := func(b host.Batch) []plugin.Result {
			vals := map[string]string{}
			for _, e := range b.(host.StateBatch).State() {
				vals[e.Key] = string(e.Value)
			}
			res := make([]plugin.Result, b.Len())
			var f host.Fields
			for i := range res {
				b.Fields(i, &f)
				k := f.Key
				vals[k] += "+"
				res[i] = plugin.Result{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: k, Value: []byte(vals[k])}}
			}
			return res
		}
		inst := &stateInstance{answer: bump}
		w := &worker{keyed: s}
		msg := func(k string) *item { return &item{m: &subscribe.Message{Key: k}} }

		// Read before the call: the file is closed before the batch.
		if err := s.vals.db.Close(); err != nil {
			t.Fatal(err)
		}
		res, err := w.call(context.Background(), inst, []*item{msg(inMem), msg(onDisk)})
		if err != nil {
			t.Fatalf("exactly once %v: the call failed (%v): the instance would be taken for crashed", eo, err)
		}
		if n := inst.calls.Load(); n != 0 {
			t.Errorf("exactly once %v: the handler was called %d times without its keys' values", eo, n)
		}
		for i, r := range res {
			if r.Outcome != plugin.OutcomeRetry || !strings.Contains(r.Reason, spill) || !strings.Contains(r.Reason, onDisk) {
				t.Errorf("exactly once %v: message %d: %v %q, want a retry naming the key %s and the spill %s", eo, i, r.Outcome, r.Reason, onDisk, spill)
			}
		}

		// Read after the call: the file is closed while the handler has
		// the batch (its values were read before).
		s = newKeyedState("changelog", 0, eo, spillBound(), t.TempDir(), slog.New(slog.DiscardHandler))
		counter(t, s, keys, true)
		for _, k := range keys {
			if _, ok := s.vals.mem[k]; ok {
				inMem = k
			}
		}
		spill = s.vals.path
		inst = &stateInstance{answer: func(b host.Batch) []plugin.Result {
			res := bump(b)
			if err := s.vals.db.Close(); err != nil {
				t.Error(err)
			}
			return res
		}}
		w = &worker{keyed: s}
		before := string(s.value(inMem))
		res, err = w.call(context.Background(), inst, []*item{msg("new"), msg(inMem), msg("new")})
		if err != nil {
			t.Fatalf("exactly once %v: the call failed: %v", eo, err)
		}
		if r := res[0]; r.Outcome != plugin.OutcomeRetry || !strings.Contains(r.Reason, spill) || !strings.Contains(r.Reason, `"new"`) {
			t.Errorf("exactly once %v: the change of new: %v %q, want a retry naming the key and the spill %s", eo, r.Outcome, r.Reason, spill)
		}
		if r := res[2]; r.Outcome != plugin.OutcomeRetry || !strings.Contains(r.Reason, `"new"`) {
			t.Errorf("exactly once %v: new's second change, made on the first: %v %q, want a retry", eo, r.Outcome, r.Reason)
		}
		if r := res[1]; r.Outcome != plugin.OutcomeAck {
			t.Errorf("exactly once %v: %s, in memory: %v %q, want it acknowledged", eo, inMem, r.Outcome, r.Reason)
		}
		if got := string(s.vals.mem[inMem].v); got != before+"+" {
			t.Errorf("exactly once %v: %s = %q, want %q", eo, inMem, got, before+"+")
		}
		if _, ok := s.vals.mem["new"]; ok {
			t.Errorf("exactly once %v: new has a value, from a change retried", eo)
		}
		if eo && len(s.pending["new"]) != 0 {
			t.Errorf("exactly once %v: new has %d changes pending, from changes retried", eo, len(s.pending["new"]))
		}
	}
}
