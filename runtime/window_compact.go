package runtime

import (
	"encoding/binary"
	"slices"
)

// An incremental window's message (an add, a fire, or both in one) is
// made without a payload: it is encoded when it is handed to an
// instance, in the form that instance reads. Contract version 5 (the Go
// SDK) reads the compact form below, JSON with base64 payloads the
// others (docs/contract.md §6, windows): the JSON was about 1 µs of the
// host's CPU a message to write and most of the handler's time to read
// (BenchmarkWindowCount). The dead-letter topic, the steps before the
// handler and the taps get the JSON, as for a window of messages.

// The form of a window message's payload (windowFire.form).
const (
	formNone = iota
	formJSON
	formCompact
)

// compactWindowForm is the compact form's first byte (a JSON window's is
// '{'), as the SDK's plugin.ReadWindow tells them apart.
const compactWindowForm = 0x05

// The compact form's flags.
const (
	compactAdd  = 1
	compactFire = 2
)

// compactInstance says whether inst speaks contract version 5; an
// in-process handler does (it is built with this module's SDK).
func compactInstance(inst instance) bool {
	c, ok := inst.(interface{ CompactWindows() bool })
	return ok && c.CompactWindows()
}

// windowForm gives it's message, an incremental window's, the payload
// of form (compact or JSON) unless it has it already.
func windowForm(it *item, compact bool) {
	f := it.win
	if f == nil || f.wp == nil {
		return
	}
	form := formJSON
	if compact {
		form = formCompact
	}
	if f.form == form {
		return
	}
	f.form = form
	wp := f.wp
	if compact {
		it.m.Payload = appendCompactWindow(nil, wp)
		return
	}
	size := 128 + len(wp.Accumulator)*4/3
	for _, m := range wp.Messages {
		size += winMsgSize(m)
	}
	it.m.Payload = appendWindowPayload(make([]byte, 0, size), wp)
}

// windowJSON gives it's message its JSON payload, for what reads it
// beside the handler (dead letters, steps, taps).
func windowJSON(it *item) { windowForm(it, false) }

// appendCompactWindow appends p in the compact form (docs/contract.md
// §6, windows): the form byte, flags (1 add, 2 fire), then, each integer a
// varint (unsigned for lengths and counts), the key, start, end, fire,
// the accumulator (its length plus one, 0 for none), the replaces, and
// the messages, each its id, topic (0 for the previous message's, else
// its length plus one), key (0 for the window's, else its length plus
// one), time, event time, publish time, payload and properties (sorted
// by name).
func appendCompactWindow(b []byte, p *windowPayload) []byte {
	size := 64 + len(p.Key) + len(p.Accumulator)
	for _, m := range p.Messages {
		size += 40 + len(m.ID) + len(m.Payload)
		if len(m.Properties) > 0 {
			size += 64
		}
	}
	if cap(b)-len(b) < size {
		b = slices.Grow(b, size)
	}
	var flags byte
	if p.Add {
		flags |= compactAdd
	}
	if p.Fire > 0 {
		flags |= compactFire
	}
	b = append(b, compactWindowForm, flags)
	b = appendVarBytes(b, p.Key)
	b = binary.AppendVarint(b, p.Start)
	b = binary.AppendVarint(b, p.End)
	b = binary.AppendUvarint(b, uint64(p.Fire))
	if p.Accumulator == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(p.Accumulator))+1)
		b = append(b, p.Accumulator...)
	}
	b = binary.AppendUvarint(b, uint64(len(p.Replaces)))
	for _, s := range p.Replaces {
		b = binary.AppendVarint(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(p.Messages)))
	topic := ""
	for i, m := range p.Messages {
		b = appendVarBytes(b, m.ID)
		if i > 0 && m.Topic == topic {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(m.Topic))+1)
			b = append(b, m.Topic...)
			topic = m.Topic
		}
		if m.Key == p.Key {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(m.Key))+1)
			b = append(b, m.Key...)
		}
		b = binary.AppendVarint(b, m.Time)
		b = binary.AppendVarint(b, m.EventTime)
		b = binary.AppendVarint(b, m.PublishTime)
		b = binary.AppendUvarint(b, uint64(len(m.Payload)))
		b = append(b, m.Payload...)
		b = binary.AppendUvarint(b, uint64(len(m.Properties)))
		if len(m.Properties) > 0 {
			names := make([]string, 0, len(m.Properties))
			for k := range m.Properties {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				b = appendVarBytes(b, k)
				b = appendVarBytes(b, m.Properties[k])
			}
		}
	}
	return b
}

func appendVarBytes[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
