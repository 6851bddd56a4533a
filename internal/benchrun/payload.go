package benchrun

import "time"

// StampLen is the length of the timestamp a payload starts with: the
// publish wall-clock time in Unix nanoseconds as 19 decimal digits. Text,
// not binary, so that it survives handlers that transform text (the
// uppercase example plugin leaves digits alone), and wall-clock time so
// that another process on the same host can read it.
const StampLen = 19

// Payload returns a payload of size bytes: the timestamp of now when it
// fits, then filler letters. A payload shorter than StampLen carries no
// timestamp (latency is then taken from the message's publish_time,
// which has millisecond precision).
func Payload(size int, now time.Time) []byte {
	p := make([]byte, size)
	Fill(p, now)
	return p
}

// Fill writes the timestamp of now (when p has room) and filler into p.
func Fill(p []byte, now time.Time) {
	i := 0
	if len(p) >= StampLen {
		v := now.UnixNano()
		for i = StampLen - 1; i >= 0; i-- {
			p[i] = byte('0' + v%10)
			v /= 10
		}
		i = StampLen
	}
	for ; i < len(p); i++ {
		p[i] = byte('a' + i%26)
	}
}

// Stamp reads the timestamp a payload starts with; ok is false when it
// carries none.
func Stamp(p []byte) (time.Time, bool) {
	if len(p) < StampLen {
		return time.Time{}, false
	}
	var v int64
	for _, c := range p[:StampLen] {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		v = v*10 + int64(c-'0')
	}
	if v <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, v), true
}

// Since is the latency of a message received now: from the payload's
// timestamp, else from publishTime. from says which was used
// (LatencyFromPayload or LatencyFromPublishTime).
func Since(now time.Time, payload []byte, publishTime time.Time) (d time.Duration, from string) {
	if t, ok := Stamp(payload); ok {
		return now.Sub(t), LatencyFromPayload
	}
	return now.Sub(publishTime), LatencyFromPublishTime
}
