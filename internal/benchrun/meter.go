package benchrun

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Meter counts what a run measures and prints a progress line every
// Every on W. Its methods are safe for concurrent use.
type Meter struct {
	// Latency holds the run's latencies.
	Latency *Recorder

	messages, bytes, sent, failed atomic.Int64
	from                          atomic.Value // string: where latencies start

	created time.Time
	setup   time.Duration
	start   time.Time
	end     atomic.Int64 // Unix ns of the last message measured; 0: now
	usage   Usage
	tl      timeline

	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	firstErr error
}

// NewMeter returns a meter whose clock starts now.
func NewMeter() *Meter {
	now := time.Now()
	return &Meter{Latency: NewRecorder(), created: now, start: now, usage: SelfUsage()}
}

// Restart starts the clock and the CPU count again: for work before the
// measured part (subscribing, connecting) that should not count. The
// time since NewMeter is the result's SetupSeconds.
func (m *Meter) Restart() {
	m.start = time.Now()
	m.setup = m.start.Sub(m.created)
	m.usage = SelfUsage()
}

// Received counts one message of n bytes measured, with its latency
// measured from from.
func (m *Meter) Received(n int, lat time.Duration, from string) {
	m.messages.Add(1)
	m.bytes.Add(int64(n))
	m.Latency.Record(lat)
	if m.from.Load() == nil {
		m.from.Store(from)
	}
}

// MarkEnd says that the measured part ended at t (the last message
// arrived), so that the wait noticing it is not counted; the messages
// counted by then mark the run's timeline (Result's steady rate and
// first message).
func (m *Meter) MarkEnd(t time.Time) {
	m.end.Store(t.UnixNano())
	m.tl.mark(m.messages.Load(), t)
}

// Sent counts one message published by this process.
func (m *Meter) Sent() { m.sent.Add(1) }

// Failed counts a failed send; the first error is kept.
func (m *Meter) Failed(err error) {
	m.failed.Add(1)
	m.mu.Lock()
	if m.firstErr == nil {
		m.firstErr = err
	}
	m.mu.Unlock()
}

// Messages is the number of messages measured so far.
func (m *Meter) Messages() int64 { return m.messages.Load() }

// SentCount is the number of messages sent so far.
func (m *Meter) SentCount() int64 { return m.sent.Load() }

// FailedCount is the number of failed sends and the first error.
func (m *Meter) FailedCount() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed.Load(), m.firstErr
}

// StartProgress prints a line every every on w until StopProgress:
// messages and MiB per second over the last interval, and its p50 and
// p99 latency. every <= 0 prints nothing.
func (m *Meter) StartProgress(ctx context.Context, w io.Writer, every time.Duration) {
	if every <= 0 {
		return
	}
	ctx, m.stop = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(every)
		defer t.Stop()
		last, lastMsgs, lastBytes := time.Now(), int64(0), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				msgs, bytes := m.messages.Load(), m.bytes.Load()
				el := now.Sub(last).Seconds()
				line := fmt.Sprintf("%6.0fs  %10.0f msg/s  %8.2f MiB/s", now.Sub(m.start).Seconds(),
					float64(msgs-lastMsgs)/el, float64(bytes-lastBytes)/el/(1<<20))
				if p50, p99, ok := m.Latency.Interval(); ok {
					line += fmt.Sprintf("  p50 %.3f ms  p99 %.3f ms", ms(p50), ms(p99))
				}
				if f := m.failed.Load(); f > 0 {
					line += fmt.Sprintf("  failed %d", f)
				}
				fmt.Fprintln(w, line)
				last, lastMsgs, lastBytes = now, msgs, bytes
			}
		}
	}()
}

// StopProgress stops the progress line and waits for its goroutine.
func (m *Meter) StopProgress() {
	if m.stop != nil {
		m.stop()
		<-m.done
		m.stop = nil
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Result is what was measured from the start (or Restart) to now.
func (m *Meter) Result(command string, c Conditions) *Result {
	end := time.Now()
	if e := m.end.Load(); e != 0 {
		end = time.Unix(0, e)
	}
	el := end.Sub(m.start)
	u := SelfUsage()
	c.LoadAverageEnd = LoadAverage()
	r := &Result{
		Schema:         SchemaVersion,
		Command:        command,
		Messages:       m.messages.Load(),
		Bytes:          m.bytes.Load(),
		Sent:           m.sent.Load(),
		Failed:         m.failed.Load(),
		ElapsedSeconds: el.Seconds(),
		Latency:        m.Latency.Summary(),
		CPUSeconds:     (u.CPU - m.usage.CPU).Seconds(),
		MaxRSSBytes:    u.MaxRSS,
		SetupSeconds:   m.setup.Seconds(),
		Conditions:     c,
	}
	if from, ok := m.from.Load().(string); ok {
		r.LatencyFrom = from
	}
	if s := el.Seconds(); s > 0 {
		r.MsgPerSec = float64(r.Messages) / s
		r.MiBPerSec = float64(r.Bytes) / s / (1 << 20)
	}
	r.SteadyMsgPerSec = m.tl.steady(r.Messages, end)
	if r.Messages > 0 {
		r.FirstMessageAt, r.LastMessageAt = m.tl.first(), end
	}
	if r.Messages > 0 {
		r.CPUMicrosPerMessage = r.CPUSeconds * 1e6 / float64(r.Messages)
	}
	return r
}
