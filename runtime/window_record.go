package runtime

import (
	"encoding/json"
	"iter"
	"strconv"
	"strings"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// The window changelog's records (docs/pipelines.md, "Windows"), keyed so
// that compaction keeps what is still open and an empty payload removes
// a record:
//
//	m|<topic>|<id>      a message taken into its key's windows (winMsg, JSON)
//	w|<topic>           a partition's newest time (Unix ms), written before
//	                    any removal so that a restart knows it
//	f|<start>|<key>     a window that fired, and how often (messages mode;
//	                    incremental windows wrote it before their
//	                    accumulator's record held it, and still read it)
//	a|<start>|<key>     an incremental window's accumulator (accRecord, JSON),
//	                    with how often it fired
//	s|<topic>|<id>      messages an incremental pipeline took together, until
//	                    each is in its accumulators (window_segment.go)
const (
	recMessage   = "m|"
	recWatermark = "w|"
	recFired     = "f|"
)

// winMsg is a message held in a window, as the changelog keeps it and
// the handler gets it (the window's JSON, docs/pipelines.md).
type winMsg struct {
	// slot is its place in windower.held (heldSet); first, beside the
	// incremental pendMsg before it (takenMsg), as letting a message go
	// reads both, long after they were written (BenchmarkWindowCount).
	slot int64

	ID          string            `json:"id"`
	Topic       string            `json:"topic"`
	Key         string            `json:"key"`
	Time        int64             `json:"time"`
	Payload     []byte            `json:"payload"`
	Properties  map[string]string `json:"properties,omitempty"`
	EventTime   int64             `json:"event_time,omitempty"`
	PublishTime int64             `json:"publish_time,omitempty"`
	// Horizon is the watermark less the allowed lateness when it was
	// taken: it joins no window that ended at or before it (forgotten
	// by then), so that where it lands does not hang on when the host
	// got round to forgetting.
	Horizon int64 `json:"horizon"`

	// mid is its id as numbers, made once (midRaw: its ID is not one):
	// hashing or comparing the id's string, cold by then, was most of
	// the held map's cost, which heldSet has replaced
	// (BenchmarkWindowCount).
	mid    pulsarwire.MessageID
	midSet bool
	midRaw bool
	// durable: its changelog write has its receipt (windower.held).
	durable bool
	// unacked: under exactly_once, its acknowledgement has not
	// committed yet, so it may come again: it stays in its windows
	// (window_exactly.go). dropLater: a session message to go once it
	// has.
	unacked, dropLater bool
}

func (m *winMsg) record() string { return recMessage + m.Topic + "|" + m.ID }

// heldKey names a message in hand (windower.held): its topic and its id
// as numbers; raw is the id's text only when it is not one (a record
// read back that this host did not write).
type heldKey struct {
	topic string
	id    pulsarwire.MessageID
	raw   string
}

func (m *winMsg) held() heldKey {
	if !m.midSet {
		if id, err := pulsarwire.ParseMessageID(m.ID); err == nil {
			m.mid = id
		} else {
			m.midRaw = true
		}
		m.mid.BatchSize = 0 // not part of the identity
		m.midSet = true
	}
	if m.midRaw {
		return heldKey{topic: m.Topic, raw: m.ID}
	}
	return heldKey{topic: m.Topic, id: m.mid}
}

// setID names m by id, as it came (its ID is id's text).
func (m *winMsg) setID(id pulsarwire.MessageID) {
	id.BatchSize = 0
	m.mid, m.midSet = id, true
}

func firedRecord(key string, start int64) string {
	return recFired + strconv.FormatInt(start, 10) + "|" + key
}

// windowPayload is what a handler gets for a closed window.
type windowPayload struct {
	Key      string    `json:"key"`
	Start    int64     `json:"start"`
	End      int64     `json:"end"`
	Fire     int       `json:"fire"`
	Messages []*winMsg `json:"messages"`
	// Incremental mode: the accumulator (the window's at a fire, the
	// one to add Messages to at an add step), and whether it is an add.
	Accumulator []byte `json:"accumulator,omitempty"`
	Add         bool   `json:"add,omitempty"`
	// Replaces are the starts of fired sessions this one took in
	// (window_session.go).
	Replaces []int64 `json:"replaces,omitempty"`
}

func tombstone(rec string) pool.Message { return pool.Message{Key: rec} }

// restored is what a window changelog held at start.
type restored struct {
	msgs  []*winMsg
	marks map[string]int64 // partition → newest time
	fired map[string]map[int64]firedMark
	accs  map[string]map[int64]accRecord // key → start → accumulator
	segs  []restoredSeg
	// bad counts the records that could not be read.
	bad int
}

// firedMark is a fired window's record: how often it fired, with how
// many messages, and whether it is forgotten (kept while a message of a
// later window also falls in it, so that it is not made again).
type firedMark struct {
	fires, n  int
	forgotten bool
}

func (f firedMark) String() string {
	s := strconv.Itoa(f.fires) + ":" + strconv.Itoa(f.n)
	if f.forgotten {
		s += ":forgotten"
	}
	return s
}

func parseFiredMark(s string) (firedMark, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return firedMark{}, false
	}
	fires, err1 := strconv.Atoi(parts[0])
	n, err2 := strconv.Atoi(parts[1])
	return firedMark{fires: fires, n: n, forgotten: len(parts) > 2}, err1 == nil && err2 == nil
}

// parseRecords reads a changelog's last values (keyed state's read).
func parseRecords(vals iter.Seq2[string, stateValue]) restored {
	r := restored{marks: map[string]int64{}, fired: map[string]map[int64]firedMark{}, accs: map[string]map[int64]accRecord{}}
	for k, v := range vals {
		switch {
		case strings.HasPrefix(k, recMessage):
			var m winMsg
			if json.Unmarshal(v.v, &m) == nil {
				r.msgs = append(r.msgs, &m)
			}
		case strings.HasPrefix(k, recSegment):
			if ms, err := decodeSegment(v.v); err == nil {
				r.segs = append(r.segs, restoredSeg{rec: k, msgs: ms})
			} else {
				r.bad++
			}
		case strings.HasPrefix(k, recWatermark):
			if t, err := strconv.ParseInt(string(v.v), 10, 64); err == nil {
				r.marks[k[len(recWatermark):]] = t
			}
		case strings.HasPrefix(k, recAcc):
			if key, start, a, ok := parseAcc(k, v.v); ok {
				if r.accs[key] == nil {
					r.accs[key] = map[int64]accRecord{}
				}
				r.accs[key][start] = a
			}
		case strings.HasPrefix(k, recFired):
			startS, key, ok := strings.Cut(k[len(recFired):], "|")
			start, err := strconv.ParseInt(startS, 10, 64)
			f, ok2 := parseFiredMark(string(v.v))
			if ok && err == nil && ok2 {
				if r.fired[key] == nil {
					r.fired[key] = map[int64]firedMark{}
				}
				r.fired[key][start] = f
			}
		}
	}
	return r
}
