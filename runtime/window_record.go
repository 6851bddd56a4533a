package runtime

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/streamrun/streamrun/pool"
)

// The window changelog's records (docs/pipelines.md, "Windows"), keyed so
// that compaction keeps what is still open and an empty payload removes
// a record:
//
//	m|<topic>|<id>      a message taken into its key's windows (winMsg, JSON)
//	w|<topic>           a partition's newest time (Unix ms), written before
//	                    any removal so that a restart knows it
//	f|<start>|<key>     a window that fired, and how often
const (
	recMessage   = "m|"
	recWatermark = "w|"
	recFired     = "f|"
)

// winMsg is a message held in a window, as the changelog keeps it and
// the handler gets it (the window's JSON, docs/pipelines.md).
type winMsg struct {
	ID          string            `json:"id"`
	Topic       string            `json:"topic"`
	Key         string            `json:"key"`
	Time        int64             `json:"time"`
	Payload     []byte            `json:"payload"`
	Properties  map[string]string `json:"properties,omitempty"`
	EventTime   int64             `json:"event_time,omitempty"`
	PublishTime int64             `json:"publish_time,omitempty"`
}

func (m *winMsg) record() string { return recMessage + m.Topic + "|" + m.ID }

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
}

func tombstone(rec string) pool.Message { return pool.Message{Key: rec} }

// restored is what a window changelog held at start.
type restored struct {
	msgs  []*winMsg
	marks map[string]int64 // partition → newest time
	fired map[string]map[int64]int
}

// parseRecords reads a changelog's last values (keyed state's read).
func parseRecords(vals map[string]stateValue) restored {
	r := restored{marks: map[string]int64{}, fired: map[string]map[int64]int{}}
	for k, v := range vals {
		switch {
		case strings.HasPrefix(k, recMessage):
			var m winMsg
			if json.Unmarshal(v.v, &m) == nil {
				r.msgs = append(r.msgs, &m)
			}
		case strings.HasPrefix(k, recWatermark):
			if t, err := strconv.ParseInt(string(v.v), 10, 64); err == nil {
				r.marks[k[len(recWatermark):]] = t
			}
		case strings.HasPrefix(k, recFired):
			startS, key, ok := strings.Cut(k[len(recFired):], "|")
			start, err := strconv.ParseInt(startS, 10, 64)
			n, err2 := strconv.Atoi(string(v.v))
			if ok && err == nil && err2 == nil {
				if r.fired[key] == nil {
					r.fired[key] = map[int64]int{}
				}
				r.fired[key][start] = n
			}
		}
	}
	return r
}
