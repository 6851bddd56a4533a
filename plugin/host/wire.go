package host

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The host's end of the hand encoding (plugin/internal/wire explains it):
// it encodes a Batch straight from the SDK's Messages and decodes a
// BatchResult into results that Instance.decodeResults checks. The
// plugin's end does the opposite two.

// batchOut is a Batch the host sends.
type batchOut struct {
	batch     Batch
	seq       uint64
	timeoutMs int64
	msgsSize  int // the encoded size of the messages once known, else 0
	// traceParent and traceState are the trace context of the host's
	// span for the batch, "" when it is not traced.
	traceParent, traceState string
	// state is the keyed state sent with the batch (StateBatch), nil
	// for none.
	state []plugin.StateEntry
	// fields are the messages' fields, read once from the batch, sizes
	// their encoded sizes and ids their ids' text, one after the other
	// (idEnds): worked out by Size for Append.
	fields []Fields
	sizes  []int
	ids    []byte
	idEnds []int32
}

// resultsIn is a BatchResult as the host reads it.
type resultsIn struct {
	res   []wireResult
	seq   uint64
	panic []byte // an encoded Panic, nil when there is none

	// compact says the answer may come in contract version 3's compact
	// form (set by the carrier before Decode); codes, echoTopic and
	// payloads are that form's fields, codes nil when the answer is in
	// the full form.
	compact   bool
	codes     []byte
	echoTopic string
	payloads  [][]byte
	// compactState says the compact form may carry state changes
	// (contract version 4): states are the new values, in order.
	compactState bool
	states       [][]byte
}

// wireResult is one Result as read from the wire, before it is checked.
type wireResult struct {
	index   uint32
	outcome int32
	delayMs int64
	reason  string
	outputs []plugin.Output
	state   *plugin.StateChange // nil for none
}

// Size is the size of b on the wire. The messages' part is computed once:
// the host checks it against the size limit before sending, and the codec
// needs it again.
func (b *batchOut) Size() int {
	if b.msgsSize == 0 {
		n := b.batch.Len()
		// The arrays of the last batch sent, when b is a recycled one
		// (batchStream.process); room for ids of a usual length.
		b.sizes, b.idEnds = slices.Grow(b.sizes[:0], n), slices.Grow(b.idEnds[:0], n)
		b.ids = slices.Grow(b.ids[:0], n*idRoom)
		if cap(b.fields) < n {
			b.fields = make([]Fields, n)
		}
		b.fields = b.fields[:n]
		for i := range n {
			f := &b.fields[i]
			b.batch.Fields(i, f)
			start := len(b.ids)
			b.ids = b.batch.AppendID(b.ids, i)
			size := messageSize(f, b.ids[start:])
			b.sizes = append(b.sizes, size)
			b.idEnds = append(b.idEnds, int32(len(b.ids)))
			b.msgsSize += wire.SizeBytes(size)
		}
	}
	n := 0
	for k := range b.state {
		n += wire.SizeBytes(stateEntrySize(&b.state[k]))
	}
	return b.msgsSize + wire.SizeVarint(b.seq) + wire.SizeVarint(uint64(b.timeoutMs)) +
		wire.SizeStr(b.traceParent) + wire.SizeStr(b.traceState) + n
}

func stateEntrySize(e *plugin.StateEntry) int {
	return wire.SizeStr(e.Key) + wire.SizeBlob(e.Value)
}

// idRoom is the room made for a message's id text: "ledger:entry:-1:-1"
// with ledger and entry ids of up to 7 digits.
const idRoom = 24

// reset makes b ready for batch, keeping its arrays (the fields
// cleared: they point into the last batch).
func (b *batchOut) reset(batch Batch) {
	clear(b.fields)
	*b = batchOut{batch: batch, fields: b.fields[:0], sizes: b.sizes[:0], ids: b.ids[:0], idEnds: b.idEnds[:0]}
	if sb, ok := batch.(StateBatch); ok {
		b.state = sb.State()
	}
}

