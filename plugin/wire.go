package plugin

import (
	"bytes"
	"fmt"
	"maps"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The plugin's end of the hand encoding (plugin/internal/wire explains
// it): it decodes a Batch straight into Messages and encodes its Results
// as a BatchResult. The host's end does the opposite two.

// batchIn is a Batch as the plugin reads it.
type batchIn struct {
	// frame, when not nil, is the Batch still encoded (from the batch
	// channel): the worker that takes it decodes it into its own arrays,
	// and calls fail should it not decode.
	frame []byte
	fail  func(error)
	// chunk is what frame is read into, released once the answer is
	// sent (nil when frame is not recycled).
	chunk *wire.Chunk

	msgs      []*Message
	seq       uint64
	timeoutMs int64
	// traceParent and traceState are the trace context of the host's
	// span for the batch, "" when it is not traced.
	traceParent, traceState string
	// state is the keyed state the host sent with the batch (values
	// alias the frame).
	state []StateEntry
}

// resultsOut is a BatchResult the plugin sends: its results, or a panic
// (an encoded Panic message) with no results.
type resultsOut struct {
	res   []Result
	seq   uint64
	panic []byte
	// sizes are the encoded sizes of each result and then of each of its
	// outputs, worked out by Size for Append; its array may be a
	// worker's (scratch), reused.
	sizes []int

	// compact: answer in contract version 3's compact form, a byte a
	// message (codes, worked out by Size) and full results only where
	// needed. msgs is the batch, which the echoes are checked against.
	compact   bool
	msgs      []*Message
	codes     []byte
	echoTopic string
	// compactState: the compact form may carry state changes (contract
	// version 4).
	compactState bool
}

var outcomeToPB = [...]pb.Outcome{
	OutcomeAck:        pb.Outcome_OUTCOME_ACK,
	OutcomeRetry:      pb.Outcome_OUTCOME_RETRY,
	OutcomeDeadLetter: pb.Outcome_OUTCOME_DEAD_LETTER,
	OutcomeDrop:       pb.Outcome_OUTCOME_DROP,
}

func (r *resultsOut) Size() int {
	if r.compact && len(r.res) > 0 {
		return r.compactSize() + wire.SizeVarint(r.seq)
	}
	var n int
	n, r.sizes = resultsSize(r.res, r.sizes[:0])
	return n + wire.SizeVarint(r.seq) + wire.SizeBlob(r.panic)
}

func (r *resultsOut) Append(b []byte) []byte {
	if r.compact && len(r.res) > 0 {
		return wire.AppendVarint(r.appendCompact(b), wire.ResultsSeq, r.seq)
	}
	b = appendResults(b, r.res, r.sizes)
	b = wire.AppendVarint(b, wire.ResultsSeq, r.seq)
	return wire.AppendBlob(b, wire.ResultsPanic, r.panic)
}

// compactSize works out each message's byte of the compact form (codes)
// and the sizes of the full results, and returns the size of all but the
// seq.
func (r *resultsOut) compactSize() int {
	r.codes, r.sizes, r.echoTopic = r.codes[:0], r.sizes[:0], ""
	n := wire.SizeBytes(len(r.res))
	for i := range r.res {
		res := &r.res[i]
		c := compactCode(r.msgs[i], res, &r.echoTopic, r.compactState)
		r.codes = append(r.codes, c)
		if c&wire.CompactState != 0 {
			n += wire.SizeBytes(len(res.State.Value))
			c &^= wire.CompactState
		}
		switch c {
		case wire.CompactEchoPayload:
			n += wire.SizeBytes(len(res.Outputs[0].Payload))
		case wire.CompactFull:
			at := len(r.sizes)
			r.sizes = append(r.sizes, 0)
			var rn int
			rn, r.sizes = resultSize(i, res, r.sizes)
			r.sizes[at] = rn
			n += wire.SizeBytes(rn)
		}
	}
	return n + wire.SizeStr(r.echoTopic)
}

// appendCompact appends what compactSize sized.
func (r *resultsOut) appendCompact(b []byte) []byte {
	b = wire.AppendLen(b, wire.ResultsOutcomes, len(r.codes))
	b = append(b, r.codes...)
	b = wire.AppendStr(b, wire.ResultsEchoTopic, r.echoTopic)
	for i, c := range r.codes {
		if c&^wire.CompactState == wire.CompactEchoPayload {
			p := r.res[i].Outputs[0].Payload
			b = append(wire.AppendLen(b, wire.ResultsPayloads, len(p)), p...) // empty too: a repeated field's entry
		}
	}
	if r.compactState {
		for i, c := range r.codes {
			if c != wire.CompactFull && c&wire.CompactState != 0 {
				v := r.res[i].State.Value
				b = append(wire.AppendLen(b, wire.ResultsStates, len(v)), v...)
			}
		}
	}
	sizes := r.sizes
	for i, c := range r.codes {
		if c == wire.CompactFull {
			b, sizes = appendResult(b, i, &r.res[i], sizes)
		}
	}
	return b
}

// sameProperties is maps.Equal without its iterator for the common
// case, no properties on either.
func sameProperties(a, b map[string]string) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return maps.Equal(a, b)
}

