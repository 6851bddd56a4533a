package plugin

import (
	"errors"
	"fmt"
	"unsafe"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// A Batch and its BatchResult (on the Batches stream, or as a Process
// call's request and answer) are encoded and decoded here by hand, straight from and to the SDK's own types,
// instead of through the generated protobuf types. The bytes are exactly
// those of handler.proto (contract version 1): a peer that uses the
// generated code reads and writes the same wire. What this saves, per
// message, is the intermediate pb.Message / pb.Result / pb.Output values,
// protobuf's reflection-driven marshalling, and a copy of every string and
// byte field on decoding.
//
// Lifetime: a decoded batch or answer aliases one buffer that holds the
// received gRPC message (a copy of it made here, owned by nobody else and
// never written to). Strings, payloads and keys point into it; the buffer
// lives for as long as any of them is referenced.

// wireBatch is a Batch: encoded from the host's batch, decoded on the
// plugin's side.
type wireBatch struct {
	msgs      []*Message
	seq       uint64
	timeoutMs int64
	msgsSize  int // the encoded size of msgs once known, else 0
	// traceParent and traceState are the trace context of the host's
	// span for the batch, "" when it is not traced.
	traceParent, traceState string
}

// encodedSize is the size of b on the wire. The messages' part is
// computed once: the host checks it against the size limit before
// sending, and the codec needs it again.
func (b *wireBatch) encodedSize() int {
	if b.msgsSize == 0 {
		b.msgsSize = batchSize(b.msgs)
	}
	return b.msgsSize + sizeVarint(b.seq) + sizeVarint(uint64(b.timeoutMs)) +
		sizeStr(b.traceParent) + sizeStr(b.traceState)
}

// wireResults is a BatchResult, encoded from the SDK's results, or a
// panic (encoded Panic message) with no results.
type wireResults struct {
	res   []Result
	seq   uint64
	panic []byte
}

// wireResultsIn is a BatchResult, decoded on the host's side; its content
// is checked by Instance.decodeResults.
type wireResultsIn struct {
	res   []wireResult
	seq   uint64
	panic []byte // an encoded Panic, nil when there is none
}

// wireResult is one Result as read from the wire, before it is checked.
type wireResult struct {
	index   uint32
	outcome int32
	delayMs int64
	reason  string
	outputs []Output
}

// codec is the gRPC codec of both sides: the wire types above by hand,
// everything else (Init, Close, go-plugin's own services) by protobuf.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	var size int
	switch v := v.(type) {
	case *wireBatch:
		size = v.encodedSize()
	case *wireResults:
		size = resultsSize(v.res) + sizeVarint(v.seq) + sizeBlob(v.panic)
	default:
		return c.proto.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b := (*buf)[:0]
	switch v := v.(type) {
	case *wireBatch:
		b = appendBatch(b, v.msgs)
		b = appendVarint(b, fBatchSeq, v.seq)
		b = appendVarint(b, fBatchTimeout, uint64(v.timeoutMs))
		b = appendStr(b, fBatchTraceParent, v.traceParent)
		b = appendStr(b, fBatchTraceState, v.traceState)
	case *wireResults:
		b = appendResults(b, v.res)
		b = appendVarint(b, fResultsSeq, v.seq)
		b = appendBlob(b, fResultsPanic, v.panic)
	}
	if len(b) != size {
		pool.Put(buf)
		return nil, fmt.Errorf("plugin: encoded %d bytes, expected %d", len(b), size)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch v := v.(type) {
	case *wireBatch:
		return decodeBatch(data.Materialize(), v)
	case *wireResultsIn:
		return decodeResults(data.Materialize(), v)
	}
	return c.proto.Unmarshal(data, v)
}

// Field numbers of handler.proto.
const (
	fBatchMessages = 1
	fBatchSeq      = 2
	fBatchTimeout  = 3
	// Batch 4 and 5, Output 7 and 8: the trace context (docs/telemetry.md).
	fBatchTraceParent = 4
	fBatchTraceState  = 5

	fMsgID          = 1
	fMsgTopic       = 2
	fMsgKey         = 3
	fMsgOrderingKey = 4
	fMsgProperties  = 5
	fMsgPayload     = 6
	fMsgPublishTime = 7
	fMsgEventTime   = 8
	fMsgRedelivery  = 9
	fMsgTraceParent = 10
	fMsgTraceState  = 11

	fResultsResults = 1
	fResultsSeq     = 2
	fResultsPanic   = 3

	fResIndex   = 1
	fResOutcome = 2
	fResDelay   = 3
	fResReason  = 4
	fResOutputs = 5

	fOutTopic       = 1
	fOutKey         = 2
	fOutOrderingKey = 3
	fOutProperties  = 4
	fOutPayload     = 5
	fOutEventTime   = 6
	fOutTraceParent = 7
	fOutTraceState  = 8
)

// Sizes. A proto3 field at its zero value is not sent.

func sizeBytes(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n } // tag < 16

func sizeStr(s string) int {
	if s == "" {
		return 0
	}
	return sizeBytes(len(s))
}

func sizeBlob(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return sizeBytes(len(b))
}

func sizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func sizeProps(p map[string]string) int {
	n := 0
	for k, v := range p {
		n += sizeBytes(sizeStr(k) + sizeStr(v))
	}
	return n
}

func messageSize(m *Message) int {
	return sizeStr(m.ID) + sizeStr(m.Topic) + sizeStr(m.Key) + sizeBlob(m.OrderingKey) +
		sizeProps(m.Properties) + sizeBlob(m.Payload) +
		sizeVarint(uint64(millis(m.PublishTime))) + sizeVarint(uint64(millis(m.EventTime))) +
		sizeVarint(uint64(m.RedeliveryCount)) + sizeStr(m.TraceParent) + sizeStr(m.TraceState)
}

func batchSize(msgs []*Message) int {
	n := 0
	for _, m := range msgs {
		n += sizeBytes(messageSize(m))
	}
	return n
}

func outputSize(o *Output) int {
	return sizeStr(o.Topic) + sizeStr(o.Key) + sizeBlob(o.OrderingKey) + sizeProps(o.Properties) +
		sizeBlob(o.Payload) + sizeVarint(uint64(millis(o.EventTime))) + sizeStr(o.TraceParent) + sizeStr(o.TraceState)
}

func resultSize(i int, r *Result) int {
	n := sizeVarint(uint64(uint32(i))) + sizeVarint(uint64(outcomeToPB[r.Outcome])) +
		sizeVarint(uint64(r.RetryDelay.Milliseconds())) + sizeStr(r.Reason)
	for k := range r.Outputs {
		n += sizeBytes(outputSize(&r.Outputs[k]))
	}
	return n
}

func resultsSize(rs []Result) int {
	n := 0
	for i := range rs {
		n += sizeBytes(resultSize(i, &rs[i]))
	}
	return n
}

// Encoding.

func appendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBlob(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendLen(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendProps(b []byte, num protowire.Number, p map[string]string) []byte {
	for k, v := range p {
		b = appendLen(b, num, sizeStr(k)+sizeStr(v))
		b = appendStr(b, 1, k)
		b = appendStr(b, 2, v)
	}
	return b
}

func appendBatch(b []byte, msgs []*Message) []byte {
	for _, m := range msgs {
		b = appendLen(b, fBatchMessages, messageSize(m))
		b = appendStr(b, fMsgID, m.ID)
		b = appendStr(b, fMsgTopic, m.Topic)
		b = appendStr(b, fMsgKey, m.Key)
		b = appendBlob(b, fMsgOrderingKey, m.OrderingKey)
		b = appendProps(b, fMsgProperties, m.Properties)
		b = appendBlob(b, fMsgPayload, m.Payload)
		b = appendVarint(b, fMsgPublishTime, uint64(millis(m.PublishTime)))
		b = appendVarint(b, fMsgEventTime, uint64(millis(m.EventTime)))
		b = appendVarint(b, fMsgRedelivery, uint64(m.RedeliveryCount))
		b = appendStr(b, fMsgTraceParent, m.TraceParent)
		b = appendStr(b, fMsgTraceState, m.TraceState)
	}
	return b
}

func appendResults(b []byte, rs []Result) []byte {
	for i := range rs {
		r := &rs[i]
		b = appendLen(b, fResultsResults, resultSize(i, r))
		b = appendVarint(b, fResIndex, uint64(uint32(i)))
		b = appendVarint(b, fResOutcome, uint64(outcomeToPB[r.Outcome]))
		b = appendVarint(b, fResDelay, uint64(r.RetryDelay.Milliseconds()))
		b = appendStr(b, fResReason, r.Reason)
		for k := range r.Outputs {
			o := &r.Outputs[k]
			b = appendLen(b, fResOutputs, outputSize(o))
			b = appendStr(b, fOutTopic, o.Topic)
			b = appendStr(b, fOutKey, o.Key)
			b = appendBlob(b, fOutOrderingKey, o.OrderingKey)
			b = appendProps(b, fOutProperties, o.Properties)
			b = appendBlob(b, fOutPayload, o.Payload)
			b = appendVarint(b, fOutEventTime, uint64(millis(o.EventTime)))
			b = appendStr(b, fOutTraceParent, o.TraceParent)
			b = appendStr(b, fOutTraceState, o.TraceState)
		}
	}
	return b
}

// Decoding. Fields may come in any order and more than once (the last
// wins, map entries merge); unknown fields are skipped, as protobuf does.

var errWire = errors.New("malformed protobuf")

// field reads one field: its number, its type, a varint value or a
// length-delimited body, and the rest of b.
func field(b []byte) (num protowire.Number, typ protowire.Type, v uint64, body, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, nil, nil, errWire
	}
	b = b[n:]
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(b)
	case protowire.BytesType:
		body, n = protowire.ConsumeBytes(b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return 0, 0, 0, nil, nil, errWire
	}
	return num, typ, v, body, b[n:], nil
}

// str aliases b as a string; b is part of a received buffer that nothing
// writes to (see the lifetime note above).
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// blob is b, or nil when it is empty, as protobuf decodes an absent field.
func blob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

// interned returns s's string, the previous one if it has the same
// bytes: a batch's topics are mostly one.
func interned(prev *string, b []byte) string {
	if string(b) == *prev {
		return *prev
	}
	*prev = str(b)
	return *prev
}

func decodeProps(p map[string]string, b []byte) (map[string]string, error) {
	var k, v string
	for len(b) > 0 {
		num, typ, _, body, rest, err := field(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case 1:
			k = str(body)
		case 2:
			v = str(body)
		}
	}
	if p == nil {
		p = make(map[string]string)
	}
	p[k] = v
	return p, nil
}

// count returns how many fields num of type bytes are at b's top level.
func count(b []byte, num protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		fn, typ, _, _, rest, err := field(b)
		if err != nil {
			return 0, err
		}
		if fn == num && typ == protowire.BytesType {
			n++
		}
		b = rest
	}
	return n, nil
}

// decodeBatch decodes a Batch into in.
func decodeBatch(b []byte, in *wireBatch) error {
	n, err := count(b, fBatchMessages)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	ms := make([]Message, n) // one allocation for the whole batch
	out := make([]*Message, n)
	in.msgs = out
	var topic string
	for i := 0; len(b) > 0; {
		num, typ, v, body, rest, _ := field(b) // checked by count
		b = rest
		if typ == protowire.VarintType {
			switch num {
			case fBatchSeq:
				in.seq = v
			case fBatchTimeout:
				in.timeoutMs = int64(v)
			}
			continue
		}
		if typ == protowire.BytesType {
			switch num {
			case fBatchTraceParent:
				in.traceParent = str(body)
				continue
			case fBatchTraceState:
				in.traceState = str(body)
				continue
			}
		}
		if num != fBatchMessages || typ != protowire.BytesType {
			continue
		}
		m := &ms[i]
		m.index = i
		out[i] = m
		i++
		for len(body) > 0 {
			num, typ, v, fb, rest, err := field(body)
			if err != nil {
				return fmt.Errorf("batch: message %d: %w", i-1, err)
			}
			body = rest
			if typ == protowire.VarintType {
				switch num {
				case fMsgPublishTime:
					m.PublishTime = fromMillis(int64(v))
				case fMsgEventTime:
					m.EventTime = fromMillis(int64(v))
				case fMsgRedelivery:
					m.RedeliveryCount = uint32(v)
				}
				continue
			}
			if typ != protowire.BytesType {
				continue
			}
			switch num {
			case fMsgID:
				m.ID = str(fb)
			case fMsgTopic:
				m.Topic = interned(&topic, fb)
			case fMsgKey:
				m.Key = str(fb)
			case fMsgOrderingKey:
				m.OrderingKey = blob(fb)
			case fMsgProperties:
				if m.Properties, err = decodeProps(m.Properties, fb); err != nil {
					return fmt.Errorf("batch: message %d: %w", i-1, err)
				}
			case fMsgPayload:
				m.Payload = blob(fb)
			case fMsgTraceParent:
				m.TraceParent = str(fb)
			case fMsgTraceState:
				m.TraceState = str(fb)
			}
		}
	}
	return nil
}

// decodeResults reads a BatchResult into out.
func decodeResults(b []byte, out *wireResultsIn) error {
	n, err := count(b, fResultsResults)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	rs := make([]wireResult, 0, n)
	defer func() { out.res = rs }()
	var outputs []Output // r's outputs are consecutive in here
	var topic string
	for len(b) > 0 {
		num, typ, v, body, rest, err := field(b)
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		b = rest
		switch {
		case num == fResultsSeq && typ == protowire.VarintType:
			out.seq = v
			continue
		case num == fResultsPanic && typ == protowire.BytesType:
			out.panic = blob(body)
			continue
		case num != fResultsResults || typ != protowire.BytesType:
			continue
		}
		rs = append(rs, wireResult{})
		r := &rs[len(rs)-1]
		for len(body) > 0 {
			num, typ, v, fb, rest, err := field(body)
			if err != nil {
				return fmt.Errorf("results: result %d: %w", len(rs)-1, err)
			}
			body = rest
			if typ == protowire.VarintType {
				switch num {
				case fResIndex:
					r.index = uint32(v)
				case fResOutcome:
					r.outcome = int32(v)
				case fResDelay:
					r.delayMs = int64(v)
				}
				continue
			}
			if typ != protowire.BytesType {
				continue
			}
			switch num {
			case fResReason:
				r.reason = str(fb)
			case fResOutputs:
				if len(outputs) == cap(outputs) {
					// A new array for the rest of the answer; r's outputs
					// so far move with it.
					grown := make([]Output, len(r.outputs), len(r.outputs)+max(n, 1))
					copy(grown, r.outputs)
					outputs = grown
				}
				outputs = outputs[:len(outputs)+1]
				o := &outputs[len(outputs)-1]
				r.outputs = outputs[len(outputs)-len(r.outputs)-1 : len(outputs) : len(outputs)]
				if err := decodeOutput(o, fb, &topic); err != nil {
					return fmt.Errorf("results: result %d: %w", len(rs)-1, err)
				}
			}
		}
		outputs = outputs[len(outputs):]
	}
	return nil
}

func decodeOutput(o *Output, b []byte, topic *string) error {
	for len(b) > 0 {
		num, typ, v, fb, rest, err := field(b)
		if err != nil {
			return err
		}
		b = rest
		if typ == protowire.VarintType {
			if num == fOutEventTime {
				o.EventTime = fromMillis(int64(v))
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case fOutTopic:
			o.Topic = interned(topic, fb)
		case fOutKey:
			o.Key = str(fb)
		case fOutOrderingKey:
			o.OrderingKey = blob(fb)
		case fOutProperties:
			if o.Properties, err = decodeProps(o.Properties, fb); err != nil {
				return err
			}
		case fOutPayload:
			o.Payload = blob(fb)
		case fOutTraceParent:
			o.TraceParent = str(fb)
		case fOutTraceState:
			o.TraceState = str(fb)
		}
	}
	return nil
}
