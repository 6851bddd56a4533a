package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// MaxStateValueSize is the largest value a handler may store under a key:
// 1 MiB. The host writes each change as one message of the pipeline's
// changelog topic, which must fit the broker's message size (5 MiB by
// default) with room to spare; a larger value is refused by Put (and by
// the host, should a plugin send one).
const MaxStateValueSize = 1 << 20

// ErrNoState is returned by State's methods when there is no state to
// read or write: the pipeline keeps none (its file has no state block),
// or the message has no key.
var ErrNoState = errors.New("no keyed state")

// State is the value the host keeps under a message's key, for pipelines
// whose file has a state block (docs/contract.md §6, "Keyed state"). A
// handler reads it with Get and changes it with Put or Delete while it
// handles the message; the host sent the current value with the batch and
// receives the change with the answer, so no access is a call.
//
// A change takes effect if and only if the message is acknowledged: with
// any other outcome (a retry, a dead letter, a drop, the batch failing, a
// crash) it is discarded, and the message comes again, if it does, to the
// value as it was. Within a batch, a message sees the changes of the
// messages of its key before it; a MessageFunc's message whose outcome is
// not an ack has its change undone before the next message. For a batch
// Handler, a message that read or changed a key after an earlier message
// of the batch changed it and was not acknowledged is retried too, since
// what it did rests on a change that did not happen.
//
// A State is only good while the message is being handled (until Process
// returns), and the slice Get returns is the batch's: copy it to keep it.
type State struct {
	m *Message
}

// State is the keyed state of m's key.
func (m *Message) State() State { return State{m: m} }

// Get returns the value stored under the message's key, and whether there
// is one.
func (s State) Get() ([]byte, bool) {
	bs := s.m.state
	if bs == nil || s.m.Key == "" {
		return nil, false
	}
	return bs.get(s.m)
}

// Put stores v under the message's key, once the message is
// acknowledged. An empty v is Delete (the changelog's way of saying a
// key has no value). It fails with ErrNoState when there is no state to
// write, and for a value over MaxStateValueSize.
func (s State) Put(v []byte) error {
	bs := s.m.state
	if bs == nil || s.m.Key == "" {
		return fmt.Errorf("put for message %s: %w", s.m.ID, ErrNoState)
	}
	if len(v) > MaxStateValueSize {
		return fmt.Errorf("put for message %s: a value of %d bytes is over the %d-byte limit", s.m.ID, len(v), MaxStateValueSize)
	}
	bs.put(s.m, v)
	return nil
}

// Delete removes the value under the message's key, once the message is
// acknowledged.
func (s State) Delete() error { return s.Put(nil) }

// GetJSON decodes the value under the message's key into v, and says
// whether there was one (v is left alone when there was not).
func (s State) GetJSON(v any) (bool, error) {
	b, ok := s.Get()
	if !ok {
		return false, nil
	}
	if decodeInt(b, v) {
		return true, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("state of message %s: %w", s.m.ID, err)
	}
	return true, nil
}

// PutJSON stores v, encoded as JSON, under the message's key.
func (s State) PutJSON(v any) error {
	if bs := s.m.state; bs != nil {
		if b, ok := bs.appendInt(v); ok {
			return s.Put(b)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("state of message %s: %w", s.m.ID, err)
	}
	return s.Put(b)
}

// decodeInt is json.Unmarshal's answer for an int or int64 v and a value
// b that is a plain JSON integer in range, without reflection and
// allocations (a count per key is keyed state's most usual value; the
// JSON decoder was most of a counter's CPU in BenchmarkKeyedStateCounter,
// docs/benchmarks/keyed-state.md). It reports false, leaving v alone,
// for anything else: encoding/json decides those, with its errors.
func decodeInt(b []byte, v any) bool {
	var bits int
	switch v.(type) {
	case *int:
		bits = strconv.IntSize
	case *int64:
		bits = 64
	default:
		return false
	}
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	// JSON's integers: no leading zero, no sign but '-', digits only.
	if len(digits) == 0 || len(digits) > 19 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, bits)
	if err != nil {
		return false // out of range: encoding/json's error says so
	}
	switch p := v.(type) {
	case *int:
		*p = int(n)
	case *int64:
		*p = n
	}
	return true
}

