package plugin

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// windowJSON is a window message's payload as the host writes it
// (docs/pipelines.md, "Windows").
type windowJSON struct {
	Key         string          `json:"key"`
	Start       int64           `json:"start"`
	End         int64           `json:"end"`
	Fire        int             `json:"fire"`
	Messages    []WindowMessage `json:"messages"`
	Accumulator []byte          `json:"accumulator"`
	Add         bool            `json:"add"`
	Replaces    []int64         `json:"replaces"`
}

// decodeWindow reads a window's payload. A window comes for every add
// step and every fire, and encoding/json's reflection was most of a
// window handler's time (BenchmarkWindowCount): the host's plain form
// (no escapes in strings, no white space) is read here by hand, and
// anything else by encoding/json, which also says what is wrong.
func decodeWindow(b []byte, p *windowJSON) error {
	d := winDecoder{b: b}
	if d.window(p) && d.i == len(b) {
		return nil
	}
	*p = windowJSON{}
	return json.Unmarshal(b, p)
}

// winDecoder reads the plain form; any byte it does not expect makes it
// give up (ok false), never guess.
type winDecoder struct {
	b []byte
	i int
}

func (d *winDecoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *winDecoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// raw is a string's bytes without its quotes; false when it has an
// escape (encoding/json unquotes those).
func (d *winDecoder) raw() ([]byte, bool) {
	if !d.eat('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			// encoding/json makes invalid UTF-8 U+FFFD.
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *winDecoder) str(s *string) bool {
	if d.null() {
		return true // encoding/json leaves a string as it was for null
	}
	r, ok := d.raw()
	if ok {
		*s = string(r)
	}
	return ok
}

func (d *winDecoder) int(n *int64) bool {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i-digits > 1 && d.b[digits] == '0' {
		return false // not JSON
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return false
	}
	*n = v
	return true
}

// bytes reads base64, as encoding/json reads a []byte: null is nil.
func (d *winDecoder) bytes(v *[]byte) bool {
	if d.null() {
		*v = nil
		return true
	}
	r, ok := d.raw()
	if !ok {
		return false
	}
	out := make([]byte, 0, base64.StdEncoding.DecodedLen(len(r)))
	out, err := base64.StdEncoding.AppendDecode(out, r)
	if err != nil {
		return false
	}
	*v = out
	return true
}

// object reads {"name":value,...}, calling field for each name; field
// reads the value.
func (d *winDecoder) object(field func(name string) bool) bool {
	if !d.eat('{') {
		return false
	}
	if d.eat('}') {
		return true
	}
	for {
		name, ok := d.raw()
		if !ok || !d.eat(':') || !field(string(name)) {
			return false
		}
		if d.eat('}') {
			return true
		}
		if !d.eat(',') {
			return false
		}
	}
}

func (d *winDecoder) window(p *windowJSON) bool {
	return d.object(func(name string) bool {
		switch name {
		case "key":
			return d.str(&p.Key)
		case "start":
			return d.int(&p.Start)
		case "end":
			return d.int(&p.End)
		case "fire":
			var n int64
			ok := d.int(&n)
			p.Fire = int(n)
			return ok
		case "messages":
			return d.messages(&p.Messages)
		case "accumulator":
			return d.bytes(&p.Accumulator)
		case "add":
			switch {
			case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
				p.Add, d.i = true, d.i+4
			case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
				p.Add, d.i = false, d.i+5
			default:
				return false
			}
			return true
		case "replaces":
			if d.null() {
				p.Replaces = nil
				return true
			}
			if !d.eat('[') {
				return false
			}
			p.Replaces = []int64{}
			if d.eat(']') {
				return true
			}
			for {
				var n int64
				if !d.int(&n) {
					return false
				}
				p.Replaces = append(p.Replaces, n)
				if d.eat(']') {
					return true
				}
				if !d.eat(',') {
					return false
				}
			}
		}
		return false // a name the host does not write
	})
}

func (d *winDecoder) messages(ms *[]WindowMessage) bool {
	if d.null() {
		*ms = nil
		return true
	}
	if !d.eat('[') {
		return false
	}
	out := []WindowMessage{}
	if d.eat(']') {
		*ms = out
		return true
	}
	for {
		var m WindowMessage
		if !d.message(&m) {
			return false
		}
		out = append(out, m)
		if d.eat(']') {
			*ms = out
			return true
		}
		if !d.eat(',') {
			return false
		}
	}
}

func (d *winDecoder) message(m *WindowMessage) bool {
	return d.object(func(name string) bool {
		switch name {
		case "id":
			return d.str(&m.ID)
		case "topic":
			return d.str(&m.Topic)
		case "key":
			return d.str(&m.Key)
		case "payload":
			return d.bytes(&m.Payload)
		case "time":
			return d.int(&m.Time)
		case "event_time":
			return d.int(&m.EventTime)
		case "publish_time":
			return d.int(&m.PublishTime)
		case "horizon":
			var n int64
			return d.int(&n) // the host's own, not the handler's
		case "properties":
			if d.null() {
				m.Properties = nil
				return true
			}
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			return d.object(func(k string) bool {
				var v string
				if !d.str(&v) {
					return false
				}
				m.Properties[k] = v
				return true
			})
		}
		return false
	})
}
