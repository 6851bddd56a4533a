package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// errHung is the failure of a batch the handler did not answer within
// the pipeline's timeout.
var errHung = errors.New("handler did not answer in time")

// slot is one instance of a pipeline's handler and the worker goroutine
// that feeds it batches, one at a time, restarting it when it fails.
type slot struct {
	p  *pipeline
	id int

	inst instance          // owned by the worker (and by startFirst before it)
	buf  []*plugin.Message // reused for each batch
	// answers carries answered batches to the slot's publisher, in order,
	// so that the instance works on the next batch while the outputs of
	// the last are published.
	answers chan answer

	mu        sync.Mutex // guards what Health reads
	pid       int
	up        bool
	started   time.Time   // of the current instance
	answered  bool        // the current instance answered a batch
	batches   int64       // answered by the current instance
	failures  int         // crashes in a row without a batch answered
	recent    []time.Time // the last DegradedAfter crashes, oldest first
	restarts  int
	lastErr   string
	lastCrash time.Time
	nextStart time.Time // while waiting to restart
}

// startFirst starts the slot's first instance; a failure fails the
// pipeline's start, since a handler that cannot start now is a mistake to
// report rather than retry.
func (s *slot) startFirst(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.p.h.opts.PluginStartTimeout)
	defer cancel()
	inst, err := s.p.start(ctx, s.id)
	if err != nil {
		return fmt.Errorf("start instance %d: %w", s.id, err)
	}
	s.setUp(inst)
	return nil
}

func (s *slot) setUp(inst instance) {
	s.inst = inst
	s.mu.Lock()
	s.pid, s.up, s.started, s.answered, s.batches, s.nextStart = inst.Pid(), true, time.Now(), false, 0, time.Time{}
	s.mu.Unlock()
}

// answer is a handler's answer for the messages of a batch.
type answer struct {
	items []*item
	res   []plugin.Result
}

// publish settles the answers in the order they came: outputs published,
// messages acknowledged after their receipts, retried or dead-lettered.
func (s *slot) publish() {
	for a := range s.answers {
		s.p.settle(a.items, a.res)
	}
}

// run feeds the slot's instance the batches of q until q is closed, or
// hands them back once the pipeline's hard stop came.
func (s *slot) run(q <-chan *batch) {
	p := s.p
	defer close(s.answers)
	for {
		var exited <-chan struct{}
		if s.inst != nil {
			exited = s.inst.Exited()
		}
		select {
		case b, ok := <-q:
			if !ok {
				return
			}
			if p.hard.Err() != nil {
				for _, it := range b.items {
					p.handBack(it)
				}
				continue
			}
			s.process(b)
		case <-exited:
			// Died between batches (killed, or exited on its own): restart
			// it now rather than on the next batch's time.
			s.failed(fmt.Errorf("plugin (pid %d) exited between batches [%s]", s.inst.Pid(), s.inst.ExitStatus()))
			// A stop does not wait for this restart: nothing depends on it.
			_, _ = s.ensure(p.recvCtx.Done())
		}
	}
}

// part is a run of a batch's messages sent together. A batch starts as
// one part; a part that keeps failing without the handler naming a
// message is split in two (see the package doc).
type part struct {
	items []*item
	fails int // failures not pinned on a message
}

// process gets the handler's answer for every message of b, retrying on
// fresh instances through crashes and hangs, and settles the messages.
func (s *slot) process(b *batch) {
	p := s.p
	maxCrashes := p.cfg.ErrorPolicy.MaxCrashes
	parts := []part{{items: b.items}}
	for len(parts) > 0 {
		cur := &parts[0]
		if len(cur.items) == 0 {
			parts = parts[1:]
			continue
		}
		inst, err := s.ensure(nil)
		if err != nil { // the hard stop
			for _, pt := range parts {
				for _, it := range pt.items {
					p.handBack(it)
				}
			}
			return
		}
		s.buf = s.buf[:0]
		for _, it := range cur.items {
			s.buf = append(s.buf, &it.pm)
		}
		ctx, cancel := context.WithTimeout(p.hard, p.cfg.Handler.Timeout)
		t0 := time.Now()
		res, err := inst.Process(ctx, s.buf)
		took := time.Since(t0)
		// The batch's deadline is the only one: the plugin may report it
		// a moment before ctx does.
		hung := errors.Is(err, context.DeadlineExceeded) && p.hard.Err() == nil
		cancel()
		clear(s.buf)
		if f := p.h.opts.Hooks.Handled; f != nil {
			f(p.name, s.id, len(cur.items), took, err)
		}
		if err == nil {
			s.answer()
			s.answers <- answer{cur.items, res}
			parts = parts[1:]
			continue
		}
		if p.hard.Err() != nil {
			continue // ensure sees it and hands everything back
		}
		if hung {
			err = fmt.Errorf("%w: %d messages, no answer after %v: %w", errHung, len(cur.items), p.cfg.Handler.Timeout, err)
		}
		s.failed(err)

		var crash *plugin.CrashError
		if errors.As(err, &crash) && crash.Index >= 0 && crash.Index < len(cur.items) {
			// The handler panicked on this message: one strike against it.
			it := cur.items[crash.Index]
			it.crashes++
			if it.crashes >= maxCrashes {
				cur.items = append(cur.items[:crash.Index:crash.Index], cur.items[crash.Index+1:]...)
				p.deadLetter(it, fmt.Sprintf("the handler crashed %d times on it; last: panic: %s", it.crashes, crash.Panic))
			}
			continue
		}
		cur.fails++
		if cur.fails < maxCrashes {
			continue
		}
		if len(cur.items) == 1 {
			p.deadLetter(cur.items[0], fmt.Sprintf("the handler failed %d times on it alone; last: %v", cur.fails, err))
			parts = parts[1:]
			continue
		}
		half := len(cur.items) / 2
		a, z := cur.items[:half:half], cur.items[half:]
		p.log.Warn("batch keeps failing; splitting it to find the message", "instance", s.id, "messages", len(cur.items), "failures", cur.fails)
		parts = append([]part{{items: a}, {items: z}}, parts[1:]...)
	}
}