// StateEntry is the value stored under one key, as the host sends it with
// a batch.
type StateEntry struct {
	Key   string
	Value []byte
}

// StateChange is a handler's change to the value under its message's key,
// in the message's Result (only with OutcomeAck).
type StateChange struct {
	// Key is the message's key.
	Key string
	// Value is the new value; nil with Delete.
	Value []byte
	// Delete removes the key's value.
	Delete bool
}

// batchState is a batch's view of the keyed state: the values the host
// sent, changed as the handler puts and deletes, and each message's
// change and whether it read or wrote the state.
//
// A key's value is in a slot (keys, vals, has), and each message is
// told its key's slot once, when the batch is attached: a map of the
// values, read by every Get and written by every Put, was a map lookup
// and an assignment a message in the plugin's part of
// BenchmarkKeyedStateCounter (docs/benchmarks/keyed-state.md).
type batchState struct {
	mu    sync.Mutex
	slots map[string]int32 // a key's slot
	keys  []string         // by slot
	vals  [][]byte         // by slot; nil without a value
	has   []bool           // by slot: the key has a value
	// per message, by index
	slotOf  []int32 // its key's slot, -1 for none
	changed []bool
	change  []StateChange
	before  [][]byte // the key's value before the message's first change
	hadVal  []bool
	touched []bool
	// ints holds the values PutJSON encoded without encoding/json
	// (appendInt), reused with the rest from batch to batch.
	ints []byte
}

// newBatchState makes the view of a batch of n messages whose keys have
// the values entries.
func newBatchState(entries []StateEntry, n int) *batchState {
	bs := &batchState{}
	bs.reset(entries, n)
	return bs
}

// reset makes bs the view of a new batch of n messages whose keys have
// the values entries, in the arrays and map of its last batch: a plugin
// process's worker keeps one (scratch), as no handler may keep a Message
// or its state past Process, and the answer that points into change is
// encoded before the worker takes the next batch. Made anew for each
// batch, they were most of the allocations, and so of the garbage
// collector's work, a keyed-state batch cost the plugin
// (docs/benchmarks/keyed-state.md).
func (bs *batchState) reset(entries []StateEntry, n int) {
	if bs.slots == nil {
		bs.slots = make(map[string]int32, len(entries))
	} else {
		clear(bs.slots)
	}
	clear(bs.keys)
	clear(bs.vals)
	bs.keys, bs.vals, bs.has = bs.keys[:0], bs.vals[:0], bs.has[:0]
	if cap(bs.changed) < n {
		bs.changed, bs.change, bs.before = make([]bool, n), make([]StateChange, n), make([][]byte, n)
		bs.hadVal, bs.touched, bs.slotOf = make([]bool, n), make([]bool, n), make([]int32, n)
	} else {
		bs.changed, bs.change, bs.before = bs.changed[:n], bs.change[:n], bs.before[:n]
		bs.hadVal, bs.touched, bs.slotOf = bs.hadVal[:n], bs.touched[:n], bs.slotOf[:n]
		clear(bs.changed)
		clear(bs.change)
		clear(bs.before)
		clear(bs.hadVal)
		clear(bs.touched)
	}
	for i := range bs.slotOf {
		bs.slotOf[i] = -1
	}
	for _, e := range entries {
		s := bs.slotFor(e.Key)
		bs.vals[s], bs.has[s] = e.Value, true
	}
	bs.ints = bs.ints[:0]
}

// slotFor is key k's slot, made (without a value) if it has none.
func (bs *batchState) slotFor(k string) int {
	if s, ok := bs.slots[k]; ok {
		return int(s)
	}
	s := len(bs.keys)
	bs.slots[k] = int32(s)
	bs.keys, bs.vals, bs.has = append(bs.keys, k), append(bs.vals, nil), append(bs.has, false)
	return s
}

