package runtime

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
)

// A pipeline keeps the reasons of its dead letters, counted, for the
// control API and the console: what went wrong is the first question
// about a dead-letter topic that fills. Dead letters are rare, so a
// mutex per one costs nothing that matters.

// maxDeadLetterReasons bounds the reasons a pipeline keeps, "(other
// reasons)" included, under which new reasons count past the bound.
const maxDeadLetterReasons = 50

// maxReasonLen bounds a kept reason's length.
const maxReasonLen = 300

// otherReasons is where reasons past the bound are counted.
const otherReasons = "(other reasons)"

// DeadLetterReason is one reason a pipeline dead-lettered messages for.
type DeadLetterReason struct {
	Reason string
	Count  int64
	Last   time.Time
}

type deadLetterReasons struct {
	mu sync.Mutex
	m  map[string]*DeadLetterReason
}

func (d *deadLetterReasons) add(reason string) {
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen] + "…"
	}
	if reason == "" {
		reason = "(no reason given)"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]*DeadLetterReason{}
	}
	r, ok := d.m[reason]
	if !ok {
		distinct := len(d.m)
		if _, ok := d.m[otherReasons]; ok {
			distinct--
		}
		if distinct >= maxDeadLetterReasons-1 { // one place kept for the others
			reason = otherReasons
			r = d.m[reason]
		}
		if r == nil {
			r = &DeadLetterReason{Reason: reason}
			d.m[reason] = r
		}
	}
	r.Count++
	r.Last = time.Now()
}

// list is the reasons, the most frequent first.
func (d *deadLetterReasons) list() []DeadLetterReason {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DeadLetterReason, 0, len(d.m))
	for _, r := range d.m {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b DeadLetterReason) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Reason, b.Reason))
	})
	return out
}
