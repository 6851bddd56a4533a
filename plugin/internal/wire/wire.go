// Package wire holds the pieces of the handler contract's hand encoding
// that both ends share: handler.proto's field numbers, protobuf sizes,
// appends and reads, and the gRPC codec that sends a hand-encoded value
// as is and anything else through protobuf.
//
// A Batch and its BatchResult (on the Batches stream) are encoded and
// decoded by hand, straight from and to the SDK's own types, instead of
// through the generated protobuf types. The bytes are exactly those of
// handler.proto (contract version 1): a peer that uses the generated code
// reads and writes the same wire. What this saves, per message, is the
// intermediate pb.Message / pb.Result / pb.Output values, protobuf's
// reflection-driven marshalling, and a copy of every string and byte field
// on decoding. Each end encodes what it sends and decodes what it
// receives: the host a Batch out and a BatchResult in (plugin/host's
// wire.go), the plugin the other way (plugin's wire.go).
//
// Text and bytes: handler.proto makes keys and properties bytes and the
// other text fields strings; both are the same wire type, so the SDK's Go
// strings carry either unchanged (a Go string holds any bytes). What the
// contract asks of a sender, valid UTF-8 in its string fields, the SDK
// ensures where a handler writes one (a reason, a panic report).
//
// Lifetime: a decoded batch or answer aliases one buffer that holds the
// received gRPC message (a copy of it made by gRPC's Materialize, owned by
// nobody else and never written to). Strings, payloads and keys point
// into it; the buffer lives for as long as any of them is referenced.
package wire

