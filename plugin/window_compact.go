package plugin

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// compactWindowForm is the first byte of an incremental window's
// message in contract version 5's compact form (docs/contract.md §6,
// windows); a JSON window starts with '{'.
const compactWindowForm = 0x05

// The compact form's flags.
const (
	compactAdd  = 1
	compactFire = 2
)

var errCompactWindow = errors.New("the window's compact form is cut short or malformed")

// decodeCompactWindow reads a window in the compact form. The strings
// are one copy of b's bytes; the messages' payloads and the accumulator
// share b (a batch's buffer, as Message.Payload does: copy to keep).
func decodeCompactWindow(b []byte, p *windowJSON) (err error) {
	if len(b) < 2 || b[0] != compactWindowForm {
		return errCompactWindow
	}
	d := compactDecoder{b: b, s: string(b), i: 2}
	flags := b[1]
	p.Add = flags&compactAdd != 0
	p.Key = d.str()
	p.Start = d.varint()
	p.End = d.varint()
	p.Fire = int(d.uvarint())
	if n := d.uvarint(); n > 0 {
		p.Accumulator = d.bytes(n - 1)
	}
	if n := d.count(); n > 0 {
		p.Replaces = make([]int64, n)
		for i := range p.Replaces {
			p.Replaces[i] = d.varint()
		}
	}
	n := d.count()
	p.Messages = make([]WindowMessage, n)
	topic := ""
	for i := range p.Messages {
		m := &p.Messages[i]
		m.ID = d.str()
		if t := d.uvarint(); t > 0 {
			topic = d.strN(t - 1)
		}
		m.Topic = topic
		m.Key = p.Key
		if k := d.uvarint(); k > 0 {
			m.Key = d.strN(k - 1)
		}
		m.Time = d.varint()
		m.EventTime = d.varint()
		m.PublishTime = d.varint()
		m.Payload = d.bytes(d.uvarint())
		if np := d.count(); np > 0 {
			m.Properties = make(map[string]string, np)
			for range np {
				k := d.str()
				m.Properties[k] = d.str()
			}
		}
	}
	if d.bad || d.i != len(b) {
		return fmt.Errorf("%w (at byte %d of %d)", errCompactWindow, d.i, len(b))
	}
	if flags&compactFire != 0 && p.Fire == 0 {
		return fmt.Errorf("%w: a fire numbered 0", errCompactWindow)
	}
	return nil
}

// compactDecoder reads the compact form; past its end or on a bad
// varint it sets bad and reads zeros.
type compactDecoder struct {
	b   []byte
	s   string // b's bytes, once, for the strings
	i   int
	bad bool
}

func (d *compactDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[min(d.i, len(d.b)):])
	if !d.advance(n) {
		return 0
	}
	return v
}

func (d *compactDecoder) varint() int64 {
	v, n := binary.Varint(d.b[min(d.i, len(d.b)):])
	if !d.advance(n) {
		return 0
	}
	return v
}

// advance moves past a varint of n bytes; n <= 0 (cut, or too long)
// makes the rest bad.
func (d *compactDecoder) advance(n int) bool {
	if n <= 0 {
		d.bad = true
		d.i = len(d.b)
		return false
	}
	d.i += n
	return true
}

// count is a count of items of at least a byte each.
func (d *compactDecoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i) {
		d.bad = true
		d.i = len(d.b)
		return 0
	}
	return int(n)
}

func (d *compactDecoder) span(n uint64) (int, int, bool) {
	if n > uint64(len(d.b)-d.i) {
		d.bad = true
		d.i = len(d.b)
		return 0, 0, false
	}
	start := d.i
	d.i += int(n)
	return start, d.i, true
}

func (d *compactDecoder) bytes(n uint64) []byte {
	s, e, ok := d.span(n)
	if !ok {
		return nil
	}
	return d.b[s:e:e]
}

func (d *compactDecoder) strN(n uint64) string {
	s, e, ok := d.span(n)
	if !ok {
		return ""
	}
	return d.s[s:e]
}

func (d *compactDecoder) str() string { return d.strN(d.uvarint()) }
