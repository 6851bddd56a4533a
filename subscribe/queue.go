package subscribe

import (
	"context"
	"sync"
)

// queue holds the entries received from every part, in arrival order,
// until Receive splits them. Connections' reader goroutines push; flow
// permits bound how much it holds (ReceiverQueue messages per part).
type queue struct {
	mu      sync.Mutex
	buf     []entry
	head    int
	waiters int
	wake    chan struct{}
	failed  chan struct{} // closed with err set
	err     error         // once set, returned when the queue is empty
}

func (q *queue) init() {
	q.wake = make(chan struct{}, 1)
	q.failed = make(chan struct{})
}

func (q *queue) push(e entry) {
	q.mu.Lock()
	if q.head > 0 && q.head == len(q.buf) {
		clear(q.buf)
		q.buf, q.head = q.buf[:0], 0
	} else if q.head >= 1024 && q.head > len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, e)
	signal := q.waiters > 0
	q.mu.Unlock()
	if signal {
		q.signal()
	}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest entry; ok is false when there is none, err set
// when there will be none (the consumer closed or failed).
func (q *queue) pop() (e entry, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.buf) {
		return entry{}, false, q.err
	}
	e = q.buf[q.head]
	q.buf[q.head] = entry{}
	q.head++
	if q.head < len(q.buf) && q.waiters > 0 {
		q.signal() // another receiver may take the next one
	}
	return e, true, nil
}

// wait blocks until something was pushed, the queue failed or ctx ended.
func (q *queue) wait(ctx context.Context) error {
	q.mu.Lock()
	if q.head < len(q.buf) || q.err != nil {
		q.mu.Unlock()
		return nil
	}
	q.waiters++
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.waiters--
		q.mu.Unlock()
	}()
	select {
	case <-q.wake:
		return nil
	case <-q.failed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail makes receivers return err once the queue is empty. The first
// error stays.
func (q *queue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		close(q.failed)
	}
}

// clear drops everything queued.
func (q *queue) clear() {
	q.mu.Lock()
	clear(q.buf)
	q.buf, q.head = nil, 0
	q.mu.Unlock()
}
