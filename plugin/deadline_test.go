package plugin

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// A batch's context behaves as context.WithTimeout's would, whether or
// not the handler asks for Done, and before or after the deadline.
func TestTheBatchContextKeepsItsDeadline(t *testing.T) {
	t.Run("Err sees the deadline without Done", func(t *testing.T) {
		c := newBatchContext(context.Background(), 20*time.Millisecond)
		defer c.release()
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		if d, ok := c.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
			t.Errorf("Deadline %v %v, want within 20ms", d, ok)
		}
		time.Sleep(30 * time.Millisecond)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline: %v, want DeadlineExceeded", err)
		}
		select {
		case <-c.Done(): // asked for after the deadline: closed already
		case <-time.After(time.Second):
			t.Fatal("Done asked for after the deadline is not closed")
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		c := newBatchContext(context.Background(), 20*time.Millisecond)
		defer c.release()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close at the deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err: %v, want DeadlineExceeded", err)
		}
	})
	t.Run("the parent's cancellation and values come through", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
		c := newBatchContext(parent, time.Hour)
		defer c.release()
		if c.Value(ctxKey{}) != "v" {
			t.Errorf("Value: %v, want the parent's", c.Value(ctxKey{}))
		}
		cancel()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after the parent's cancel: %v, want Canceled", err)
		}
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("Done did not close with the parent")
		}
	})
	t.Run("a context made from it ends with it", func(t *testing.T) {
		c := newBatchContext(context.Background(), 20*time.Millisecond)
		defer c.release()
		child, cancel := context.WithCancel(c)
		defer cancel()
		if child.Value(ctxKey{}) != nil {
			t.Error("a value that is nobody's")
		}
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a child of the batch's context outlived its deadline")
		}
		if d, ok := child.Deadline(); !ok || d.IsZero() {
			t.Errorf("the child's Deadline %v %v, want the batch's", d, ok)
		}
	})
	t.Run("the parent's earlier deadline is the deadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newBatchContext(parent, time.Hour)
		defer c.release()
		if d, _ := c.Deadline(); time.Until(d) > time.Minute {
			t.Errorf("Deadline in %v, want the parent's minute", time.Until(d))
		}
	})
	t.Run("answered, it is cancelled, Done or not", func(t *testing.T) {
		lazy := newBatchContext(context.Background(), time.Hour)
		lazy.release()
		if err := lazy.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err after release: %v, want Canceled", err)
		}
		select {
		case <-lazy.Done():
		default:
			t.Error("Done asked for after release is not closed")
		}
		timed := newBatchContext(context.Background(), time.Hour)
		done := timed.Done()
		timed.release()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("Done did not close at release")
		}
		if err := timed.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err after release: %v, want Canceled", err)
		}
	})
}
