package runtime

// What the external tests (package runtime_test) read with the host's
// own code; built with the tests only.

// SegmentMessage is a message of a window changelog's segment record:
// what the processing-time tests check of it.
type SegmentMessage struct {
	ID, Topic, Key string
	Time           int64 // where the windows placed it, Unix ms
	Payload        []byte
}

// SegmentMessages reads a segment record as a restart reads it back.
func SegmentMessages(b []byte) ([]SegmentMessage, error) {
	ms, err := decodeSegment(b)
	if err != nil {
		return nil, err
	}
	out := make([]SegmentMessage, len(ms))
	for i, m := range ms {
		out[i] = SegmentMessage{ID: m.wm.ID, Topic: m.wm.Topic, Key: m.wm.Key, Time: m.wm.Time, Payload: m.wm.Payload}
	}
	return out, nil
}
