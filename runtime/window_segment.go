package runtime

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A segment record (s|<topic>|<id of its first message>) holds the
// messages an incremental pipeline took together (window_incr.go), in
// the order they came, each as:
//
//	id, topic, key      uvarint length, bytes
//	time, event_time,   varint each
//	publish_time, horizon
//	position            varint ledger, entry, batch index
//	payload             uvarint length, bytes
//	properties          uvarint count, then name and value as id is
//
// after a version byte. Binary, not JSON: it is written and read for
// every message (BenchmarkWindowCount), and base64 of the payload was a
// large part of the old per-message record's cost.
const (
	recSegment     = "s|"
	segmentVersion = 1
)

// segMsgSize is about the length of m in a segment.
func segMsgSize(m *winMsg) int {
	n := 64 + len(m.ID) + len(m.Topic) + len(m.Key) + len(m.Payload)
	for k, v := range m.Properties {
		n += len(k) + len(v) + 4
	}
	return n
}

func appendSegStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendSegMsg appends m, at pos in its partition, to a segment.
func appendSegMsg(b []byte, m *winMsg, pos msgPos) []byte {
	b = appendSegStr(b, m.ID)
	b = appendSegStr(b, m.Topic)
	b = appendSegStr(b, m.Key)
	b = binary.AppendVarint(b, m.Time)
	b = binary.AppendVarint(b, m.EventTime)
	b = binary.AppendVarint(b, m.PublishTime)
	b = binary.AppendVarint(b, m.Horizon)
	for _, v := range pos {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Payload)))
	b = append(b, m.Payload...)
	b = binary.AppendUvarint(b, uint64(len(m.Properties)))
	for k, v := range m.Properties {
		b = appendSegStr(b, k)
		b = appendSegStr(b, v)
	}
	return b
}

var errSegment = errors.New("truncated or malformed")

// segReader reads a segment's fields; the first error sticks.
type segReader struct {
	b   []byte
	err error
}

func (r *segReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errSegment
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *segReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errSegment
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *segReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errSegment
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *segReader) str() string { return string(r.bytes()) }

// segMsg is a message read back from a segment.
type segMsg struct {
	wm  *winMsg
	pos msgPos
}

// decodeSegment reads a segment record's messages.
func decodeSegment(b []byte) ([]segMsg, error) {
	if len(b) == 0 || b[0] != segmentVersion {
		return nil, fmt.Errorf("segment: not version %d", segmentVersion)
	}
	r := &segReader{b: b[1:]}
	var out []segMsg
	for len(r.b) > 0 && r.err == nil {
		m := &winMsg{ID: r.str(), Topic: r.str(), Key: r.str()}
		m.Time, m.EventTime, m.PublishTime, m.Horizon = r.varint(), r.varint(), r.varint(), r.varint()
		var pos msgPos
		for i := range pos {
			pos[i] = r.varint()
		}
		if p := r.bytes(); p != nil {
			m.Payload = p
		} else {
			m.Payload = []byte{}
		}
		if n := r.uvarint(); n > 0 && r.err == nil {
			if n > uint64(len(r.b)) {
				r.err = errSegment
				break
			}
			m.Properties = make(map[string]string, n)
			for range n {
				k := r.str()
				m.Properties[k] = r.str()
			}
		}
		if r.err == nil {
			out = append(out, segMsg{wm: m, pos: pos})
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("segment: %w", r.err)
	}
	return out, nil
}

// restoredSeg is a segment record read back.
type restoredSeg struct {
	rec  string
	msgs []segMsg
}

// restoreSegments puts the messages of the segments read back in their
// windows, after the accumulators (whose newest ids say which were
// added already): each partition's in the order they came, each once.
func (w *windower) restoreSegments(segs []restoredSeg, now time.Time) {
	type msgIn struct {
		segMsg
		seg *segment
	}
	var all []msgIn
	for _, rs := range segs {
		w.segSeq++
		s := &segment{rec: rs.rec, seq: w.segSeq, durable: true}
		w.segs = append(w.segs, s)
		for _, m := range rs.msgs {
			all = append(all, msgIn{m, s})
		}
	}
	slices.SortStableFunc(all, func(a, b msgIn) int {
		if c := cmp.Compare(a.wm.Topic, b.wm.Topic); c != 0 {
			return c
		}
		if a.pos.after(b.pos) {
			return 1
		}
		if b.pos.after(a.pos) {
			return -1
		}
		return 0
	})
	for i, m := range all {
		if i > 0 && all[i-1].wm.Topic == m.wm.Topic && all[i-1].pos == m.pos {
			continue // in two segments (a write retried by a host before)
		}
		w.arrived.observe(m.wm.Topic, m.wm.Time, now)
		w.placeIncr(&pendMsg{wm: m.wm, pos: m.pos, seg: m.seg}, now)
	}
	for _, s := range w.segs {
		if s.live == 0 {
			w.segGone = append(w.segGone, s)
		}
	}
}
