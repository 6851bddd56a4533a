package runtime

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The window path writes a changelog record for every message it takes
// and a JSON window for every add and fire: encoding/json's reflection
// was the largest cost of the receive loop in BenchmarkWindowCount. These
// append the same bytes json.Marshal makes for winMsg and windowPayload
// (TestWindowJSONIsJSONMarshals), field by field.

// appendWinMsg appends m as json.Marshal encodes it.
func appendWinMsg(b []byte, m *winMsg) []byte { return appendWinMsgQ(b, m, nil) }

// appendWinMsgQ is appendWinMsg with m's topic already quoted (unless
// nil): a window's messages mostly share theirs.
func appendWinMsgQ(b []byte, m *winMsg, topic []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, m.ID)
	b = append(b, `,"topic":`...)
	if topic != nil {
		b = append(b, topic...)
	} else {
		b = appendJSONString(b, m.Topic)
	}
	b = append(b, `,"key":`...)
	b = appendJSONString(b, m.Key)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, m.Time, 10)
	b = append(b, `,"payload":`...)
	b = appendJSONBytes(b, m.Payload)
	if len(m.Properties) > 0 {
		b = append(b, `,"properties":{`...)
		keys := make([]string, 0, len(m.Properties))
		for k := range m.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, m.Properties[k])
		}
		b = append(b, '}')
	}
	if m.EventTime != 0 {
		b = append(b, `,"event_time":`...)
		b = strconv.AppendInt(b, m.EventTime, 10)
	}
	if m.PublishTime != 0 {
		b = append(b, `,"publish_time":`...)
		b = strconv.AppendInt(b, m.PublishTime, 10)
	}
	b = append(b, `,"horizon":`...)
	b = strconv.AppendInt(b, m.Horizon, 10)
	return append(b, '}')
}

// winMsgSize is about the length of m's JSON, for the buffer it goes in.
func winMsgSize(m *winMsg) int {
	n := 160 + len(m.ID) + len(m.Topic) + len(m.Key) + (len(m.Payload)+2)/3*4
	for k, v := range m.Properties {
		n += len(k) + len(v) + 6
	}
	return n
}

// appendWindowPayload appends p as json.Marshal encodes it.
func appendWindowPayload(b []byte, p *windowPayload) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, p.Key)
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, p.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, p.End, 10)
	b = append(b, `,"fire":`...)
	b = strconv.AppendInt(b, int64(p.Fire), 10)
	b = append(b, `,"messages":`...)
	if p.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		var topic string
		var quoted []byte
		for i, m := range p.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			if m == nil {
				b = append(b, "null"...)
				continue
			}
			if quoted == nil || m.Topic != topic {
				topic, quoted = m.Topic, appendJSONString(quoted[:0], m.Topic)
			}
			b = appendWinMsgQ(b, m, quoted)
		}
		b = append(b, ']')
	}
	if len(p.Accumulator) > 0 {
		b = append(b, `,"accumulator":`...)
		b = appendJSONBytes(b, p.Accumulator)
	}
	if p.Add {
		b = append(b, `,"add":true`...)
	}
	if len(p.Replaces) > 0 {
		b = append(b, `,"replaces":[`...)
		for i, s := range p.Replaces {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, s, 10)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONBytes appends v as encoding/json does a []byte: base64, or
// null when nil.
func appendJSONBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// jsonEscaped are the bytes appendJSONString leaves to json.Marshal: a
// table, as every id, topic and key of a window's JSON is looked at.
var jsonEscaped = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// appendJSONString appends s quoted. Keys, ids and topics are plain
// ASCII nearly always; anything encoding/json would escape (quotes,
// backslashes, control characters, <, >, &, non-ASCII) goes through
// json.Marshal, so that the bytes are its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if jsonEscaped[s[i]] {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendAccRecord appends r as json.Marshal encodes it.
func appendAccRecord(b []byte, r *accRecord) []byte {
	b = append(b, '{')
	if len(r.Acc) > 0 {
		b = append(b, `"acc":`...)
		b = appendJSONBytes(b, r.Acc)
		b = append(b, ',')
	}
	b = append(b, `"n":`...)
	b = strconv.AppendInt(b, int64(r.N), 10)
	if len(r.HW) > 0 {
		b = append(b, `,"hw":{`...)
		topics := make([]string, 0, len(r.HW))
		for t := range r.HW {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		for i, t := range topics {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t)
			pos := r.HW[t]
			b = append(b, ":["...)
			b = strconv.AppendInt(b, pos[0], 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, pos[1], 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, pos[2], 10)
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if r.Fires > 0 {
		b = append(b, `,"fires":`...)
		b = strconv.AppendInt(b, int64(r.Fires), 10)
		b = append(b, `,"fn":`...)
		b = strconv.AppendInt(b, int64(r.FN), 10)
	}
	return append(b, '}')
}