// compactCode is r's byte in the compact form for m: an ack with no
// output, or with one output that echoes m (its key, ordering key and
// properties, and its payload or another) to the answer's echo topic,
// which the first such output sets; with withState (contract version
// 4), either of them with a new value of m's own key too; anything else
// is a full result.
func compactCode(m *Message, r *Result, echoTopic *string, withState bool) byte {
	if r.Outcome != OutcomeAck {
		return wire.CompactFull
	}
	var state byte
	if c := r.State; c != nil {
		// A deletion, and what the host refuses, go in full.
		if !withState || c.Delete || len(c.Value) == 0 || c.Key != m.Key || m.Key == "" {
			return wire.CompactFull
		}
		state = wire.CompactState
	}
	switch len(r.Outputs) {
	case 0:
		return wire.CompactAck | state
	case 1:
	default:
		return wire.CompactFull
	}
	o := &r.Outputs[0]
	if o.Topic == "" || o.Key != m.Key || !bytes.Equal(o.OrderingKey, m.OrderingKey) || !o.EventTime.IsZero() ||
		o.TraceParent != "" || o.TraceState != "" || !sameProperties(o.Properties, m.Properties) {
		return wire.CompactFull
	}
	switch *echoTopic {
	case o.Topic:
	case "":
		*echoTopic = o.Topic
	default:
		return wire.CompactFull
	}
	if bytes.Equal(o.Payload, m.Payload) {
		return wire.CompactEcho | state
	}
	return wire.CompactEchoPayload | state
}

func outputSize(o *Output) int {
	return wire.SizeStr(o.Topic) + wire.SizeStr(o.Key) + wire.SizeBlob(o.OrderingKey) +
		wire.SizeProps(o.Properties) + wire.SizeBlob(o.Payload) + wire.SizeVarint(uint64(wire.Millis(o.EventTime))) +
		wire.SizeStr(o.TraceParent) + wire.SizeStr(o.TraceState)
}

// resultSize is the size of result i, r; the sizes of its outputs go
// on the end of sizes.
func resultSize(i int, r *Result, sizes []int) (int, []int) {
	n := wire.SizeVarint(uint64(uint32(i))) + wire.SizeVarint(uint64(outcomeToPB[r.Outcome])) +
		wire.SizeVarint(uint64(r.RetryDelay.Milliseconds())) + wire.SizeStr(r.Reason)
	for k := range r.Outputs {
		on := outputSize(&r.Outputs[k])
		sizes = append(sizes, on)
		n += wire.SizeBytes(on)
	}
	if c := r.State; c != nil {
		n += wire.SizeBytes(stateChangeSize(c))
	}
	return n, sizes
}

// stateChangeSize is the encoded size of a StateChange.
func stateChangeSize(c *StateChange) int {
	n := wire.SizeStr(c.Key) + wire.SizeBlob(c.Value)
	if c.Delete {
		n += 2
	}
	return n
}

// resultsSize is the size of rs; sizes gets the size of each result,
// then each of its outputs', in order, for appendResults.
func resultsSize(rs []Result, sizes []int) (int, []int) {
	n := 0
	for i := range rs {
		at := len(sizes)
		sizes = append(sizes, 0)
		var rn int
		rn, sizes = resultSize(i, &rs[i], sizes)
		sizes[at] = rn
		n += wire.SizeBytes(rn)
	}
	return n, sizes
}

// appendResults appends rs, whose sizes resultsSize worked out.
func appendResults(b []byte, rs []Result, sizes []int) []byte {
	for i := range rs {
		b, sizes = appendResult(b, i, &rs[i], sizes)
	}
	return b
}

