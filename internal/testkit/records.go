package testkit

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Records keeps the slog records of a component under test, so that a
// test can wait for an event (a retry, a reconnect, a plugin's log line)
// instead of sleeping. Its zero value is ready; Handler makes the handler
// that fills it. It is safe for concurrent use.
type Records struct {
	mu   sync.Mutex
	recs []Record
}

// Record is one kept record: its level, message and attributes (those
// added with WithAttrs included), as text.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// String is the message and its attributes, key=value in key order.
func (r Record) String() string {
	var b strings.Builder
	b.WriteString(r.Msg)
	for _, k := range slices.Sorted(maps.Keys(r.Attrs)) {
		fmt.Fprintf(&b, " %s=%s", k, r.Attrs[k])
	}
	return b.String()
}

// Handler returns a handler that keeps every record in r and passes it
// on to next, when next is not nil (to still log it somewhere).
func (r *Records) Handler(next slog.Handler) slog.Handler {
	return &recordHandler{recs: r, next: next}
}

// Find returns the first record that match accepts.
func (r *Records) Find(match func(Record) bool) (Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if match(rec) {
			return rec, true
		}
	}
	return Record{}, false
}

// Count is how many records contain every one of parts in their String.
func (r *Records) Count(parts ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		s := rec.String()
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(s, p) }) {
			n++
		}
	}
	return n
}

// Wait waits, up to within, for a record whose message is msg and whose
// attributes include attrs, and returns it; it fails the test listing
// what was kept when none came.
func (r *Records) Wait(t testing.TB, within time.Duration, msg string, attrs map[string]string) Record {
	t.Helper()
	match := func(rec Record) bool {
		if rec.Msg != msg {
			return false
		}
		for k, v := range attrs {
			if rec.Attrs[k] != v {
				return false
			}
		}
		return true
	}
	var found Record
	deadline := time.Now().Add(within)
	for {
		var ok bool
		if found, ok = r.Find(match); ok {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log record %q with %v in %s; have:\n%s", msg, attrs, within, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// String lists the kept records, one a line, with their levels.
func (r *Records) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.recs {
		fmt.Fprintf(&b, "%v %s\n", rec.Level, rec)
	}
	return b.String()
}

type recordHandler struct {
	recs  *Records
	next  slog.Handler // nil: keep only
	attrs []slog.Attr
}

func (h *recordHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next == nil || h.next.Enabled(ctx, l)
}

func (h *recordHandler) Handle(ctx context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.recs.mu.Lock()
	h.recs.recs = append(h.recs.recs, rec)
	h.recs.mu.Unlock()
	if h.next == nil {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	next := h.next
	if next != nil {
		next = next.WithAttrs(as)
	}
	return &recordHandler{recs: h.recs, next: next, attrs: append(slices.Clone(h.attrs), as...)}
}

// WithGroup keeps attributes unqualified: tests match them by their keys.
func (h *recordHandler) WithGroup(name string) slog.Handler {
	next := h.next
	if next != nil {
		next = next.WithGroup(name)
	}
	return &recordHandler{recs: h.recs, next: next, attrs: h.attrs}
}