func (b *batchOut) Append(buf []byte) []byte {
	if len(b.sizes) != b.batch.Len() || len(b.fields) != len(b.sizes) {
		b.msgsSize = 0
		b.Size()
	}
	buf = b.appendMessages(buf)
	buf = wire.AppendVarint(buf, wire.BatchSeq, b.seq)
	buf = wire.AppendVarint(buf, wire.BatchTimeout, uint64(b.timeoutMs))
	buf = wire.AppendStr(buf, wire.BatchTraceParent, b.traceParent)
	buf = wire.AppendStr(buf, wire.BatchTraceState, b.traceState)
	for k := range b.state {
		e := &b.state[k]
		buf = wire.AppendLen(buf, wire.BatchState, stateEntrySize(e))
		buf = wire.AppendStr(buf, wire.EntryKey, e.Key)
		buf = wire.AppendBlob(buf, wire.EntryValue, e.Value)
	}
	return buf
}

// messageSize is the encoded size of a message of fields f and id (its
// text).
func messageSize(f *Fields, id []byte) int {
	return wire.SizeBlob(id) + wire.SizeStr(f.Topic) + wire.SizeStr(f.Key) + wire.SizeStr(f.OrderingKey) +
		wire.SizeProps(f.Properties) + wire.SizeBlob(f.Payload) +
		wire.SizeVarint(uint64(wire.Millis(f.PublishTime))) + wire.SizeVarint(uint64(wire.Millis(f.EventTime))) +
		wire.SizeVarint(uint64(f.RedeliveryCount)) + wire.SizeStr(f.TraceParent) + wire.SizeStr(f.TraceState)
}

// appendMessages appends the batch's messages, straight from its Fields
// and the ids Size wrote, as handler.proto's Message each (the ordering
// key, bytes there, has a string's encoding).
func (b *batchOut) appendMessages(buf []byte) []byte {
	start := int32(0)
	for i, size := range b.sizes {
		f := &b.fields[i]
		buf = wire.AppendLen(buf, wire.BatchMessages, size)
		buf = wire.AppendBlob(buf, wire.MsgID, b.ids[start:b.idEnds[i]])
		start = b.idEnds[i]
		buf = wire.AppendStr(buf, wire.MsgTopic, f.Topic)
		buf = wire.AppendStr(buf, wire.MsgKey, f.Key)
		buf = wire.AppendStr(buf, wire.MsgOrderingKey, f.OrderingKey)
		buf = wire.AppendProps(buf, wire.MsgProperties, f.Properties)
		buf = wire.AppendBlob(buf, wire.MsgPayload, f.Payload)
		buf = wire.AppendVarint(buf, wire.MsgPublishTime, uint64(wire.Millis(f.PublishTime)))
		buf = wire.AppendVarint(buf, wire.MsgEventTime, uint64(wire.Millis(f.EventTime)))
		buf = wire.AppendVarint(buf, wire.MsgRedelivery, uint64(f.RedeliveryCount))
		buf = wire.AppendStr(buf, wire.MsgTraceParent, f.TraceParent)
		buf = wire.AppendStr(buf, wire.MsgTraceState, f.TraceState)
	}
	return buf
}

// outcomeFromPB returns false for an outcome this version does not know.
func outcomeFromPB(o pb.Outcome) (plugin.Outcome, bool) {
	switch o {
	case pb.Outcome_OUTCOME_ACK:
		return plugin.OutcomeAck, true
	case pb.Outcome_OUTCOME_RETRY:
		return plugin.OutcomeRetry, true
	case pb.Outcome_OUTCOME_DEAD_LETTER:
		return plugin.OutcomeDeadLetter, true
	case pb.Outcome_OUTCOME_DROP:
		return plugin.OutcomeDrop, true
	}
	return 0, false
}

