package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
)

// errHung is the failure of a batch the handler did not answer within
// the pipeline's timeout.
var errHung = errors.New("handler did not answer in time")

// slot is one instance of a pipeline's handler and the worker goroutine
// that feeds it batches, up to Handler.MaxBatchesInFlight at once, each
// on a goroutine of its own, restarting the instance when it fails.
type slot struct {
	p  *pipeline
	id int

	// order carries the batches to the slot's publisher in the order they
	// were sent, so that the instance works on the next batches while the
	// outputs of the last are published, and outputs go out in batch
	// order even when the answers come out of order.
	order chan *sent

	imu  sync.Mutex
	inst instance // nil while down; guarded by imu
	gen  uint64   // counts the instances started; guarded by imu
	// careful is set when an instance failed and cleared when a batch
	// sent alone is answered: meanwhile batches go one at a time (under
	// serial), so that a failure is pinned on the batch that caused it,
	// never on one that happened to be in flight beside it. Guarded by
	// imu.
	careful bool
	serial  sync.Mutex // held by a careful call
	startMu sync.Mutex // one restart at a time

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
	s.imu.Lock()
	s.inst = inst
	s.gen++
	s.imu.Unlock()
	s.mu.Lock()
	s.pid, s.up, s.started, s.answered, s.batches, s.nextStart = inst.Pid(), true, time.Now(), false, 0, time.Time{}
	s.mu.Unlock()
}

// answer is a handler's answer for the messages of a batch.
type answer struct {
	items []*item
	res   []plugin.Result
}

// sent is a batch sent to the instance: done is closed once every part
// of it has its answer (or was dead-lettered or handed back).
type sent struct {
	answers []answer
	done    chan struct{}
}

// publish settles the answers in the order the batches were sent:
// outputs published, messages acknowledged after their receipts, retried
// or dead-lettered.
func (s *slot) publish() {
	for b := range s.order {
		<-b.done
		for _, a := range b.answers {
			s.p.settle(a.items, a.res)
		}
	}
}

// run feeds the slot's instance the batches of q, up to
// MaxBatchesInFlight at once, until q is closed and the last has its
// answer, or hands them back once the pipeline's hard stop came.
func (s *slot) run(q <-chan *batch) {
	p := s.p
	defer close(s.order)
	limit := max(p.cfg.Handler.MaxBatchesInFlight, 1)
	fin := make(chan struct{}, limit)
	inflight := 0
	for {
		var exited <-chan struct{}
		if inflight == 0 {
			// Nothing in flight: this goroutine alone uses the instance.
			if inst := s.current(); inst != nil {
				exited = inst.Exited()
			}
		}
		qq := q
		if inflight >= limit {
			qq = nil
		}
		select {
		case b, ok := <-qq:
			if !ok {
				for ; inflight > 0; inflight-- {
					<-fin
				}
				return
			}
			if p.hard.Err() != nil {
				for _, it := range b.items {
					p.handBack(it)
				}
				continue
			}
			sb := &sent{done: make(chan struct{})}
			s.order <- sb
			if limit == 1 {
				// One at a time: no goroutine to hand it to.
				s.process(b, sb, true)
				close(sb.done)
				continue
			}
			inflight++
			go func() {
				defer func() { fin <- struct{}{} }()
				defer close(sb.done)
				s.process(b, sb, limit == 1)
			}()
		case <-fin:
			inflight--
		case <-exited:
			// Died between batches (killed, or exited on its own): restart
			// it now rather than on the next batch's time.
			inst, gen := s.currentGen()
			s.failed(gen, fmt.Errorf("plugin (pid %d) exited between batches [%s]", inst.Pid(), inst.ExitStatus()))
			// A stop does not wait for this restart: nothing depends on it.
			_, _, _, _ = s.ensure(p.recvCtx.Done())
		}
	}
}

func (s *slot) current() instance {
	inst, _ := s.currentGen()
	return inst
}

func (s *slot) currentGen() (instance, uint64) {
	s.imu.Lock()
	defer s.imu.Unlock()
	return s.inst, s.gen
}

// part is a run of a batch's messages sent together. A batch starts as
// one part; a part that keeps failing without the handler naming a
// message is split in two (see the package doc).
type part struct {
	items []*item
	fails int // failures not pinned on a message
}

// acquire returns the instance to send a part to and whether the call
// is careful (alone on the instance, serial held: release it with
// s.serial.Unlock). It fails at the hard stop.
func (s *slot) acquire() (inst instance, gen uint64, careful bool, err error) {
	locked := false
	for {
		inst, gen, careful, err = s.ensure(nil)
		if err != nil {
			if locked {
				s.serial.Unlock()
			}
			return nil, 0, false, err
		}
		switch {
		case careful == locked:
			return inst, gen, careful, nil
		case careful:
			// Wait for the careful calls before this one; the instance
			// may have changed meanwhile.
			s.serial.Lock()
			locked = true
		default:
			s.serial.Unlock()
			return inst, gen, false, nil
		}
	}
}