// slot is m's key's slot: the one attach found, unless the handler
// changed m.Key since.
func (bs *batchState) slot(m *Message) int {
	if i := m.index; i >= 0 && i < len(bs.slotOf) {
		if s := bs.slotOf[i]; s >= 0 && bs.keys[s] == m.Key {
			return int(s)
		}
	}
	return bs.slotFor(m.Key)
}

// appendInt is json.Marshal(v) for an int or int64 v, into bs's own
// buffer rather than a new slice each (see decodeInt); false for any
// other v.
func (bs *batchState) appendInt(v any) ([]byte, bool) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	default:
		return nil, false
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if cap(bs.ints)-len(bs.ints) < 20 {
		// A new array: the values already handed out keep the old one.
		bs.ints = make([]byte, 0, max(2*cap(bs.ints), 512))
	}
	at := len(bs.ints)
	bs.ints = strconv.AppendInt(bs.ints, n, 10)
	return bs.ints[at:len(bs.ints):len(bs.ints)], true
}

// attach makes bs the state of batch's messages, and finds each its
// key's slot.
func (bs *batchState) attach(batch []*Message) {
	for _, m := range batch {
		m.state = bs
		if i := m.index; m.Key != "" && i >= 0 && i < len(bs.slotOf) {
			bs.slotOf[i] = int32(bs.slotFor(m.Key))
		}
	}
}

func (bs *batchState) get(m *Message) ([]byte, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if i := m.index; i >= 0 && i < len(bs.touched) {
		bs.touched[i] = true
	}
	s := bs.slot(m)
	return bs.vals[s], bs.has[s]
}

func (bs *batchState) put(m *Message, v []byte) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	i := m.index
	if i < 0 || i >= len(bs.changed) {
		return
	}
	bs.touched[i] = true
	s := bs.slot(m)
	if !bs.changed[i] {
		bs.before[i], bs.hadVal[i] = bs.vals[s], bs.has[s]
		bs.changed[i] = true
	}
	if len(v) == 0 {
		bs.vals[s], bs.has[s] = nil, false
		bs.change[i] = StateChange{Key: m.Key, Delete: true}
		return
	}
	bs.vals[s], bs.has[s] = v, true
	bs.change[i] = StateChange{Key: m.Key, Value: v}
}

// undo takes back message i's change, if it made one: a MessageFunc's
// message whose outcome is not an ack, undone before the next message
// reads the key.
func (bs *batchState) undo(m *Message) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	i := m.index
	if i < 0 || i >= len(bs.changed) || !bs.changed[i] {
		return
	}
	s := bs.slot(m)
	if bs.hadVal[i] {
		bs.vals[s], bs.has[s] = bs.before[i], true
	} else {
		bs.vals[s], bs.has[s] = nil, false
	}
	bs.changed[i], bs.touched[i] = false, false
	bs.change[i] = StateChange{}
}

// settle puts each acknowledged message's change in its result. A
// message of a key that an earlier message of the batch changed without
// being acknowledged, and that read or changed the key itself, is retried
// instead: what it did rests on a change that does not happen.
func (bs *batchState) settle(batch []*Message, results []Result) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var lost map[string]bool
	for i, m := range batch {
		r := &results[i]
		if lost[m.Key] && bs.touched[i] && r.Outcome == OutcomeAck {
			*r = Result{Outcome: OutcomeRetry, Reason: "state: an earlier message of key " + fmt.Sprintf("%q", m.Key) +
				" in the batch changed it and was not acknowledged"}
		}
		if !bs.changed[i] {
			continue
		}
		if r.Outcome != OutcomeAck {
			if lost == nil {
				lost = map[string]bool{}
			}
			lost[m.Key] = true
			continue
		}
		// Into bs's array, not a copy each: the answer is encoded (or,
		// in the host's process, kept) before bs is reset.
		r.State = &bs.change[i]
	}
}
