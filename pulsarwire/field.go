package pulsarwire

import "google.golang.org/protobuf/encoding/protowire"

// ConsumeField reads one protobuf field of b: its number and type,
// a varint's value or a length-delimited body, and its length in b (< 0
// when it is malformed). Other types are skipped whole. The hand
// decoders of the hot paths (a batch's messages, a stored entry's
// metadata) read fields with it.
func ConsumeField(b []byte) (num protowire.Number, typ protowire.Type, v uint64, body []byte, n int) {
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 {
		return num, typ, 0, nil, n
	}
	var m int
	switch typ {
	case protowire.VarintType:
		v, m = protowire.ConsumeVarint(b[n:])
	case protowire.BytesType:
		body, m = protowire.ConsumeBytes(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return num, typ, 0, nil, m
	}
	return num, typ, v, body, n + m
}