// process gets the handler's answer for every message of b, retrying on
// fresh instances through crashes and hangs, and leaves the answers in
// sb for the publisher. alone says that the instance never has another
// batch beside this one (MaxBatchesInFlight 1).
func (s *slot) process(b *batch, sb *sent, alone bool) {
	p := s.p
	maxCrashes := p.cfg.ErrorPolicy.MaxCrashes
	parts := []part{{items: b.items}}
	buf := make([]*plugin.Message, 0, len(b.items))
	for len(parts) > 0 {
		cur := &parts[0]
		if len(cur.items) == 0 {
			parts = parts[1:]
			continue
		}
		inst, gen, careful, err := s.acquire()
		if err != nil { // the hard stop
			for _, pt := range parts {
				for _, it := range pt.items {
					p.handBack(it)
				}
			}
			return
		}
		buf = buf[:0]
		for _, it := range cur.items {
			buf = append(buf, &it.pm)
		}
		p.tr.startProcess(b, s.id)
		ctx, cancel := context.WithTimeout(p.tr.processCtx(p.hard, b), p.cfg.Handler.Timeout)
		t0 := time.Now()
		res, err := inst.Process(ctx, buf)
		took := time.Since(t0)
		// The batch's deadline is the only one: the plugin may report it
		// a moment before ctx does.
		hung := errors.Is(err, context.DeadlineExceeded) && p.hard.Err() == nil
		cancel()
		clear(buf)
		if f := p.h.opts.Hooks.Handled; f != nil {
			f(p.name, s.id, len(cur.items), took, err)
		}
		p.met.handled(len(cur.items), took, err)
		if err == nil {
			s.answer(gen, careful)
			if careful {
				s.serial.Unlock()
			}
			sb.answers = append(sb.answers, answer{cur.items, res})
			parts = parts[1:]
			continue
		}
		if careful {
			s.serial.Unlock()
		}
		if p.hard.Err() != nil {
			continue // acquire sees it and hands everything back
		}
		if hung {
			err = fmt.Errorf("%w: %d messages, no answer after %v: %w", errHung, len(cur.items), p.cfg.Handler.Timeout, err)
		}
		p.tr.handlerFailed(b, s.id, err)
		first := s.failed(gen, err)
		if !first || !(alone || careful) {
			// Another batch was (or may have been) in flight on the
			// instance: the failure, even a panic naming a message (a
			// plugin that panicked answers every call with that panic),
			// may be the other's. No strike; the retry goes alone.
			continue
		}

		var crash *host.CrashError
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

// ensure returns the slot's instance, its number and whether calls
// must be careful, starting a fresh one (after the restart backoff) when
// the last one failed. It fails at the hard stop, and when abort is
// closed.
func (s *slot) ensure(abort <-chan struct{}) (instance, uint64, bool, error) {
	p := s.p
	s.startMu.Lock()
	defer s.startMu.Unlock()
	for s.current() == nil {
		s.mu.Lock()
		wait := p.h.opts.Restart.delay(s.failures)
		s.nextStart = time.Now().Add(wait)
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.hard.Done():
			t.Stop()
			return nil, 0, false, p.hard.Err()
		case <-abort:
			t.Stop()
			return nil, 0, false, errors.New("restart abandoned")
		}
		ctx, cancel := context.WithTimeout(p.hard, p.h.opts.PluginStartTimeout)
		inst, err := p.start(ctx, s.id)
		cancel()
		if err != nil {
			if p.hard.Err() != nil {
				return nil, 0, false, p.hard.Err()
			}
			s.count(fmt.Errorf("restart: %w", err))
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
		return nil, 0, false, p.hard.Err()
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	return s.inst, s.gen, s.careful, nil
}

// answer records a batch answered by instance gen; a careful call
// answered ends the careful time.
func (s *slot) answer(gen uint64, careful bool) {
	s.imu.Lock()
	if s.gen != gen || s.inst == nil {
		s.imu.Unlock()
		return // answered by an instance already failed
	}
	if careful {
		s.careful = false
	}
	s.imu.Unlock()
	s.mu.Lock()
	s.answered = true
	s.batches++
	s.mu.Unlock()
}

// failed kills instance gen after err and counts the crash, unless that
// instance is failed already (another batch in flight on it saw the
// failure first): it reports whether it was the first. A crash after a
// batch answered is not part of a crash loop: the count of crashes in a
// row (and so the backoff) starts over.
func (s *slot) failed(gen uint64, err error) bool {
	s.imu.Lock()
	inst := s.inst
	if s.gen != gen || inst == nil {
		s.imu.Unlock()
		return false
	}
	s.inst = nil
	s.careful = true
	s.imu.Unlock()
	inst.Kill()
	s.count(err)
	return true
}

// count counts a crash of the slot's instance (or of its restart).
func (s *slot) count(err error) {
	p := s.p
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
	s.imu.Lock()
	inst := s.inst
	s.inst = nil
	s.imu.Unlock()
	if inst == nil {
		return
	}
	if err := inst.Close(ctx); err != nil {
		s.p.log.Warn("close handler", "instance", s.id, "err", err)
	}
	inst.Kill()
	s.mu.Lock()
	s.up, s.pid = false, 0
	s.mu.Unlock()
}