// appendResult appends result i, r, whose size and then its outputs'
// start sizes; it returns the sizes after them.
func appendResult(b []byte, i int, r *Result, sizes []int) ([]byte, []int) {
	b = wire.AppendLen(b, wire.ResultsResults, sizes[0])
	sizes = sizes[1:]
	b = wire.AppendVarint(b, wire.ResIndex, uint64(uint32(i)))
	b = wire.AppendVarint(b, wire.ResOutcome, uint64(outcomeToPB[r.Outcome]))
	b = wire.AppendVarint(b, wire.ResDelay, uint64(r.RetryDelay.Milliseconds()))
	b = wire.AppendStr(b, wire.ResReason, r.Reason)
	for k := range r.Outputs {
		o := &r.Outputs[k]
		b = wire.AppendLen(b, wire.ResOutputs, sizes[0])
		sizes = sizes[1:]
		b = wire.AppendStr(b, wire.OutTopic, o.Topic)
		b = wire.AppendStr(b, wire.OutKey, o.Key)
		b = wire.AppendBlob(b, wire.OutOrderingKey, o.OrderingKey)
		b = wire.AppendProps(b, wire.OutProperties, o.Properties)
		b = wire.AppendBlob(b, wire.OutPayload, o.Payload)
		b = wire.AppendVarint(b, wire.OutEventTime, uint64(wire.Millis(o.EventTime)))
		b = wire.AppendStr(b, wire.OutTraceParent, o.TraceParent)
		b = wire.AppendStr(b, wire.OutTraceState, o.TraceState)
	}
	if c := r.State; c != nil {
		b = wire.AppendLen(b, wire.ResState, stateChangeSize(c))
		b = wire.AppendStr(b, wire.ChangeKey, c.Key)
		b = wire.AppendBlob(b, wire.ChangeValue, c.Value)
		if c.Delete {
			b = wire.AppendVarint(b, wire.ChangeDelete, 1)
		}
	}
	return b, sizes
}

// scratch is a worker's arrays for the batches it handles, reused from
// one batch to the next: no handler may keep a Message or its
// ResultWriter after Process returns (see Message and Handler), and the
// answer is encoded before the worker takes the next batch. Strings are
// not in here: they alias the received frame or, when that is recycled
// (strs.copy), a buffer of their own that is never reused, so a string a
// handler keeps stays as it was.
type scratch struct {
	msgs    []Message
	ptrs    []*Message
	results []Result
	outputs []Output
	// dirty is how many of outputs, from the start, may still hold a
	// batch's outputs: they are cleared once no batch uses them, not
	// before each batch (a handled batch writes each slot it takes whole).
	dirty int
	sizes []int  // resultsOut.sizes
	codes []byte // resultsOut.codes
	strs  strs
	// entries are the keyed state a batch came with (batchIn.state),
	// and state the batch's view of it (batchState.reset).
	entries []StateEntry
	state   batchState
}

// arenaSize is how much a strs allocates at once for the strings it
// copies: a batch of 100 messages' ids and keys fits a few times over.
const arenaSize = 16 << 10

// strs makes a batch's strings. When copy is set, the frame is
// recycled once the batch is answered (a handler may keep no slice of a
// Message, but may keep its strings), so strings are copied out of it,
// into an arena that is only appended to: one allocation for many
// messages, instead of keeping the whole frame, payloads and all.
type strs struct {
	copy  bool
	arena []byte
	// topic is the last topic made, reused while messages come from it
	// (a batch's topics are mostly one, and so are the next batch's).
	topic string
}

func (s *strs) str(b []byte) string {
	if !s.copy || len(b) == 0 {
		return wire.Str(b)
	}
	if cap(s.arena)-len(s.arena) < len(b) {
		s.arena = make([]byte, 0, max(arenaSize, len(b)))
	}
	at := len(s.arena)
	s.arena = append(s.arena, b...)
	return unsafe.String(&s.arena[at], len(b))
}

// interned is str, the previous topic when b is the same.
func (s *strs) interned(b []byte) string {
	if string(b) != s.topic {
		s.topic = s.str(b)
	}
	return s.topic
}

// messages returns n Messages, not cleared (decode writes each whole),
// and the pointers to them.
func (sc *scratch) messages(n int) ([]Message, []*Message) {
	if cap(sc.msgs) < n {
		sc.msgs, sc.ptrs = make([]Message, n), make([]*Message, n)
	}
	return sc.msgs[:n], sc.ptrs[:n]
}