import (
	"errors"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of handler.proto.
const (
	BatchMessages = 1
	BatchSeq      = 2
	BatchTimeout  = 3
	// Batch 4 and 5, Output 7 and 8: the trace context (docs/telemetry.md).
	BatchTraceParent = 4
	BatchTraceState  = 5
	// Keyed state: Batch 10 (StateEntry), Result 6 (StateChange).
	BatchState = 10
	EntryKey   = 1
	EntryValue = 2

	ChangeKey    = 1
	ChangeValue  = 2
	ChangeDelete = 3

	MsgID          = 1
	MsgTopic       = 2
	MsgKey         = 3
	MsgOrderingKey = 4
	MsgProperties  = 5
	MsgPayload     = 6
	MsgPublishTime = 7
	MsgEventTime   = 8
	MsgRedelivery  = 9
	MsgTraceParent = 10
	MsgTraceState  = 11

	ResultsResults = 1
	ResultsSeq     = 2
	ResultsPanic   = 3
	// Contract version 3's compact form of a BatchResult.
	ResultsOutcomes  = 4
	ResultsEchoTopic = 5
	ResultsPayloads  = 6
	// Contract version 4's: the new values of the messages whose byte
	// has CompactState.
	ResultsStates = 7

	ResIndex   = 1
	ResOutcome = 2
	ResDelay   = 3
	ResReason  = 4
	ResOutputs = 5
	ResState   = 6

	OutTopic       = 1
	OutKey         = 2
	OutOrderingKey = 3
	OutProperties  = 4
	OutPayload     = 5
	OutEventTime   = 6
	OutTraceParent = 7
	OutTraceState  = 8
)

// The bytes of ResultsOutcomes, one per message (handler.proto, BatchResult).
const (
	CompactAck         = 0 // acknowledged, no output
	CompactEcho        = 1 // acknowledged, one output echoing the input to the echo topic
	CompactEchoPayload = 2 // the same with the next of ResultsPayloads as payload
	CompactFull        = 3 // the full Result is among ResultsResults
	// CompactState, added to CompactAck, CompactEcho or
	// CompactEchoPayload (contract version 4): the message's key also
	// takes the next of ResultsStates as its value.
	CompactState = 4
)

// Millis is t in Unix milliseconds, 0 for the zero time (not sent).
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis is Millis's inverse: 0 is the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Sizes. A proto3 field at its zero value is not sent.

// SizeBytes is the size of a length-delimited field of n bytes (tag < 16).
func SizeBytes(n int) int {
	if n < 1<<7 {
		return 2 + n
	}
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

func SizeStr(s string) int {
	if s == "" {
		return 0
	}
	return SizeBytes(len(s))
}

func SizeBlob(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return SizeBytes(len(b))
}

func SizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

// SizeProps is the size of a map<string,string> field.
func SizeProps(p map[string]string) int {
	if len(p) == 0 {
		return 0 // most messages: no iterator set up
	}
	n := 0
	for k, v := range p {
		n += SizeBytes(SizeStr(k) + SizeStr(v))
	}
	return n
}

// Encoding.

// The appends take a short path for what a batch is made of: field
// numbers below 16 (a one-byte tag) and lengths and values below 2^14.

func AppendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return append(AppendLen(b, num, len(s)), s...)
}

func AppendBlob(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return append(AppendLen(b, num, len(v)), v...)
}

func AppendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	if num < 16 && v < 1<<7 {
		return append(b, byte(num)<<3|byte(protowire.VarintType), byte(v))
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// AppendLen starts a length-delimited field of n bytes.
func AppendLen(b []byte, num protowire.Number, n int) []byte {
	if num < 16 {
		tag := byte(num)<<3 | byte(protowire.BytesType)
		switch {
		case n < 1<<7:
			return append(b, tag, byte(n))
		case n < 1<<14:
			return append(b, tag, byte(n)|0x80, byte(n>>7))
		}
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// AppendProps appends a map<string,string> field.
func AppendProps(b []byte, num protowire.Number, p map[string]string) []byte {
	if len(p) == 0 {
		return b
	}
	for k, v := range p {
		b = AppendLen(b, num, SizeStr(k)+SizeStr(v))
		b = AppendStr(b, 1, k)
		b = AppendStr(b, 2, v)
	}
	return b
}

// Decoding. Fields may come in any order and more than once (the last
// wins, map entries merge); unknown fields are skipped, as protobuf does.

// ErrMalformed is the error of bytes that are not protobuf.
var ErrMalformed = errors.New("malformed protobuf")

// Field reads one field: its number, its type, a varint value or a
// length-delimited body, and the rest of b.
func Field(b []byte) (num protowire.Number, typ protowire.Type, v uint64, body, rest []byte, err error) {
	// The short path: a one-byte tag, a value or length of one or two
	// bytes.
	if len(b) >= 3 && b[0] < 0x80 && b[0] >= 1<<3 {
		num, typ = protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		x, k := uint64(b[1]), 2
		if x >= 0x80 {
			if b[2] >= 0x80 {
				if typ == protowire.VarintType {
					// A long varint (a time in milliseconds): no tag to
					// read again.
					v, n := protowire.ConsumeVarint(b[1:])
					if n < 0 {
						return 0, 0, 0, nil, nil, ErrMalformed
					}
					return num, typ, v, nil, b[1+n:], nil
				}
				return fieldSlow(b)
			}
			x, k = x&0x7f|uint64(b[2])<<7, 3
		}
		switch typ {
		case protowire.VarintType:
			return num, typ, x, nil, b[k:], nil
		case protowire.BytesType:
			if end := k + int(x); end <= len(b) {
				return num, typ, 0, b[k:end:end], b[end:], nil
			}
			return 0, 0, 0, nil, nil, ErrMalformed
		}
	}
	return fieldSlow(b)
}

func fieldSlow(b []byte) (num protowire.Number, typ protowire.Type, v uint64, body, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, nil, nil, ErrMalformed
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
		return 0, 0, 0, nil, nil, ErrMalformed
	}
	return num, typ, v, body, b[n:], nil
}

// Str aliases b as a string; b is part of a received buffer that nothing
// writes to (see the lifetime note above).
func Str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Blob is b, or nil when it is empty, as protobuf decodes an absent field.
func Blob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

// Interned returns b's string, the previous one if it has the same
// bytes: a batch's topics are mostly one.
func Interned(prev *string, b []byte) string {
	if string(b) == *prev {
		return *prev
	}
	*prev = Str(b)
	return *prev
}

// DecodeProps adds the map entry b to p (made when nil).
func DecodeProps(p map[string]string, b []byte) (map[string]string, error) {
	return DecodePropsWith(p, b, Str)
}

// DecodePropsWith is DecodeProps with its strings made by str (the SDK
// copies them out of a frame it recycles).
func DecodePropsWith(p map[string]string, b []byte, str func([]byte) string) (map[string]string, error) {
	var k, v string
	for len(b) > 0 {
		num, typ, _, body, rest, err := Field(b)
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

// Count returns how many fields num of type bytes are at b's top level.
func Count(b []byte, num protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		fn, typ, _, _, rest, err := Field(b)
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