// Decode reads a BatchResult into out.
func (out *resultsIn) Decode(b []byte) error {
	n, err := wire.Count(b, wire.ResultsResults)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	// The results' array is out's from its last answer (resultsIn are
	// recycled, batchStream.recycle); the outputs' is new, for the
	// caller keeps them.
	rs := out.res[:0]
	if cap(rs) < n {
		rs = make([]wireResult, 0, n)
	}
	clear(rs[:n])
	out.seq, out.panic = 0, nil
	out.codes, out.echoTopic, out.payloads, out.states = nil, "", out.payloads[:0], out.states[:0]
	defer func() { out.res = rs }()
	var outputs []plugin.Output // r's outputs are consecutive in here
	var topic string
	for len(b) > 0 {
		num, typ, v, body, rest, err := wire.Field(b)
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		b = rest
		switch {
		case num == wire.ResultsSeq && typ == protowire.VarintType:
			out.seq = v
			continue
		case num == wire.ResultsPanic && typ == protowire.BytesType:
			out.panic = wire.Blob(body)
			continue
		case out.compact && typ == protowire.BytesType && num == wire.ResultsOutcomes:
			out.codes = body[:len(body):len(body)] // not nil: the compact form
			continue
		case out.compact && typ == protowire.BytesType && num == wire.ResultsEchoTopic:
			out.echoTopic = wire.Str(body)
			continue
		case out.compact && typ == protowire.BytesType && num == wire.ResultsPayloads:
			out.payloads = append(out.payloads, wire.Blob(body))
			continue
		case out.compactState && typ == protowire.BytesType && num == wire.ResultsStates:
			out.states = append(out.states, wire.Blob(body))
			continue
		case num != wire.ResultsResults || typ != protowire.BytesType:
			continue
		}
		rs = append(rs, wireResult{})
		if outputs, err = decodeResult(&rs[len(rs)-1], body, outputs, n, &topic); err != nil {
			return fmt.Errorf("results: result %d: %w", len(rs)-1, err)
		}
		outputs = outputs[len(outputs):]
	}
	return nil
}

// decodeResult reads one Result into r. Its outputs go on the end of
// outputs, which grows by room for n more when full; the grown slice is
// returned.
func decodeResult(r *wireResult, b []byte, outputs []plugin.Output, n int, topic *string) ([]plugin.Output, error) {
	for len(b) > 0 {
		num, typ, v, fb, rest, err := wire.Field(b)
		if err != nil {
			return outputs, err
		}
		b = rest
		if typ == protowire.VarintType {
			switch num {
			case wire.ResIndex:
				r.index = uint32(v)
			case wire.ResOutcome:
				r.outcome = int32(v)
			case wire.ResDelay:
				r.delayMs = int64(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case wire.ResReason:
			r.reason = wire.Str(fb)
		case wire.ResState:
			c, err := decodeStateChange(fb)
			if err != nil {
				// The index comes first on the wire (field 1).
				return outputs, fmt.Errorf("the state change of message index %d: %w", r.index, err)
			}
			r.state = c
		case wire.ResOutputs:
			if len(outputs) == cap(outputs) {
				// A new array for the rest of the answer; r's outputs
				// so far move with it.
				grown := make([]plugin.Output, len(r.outputs), len(r.outputs)+max(n, 1))
				copy(grown, r.outputs)
				outputs = grown
			}
			outputs = outputs[:len(outputs)+1]
			o := &outputs[len(outputs)-1]
			r.outputs = outputs[len(outputs)-len(r.outputs)-1 : len(outputs) : len(outputs)]
			if err := decodeOutput(o, fb, topic); err != nil {
				return outputs, err
			}
		}
	}
	return outputs, nil
}

// decodeStateChange reads a StateChange; its value aliases b.
func decodeStateChange(b []byte) (*plugin.StateChange, error) {
	c := &plugin.StateChange{}
	for len(b) > 0 {
		num, typ, v, fb, rest, err := wire.Field(b)
		if err != nil {
			return nil, err
		}
		b = rest
		switch {
		case typ == protowire.VarintType && num == wire.ChangeDelete:
			c.Delete = v != 0
		case typ == protowire.BytesType && num == wire.ChangeKey:
			c.Key = wire.Str(fb)
		case typ == protowire.BytesType && num == wire.ChangeValue:
			c.Value = wire.Blob(fb)
		}
	}
	return c, nil
}

func decodeOutput(o *plugin.Output, b []byte, topic *string) error {
	for len(b) > 0 {
		num, typ, v, fb, rest, err := wire.Field(b)
		if err != nil {
			return err
		}
		b = rest
		if typ == protowire.VarintType {
			if num == wire.OutEventTime {
				o.EventTime = wire.FromMillis(int64(v))
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case wire.OutTopic:
			o.Topic = wire.Interned(topic, fb)
		case wire.OutKey:
			o.Key = wire.Str(fb)
		case wire.OutOrderingKey:
			o.OrderingKey = wire.Blob(fb)
		case wire.OutProperties:
			if o.Properties, err = wire.DecodeProps(o.Properties, fb); err != nil {
				return err
			}
		case wire.OutPayload:
			o.Payload = wire.Blob(fb)
		case wire.OutTraceParent:
			o.TraceParent = wire.Str(fb)
		case wire.OutTraceState:
			o.TraceState = wire.Str(fb)
		}
	}
	return nil
}
