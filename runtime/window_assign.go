package runtime

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/subscribe"
)

// assigner places a message's time in windows (docs/pipelines.md,
// "Windows"), all in Unix milliseconds: pure arithmetic, no state.
type assigner struct {
	kind                        pipelines.WindowType
	size, slide, gap, late, ooo int64
}

func newAssigner(w pipelines.Window) assigner {
	a := assigner{kind: w.Type, size: w.Size.Milliseconds(), slide: w.Slide.Milliseconds(), gap: w.Gap.Milliseconds(),
		late: w.AllowedLateness.Milliseconds(), ooo: w.OutOfOrder.Milliseconds()}
	if a.kind == pipelines.Tumbling {
		a.slide = a.size
	}
	return a
}

// floorDiv is ⌊a/b⌋ for negative a too (times before 1970).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// starts are the starts of the tumbling or sliding windows holding t,
// earliest first.
func (a assigner) starts(t int64) []int64 {
	last := floorDiv(t, a.slide) * a.slide
	var out []int64
	for s := last - a.size + a.slide; s <= last; s += a.slide {
		out = append(out, s)
	}
	return out
}

// lastEnd is the end of the last window t may belong to: a session's
// own [t, t+gap), else the latest window holding t.
func (a assigner) lastEnd(t int64) int64 {
	if a.kind == pipelines.Session {
		return t + a.gap
	}
	return floorDiv(t, a.slide)*a.slide + a.size
}

// firstEnd is the end of the first window t may belong to.
func (a assigner) firstEnd(t int64) int64 {
	if a.kind == pipelines.Session {
		return t + a.gap
	}
	return floorDiv(t, a.slide)*a.slide + a.slide
}

// late says whether a message of time t comes after every window it
// could belong to was forgotten, at watermark wm.
func (a assigner) isLate(t, wm int64) bool { return a.lastEnd(t)+a.late <= wm }

// timeOf is the time, in Unix milliseconds, window w places m at;
// received is when the host received it.
func timeOf(w *pipelines.Window, m *subscribe.Message, received time.Time) (int64, error) {
	switch w.Time {
	case pipelines.TimeProcessing:
		return received.UnixMilli(), nil
	case pipelines.TimePublish:
		return m.PublishTime.UnixMilli(), nil
	case pipelines.TimeField:
		return fieldTime(m.Payload, w.TimeField)
	default:
		if m.EventTime.IsZero() {
			return 0, fmt.Errorf("window: the message has no event time (window.time is event)")
		}
		return m.EventTime.UnixMilli(), nil
	}
}

// fieldTime reads the time at path (dotted) of a JSON payload: a number
// of Unix milliseconds or an RFC 3339 string.
func fieldTime(payload []byte, path string) (int64, error) {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return 0, fmt.Errorf("window: the payload is not JSON, so it has no field %s: %w", path, err)
	}
	for _, part := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("window: the payload has no field %s", path)
		}
		if v, ok = o[part]; !ok {
			return 0, fmt.Errorf("window: the payload has no field %s", path)
		}
	}
	switch t := v.(type) {
	case float64:
		return int64(t), nil
	case string:
		if ms, err := strconv.ParseInt(t, 10, 64); err == nil {
			return ms, nil
		}
		tm, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return 0, fmt.Errorf("window: field %s: %q is neither Unix milliseconds nor an RFC 3339 time", path, t)
		}
		return tm.UnixMilli(), nil
	default:
		return 0, fmt.Errorf("window: field %s holds %T, not a time", path, v)
	}
}