// resultArrays returns n cleared Results and as many spare Outputs, not
// cleared: each is written whole when handed out (batchWriter.Output).
func (sc *scratch) resultArrays(n int) ([]Result, []Output) {
	if cap(sc.results) < n {
		sc.results, sc.outputs, sc.dirty = make([]Result, n), make([]Output, n), 0
	}
	rs := sc.results[:n]
	clear(rs)
	return rs, sc.outputs[:n]
}

// outputsUsed says that the batch just handled took the first n of the
// outputs: those past n that an earlier batch left are cleared, so that
// they keep nothing of it alive. The first n are overwritten by the
// next batch that takes them.
func (sc *scratch) outputsUsed(n int) {
	if sc.dirty > n {
		clear(sc.outputs[n:sc.dirty])
	}
	sc.dirty = n
}

// Decode reads a Batch into in, setting each message's index.
func (in *batchIn) Decode(b []byte) error { return in.decode(b, nil) }

// decode reads a Batch into in, in sc's arrays when sc is not nil.
func (in *batchIn) decode(b []byte, sc *scratch) error {
	n, err := wire.Count(b, wire.BatchMessages)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	var ms []Message
	var out []*Message
	st := &strs{}
	if sc != nil {
		ms, out = sc.messages(n)
		st = &sc.strs
		st.copy = in.chunk != nil
		if !st.copy {
			st.topic = "" // aliases the frame: not kept past it
		}
	} else {
		ms, out = make([]Message, n), make([]*Message, n) // one allocation for the whole batch
	}
	in.msgs = out
	in.state = in.state[:0]
	if sc != nil {
		in.state = sc.entries[:0]
		defer func() { sc.entries = in.state }()
	}
	for i := 0; len(b) > 0; {
		num, typ, v, body, rest, _ := wire.Field(b) // checked by Count
		b = rest
		if typ == protowire.VarintType {
			switch num {
			case wire.BatchSeq:
				in.seq = v
			case wire.BatchTimeout:
				in.timeoutMs = int64(v)
			}
			continue
		}
		if typ == protowire.BytesType {
			switch num {
			case wire.BatchTraceParent:
				in.traceParent = st.str(body)
				continue
			case wire.BatchTraceState:
				in.traceState = st.str(body)
				continue
			case wire.BatchState:
				e, err := decodeStateEntry(body, st)
				if err != nil {
					return fmt.Errorf("batch: state: %w", err)
				}
				in.state = append(in.state, e)
				continue
			}
		}
		if num != wire.BatchMessages || typ != protowire.BytesType {
			continue
		}
		// Decoded on the stack and written whole: one pass over the
		// array's memory, not a clearing pass before the fields.
		var dm Message
		dm.index = i
		err := decodeMessage(&dm, body, st)
		m := &ms[i]
		*m = dm
		out[i] = m
		i++
		if err != nil {
			return fmt.Errorf("batch: message %d: %w", i-1, err)
		}
	}
	return nil
}

// decodeStateEntry reads a StateEntry.
func decodeStateEntry(b []byte, st *strs) (StateEntry, error) {
	var e StateEntry
	for len(b) > 0 {
		num, typ, _, fb, rest, err := wire.Field(b)
		if err != nil {
			return e, err
		}
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case wire.EntryKey:
			e.Key = st.str(fb)
		case wire.EntryValue:
			e.Value = wire.Blob(fb)
		}
	}
	return e, nil
}

func decodeMessage(m *Message, b []byte, st *strs) error {
	for len(b) > 0 {
		num, typ, v, fb, rest, err := wire.Field(b)
		if err != nil {
			return err
		}
		b = rest
		if typ == protowire.VarintType {
			switch num {
			case wire.MsgPublishTime:
				m.PublishTime = wire.FromMillis(int64(v))
			case wire.MsgEventTime:
				m.EventTime = wire.FromMillis(int64(v))
			case wire.MsgRedelivery:
				m.RedeliveryCount = uint32(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case wire.MsgID:
			m.ID = st.str(fb)
		case wire.MsgTopic:
			m.Topic = st.interned(fb)
		case wire.MsgKey:
			m.Key = st.str(fb)
		case wire.MsgOrderingKey:
			m.OrderingKey = wire.Blob(fb)
		case wire.MsgProperties:
			if m.Properties, err = wire.DecodePropsWith(m.Properties, fb, st.str); err != nil {
				return err
			}
		case wire.MsgPayload:
			m.Payload = wire.Blob(fb)
		case wire.MsgTraceParent:
			m.TraceParent = st.str(fb)
		case wire.MsgTraceState:
			m.TraceState = st.str(fb)
		}
	}
	return nil
}