// ensure returns the slot's instance, starting a fresh one (after the
// restart backoff) when the last one failed. It fails at the hard stop,
// and when abort is closed.
func (s *slot) ensure(abort <-chan struct{}) (instance, error) {
	p := s.p
	for s.inst == nil {
		s.mu.Lock()
		wait := p.h.opts.Restart.delay(s.failures)
		s.nextStart = time.Now().Add(wait)
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.hard.Done():
			t.Stop()
			return nil, p.hard.Err()
		case <-abort:
			t.Stop()
			return nil, errors.New("restart abandoned")
		}
		ctx, cancel := context.WithTimeout(p.hard, p.h.opts.PluginStartTimeout)
		inst, err := p.start(ctx, s.id)
		cancel()
		if err != nil {
			if p.hard.Err() != nil {
				return nil, p.hard.Err()
			}
			s.failed(fmt.Errorf("restart: %w", err))
			continue
		}
		s.setUp(inst)
		s.mu.Lock()
		s.restarts++
		cause := s.lastErr
		s.mu.Unlock()
		p.stats.restarts.Add(1)
		p.log.Info("handler restarted", "instance", s.id, "pid", inst.Pid(), "after", cause)
		if f := p.h.opts.Hooks.Restarted; f != nil {
			f(p.name, s.id, errors.New(cause))
		}
	}
	if p.hard.Err() != nil {
		return nil, p.hard.Err()
	}
	return s.inst, nil
}

// answer records a batch answered.
func (s *slot) answer() {
	s.mu.Lock()
	s.answered = true
	s.batches++
	s.mu.Unlock()
}

// failed kills the instance after err and counts the crash. A crash
// after a batch answered is not part of a crash loop: the count of
// crashes in a row (and so the backoff) starts over.
func (s *slot) failed(err error) {
	p := s.p
	if s.inst != nil {
		s.inst.Kill()
		s.inst = nil
	}
	rp := &p.h.opts.Restart
	now := time.Now()
	s.mu.Lock()
	if s.answered {
		s.failures = 0
	}
	s.failures++
	n := s.failures
	s.recent = append(s.recent, now)
	if len(s.recent) > rp.DegradedAfter {
		s.recent = s.recent[len(s.recent)-rp.DegradedAfter:]
	}
	s.up, s.pid, s.answered = false, 0, false
	s.lastErr, s.lastCrash = err.Error(), now
	degraded := s.degradedLocked(now)
	s.mu.Unlock()
	p.stats.crashes.Add(1)
	level := slog.LevelWarn
	if degraded {
		level = slog.LevelError
	}
	p.log.Log(context.Background(), level, "handler failed; restarting it", "instance", s.id,
		"crashes_in_a_row", n, "restart_in", rp.delay(n), "err", err)
}

// degradedLocked reports whether the slot keeps crashing: DegradedAfter
// crashes within DegradedWindow, or in a row without a batch answered.
// s.mu held.
func (s *slot) degradedLocked(now time.Time) bool {
	rp := &s.p.h.opts.Restart
	if len(s.recent) >= rp.DegradedAfter && now.Sub(s.recent[len(s.recent)-rp.DegradedAfter]) < rp.DegradedWindow {
		return true
	}
	return s.failures >= rp.DegradedAfter && !s.answered
}

// close stops the slot's instance gracefully (the handler's Close runs),
// killing it if ctx ends first.
func (s *slot) close(ctx context.Context) {
	if s.inst == nil {
		return
	}
	if err := s.inst.Close(ctx); err != nil {
		s.p.log.Warn("close handler", "instance", s.id, "err", err)
	}
	s.inst.Kill()
	s.inst = nil
	s.mu.Lock()
	s.up, s.pid = false, 0
	s.mu.Unlock()
}
