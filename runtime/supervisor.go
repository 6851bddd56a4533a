package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// supervisor keeps one instance slot of a pipeline's handler running: it
// starts the instance, restarts it after a failure (after the restart
// backoff), replaces it with a new version of the handler on a live
// swap, and keeps the record Health reports. It knows nothing of batches:
// a caller leases the instance for one call and says how the call went.
type supervisor struct {
	id           int
	policy       RestartPolicy
	startTimeout time.Duration
	log          *slog.Logger
	// stop ends at the pipeline's hard stop: a restart gives up.
	stop context.Context
	// crashed and restarted are told of each failure and restart, for the
	// pipeline's counters and hooks; either may be nil.
	crashed   func()
	restarted func(cause error)
	// started is told of each instance started (may be nil).
	started func(instance)

	startMu sync.Mutex // one start (first, restart or swap) at a time
	start   starter    // guarded by startMu

	// serial is held by a careful call (see careful).
	serial sync.Mutex

	mu  sync.Mutex
	cur *running // nil while down; guarded by mu
	gen uint64   // counts the instances started; guarded by mu
	// careful is set when an instance failed and cleared when a call
	// sent alone is answered: meanwhile calls go one at a time (under
	// serial), so that a failure is pinned on the batch that caused it,
	// never on one that happened to be in flight beside it. Guarded by mu.
	careful bool
	// changed is closed, and replaced, whenever cur changes, so that a
	// watcher of the instance's exit watches the right one. Guarded by mu.
	changed chan struct{}
	rec     record // guarded by mu
}

// running is one instance and the calls leased on it.
type running struct {
	inst instance
	gen  uint64
	// calls counts the leases out; once retired, drained is closed when
	// the last of them ends. Guarded by the supervisor's mu.
	calls   int
	retired bool
	drained chan struct{}
}

// lease is the right to send one call to an instance: release it with
// supervisor.release.
type lease struct {
	r *running
	// careful: the call is alone on the instance (serial is held).
	careful bool
}

// inst is the instance to call.
func (l lease) inst() instance { return l.r.inst }

// record is what Health reports of a slot.
type record struct {
	pid       int
	up        bool
	started   time.Time   // of the current instance
	answered  bool        // the current instance answered a batch
	batches   int64       // answered by the current instance
	failures  int         // crashes in a row without a batch answered
	recent    []time.Time // the last DegradedAfter crashes, oldest first
	restarts  int
	swaps     int
	lastErr   string
	lastCrash time.Time
	nextStart time.Time // while waiting to restart
}

func newSupervisor(id int, start starter, policy RestartPolicy, startTimeout time.Duration, stop context.Context, log *slog.Logger) *supervisor {
	return &supervisor{
		id: id, start: start, policy: policy, startTimeout: startTimeout, stop: stop, log: log,
		changed: make(chan struct{}),
	}
}

// startFirst starts the slot's first instance; a failure fails the
// pipeline's start, since a handler that cannot start now is a mistake to
// report rather than retry.
func (s *supervisor) startFirst(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	inst, err := s.start(ctx, s.id)
	if err != nil {
		return fmt.Errorf("start instance %d: %w", s.id, err)
	}
	s.mu.Lock()
	s.setLocked(inst)
	s.mu.Unlock()
	return nil
}

// setLocked makes inst the current instance. s.mu held.
func (s *supervisor) setLocked(inst instance) *running {
	if s.started != nil {
		s.started(inst)
	}
	s.gen++
	r := &running{inst: inst, gen: s.gen, drained: make(chan struct{})}
	s.cur = r
	close(s.changed)
	s.changed = make(chan struct{})
	s.rec.pid, s.rec.up, s.rec.started, s.rec.answered, s.rec.batches, s.rec.nextStart = inst.Pid(), true, time.Now(), false, 0, time.Time{}
	return r
}

// acquire leases the instance for one call, starting a fresh one (after
// the restart backoff) when the last one failed; the lease is careful
// while the slot is (see careful). It fails at the hard stop.
func (s *supervisor) acquire() (lease, error) {
	locked := false
	for {
		l, err := s.ensure(nil)
		if err != nil {
			if locked {
				s.serial.Unlock()
			}
			return lease{}, err
		}
		switch {
		case l.careful == locked:
			return l, nil
		case l.careful:
			// Wait for the careful calls before this one; the instance
			// may have changed meanwhile.
			s.drop(l)
			s.serial.Lock()
			locked = true
		default:
			s.serial.Unlock()
			return l, nil
		}
	}
}

// ensure leases the current instance, starting one (after the restart
// backoff) while there is none. It fails at the hard stop, and when abort
// is closed.
func (s *supervisor) ensure(abort <-chan struct{}) (lease, error) {
	if l, ok := s.take(); ok {
		return l, nil
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	for {
		if l, ok := s.take(); ok {
			return l, nil
		}
		if err := s.restart(abort); err != nil {
			return lease{}, err
		}
	}
}

// vacant reports whether the slot has no instance (the last one failed)
// and the hard stop has not come, so one should be started.
func (s *supervisor) vacant() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur == nil && s.stop.Err() == nil
}

// take leases the current instance, if there is one and the hard stop
// has not come.
func (s *supervisor) take() (lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.stop.Err() != nil {
		return lease{}, false
	}
	s.cur.calls++
	return lease{r: s.cur, careful: s.careful}, true
}

// restart waits out the backoff and starts a fresh instance; an instance
// that fails to start counts as a crash, and the next try waits longer.
// s.startMu held.
func (s *supervisor) restart(abort <-chan struct{}) error {
	if err := s.stop.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	wait := s.policy.delay(s.rec.failures)
	s.rec.nextStart = time.Now().Add(wait)
	s.mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-t.C:
	case <-s.stop.Done():
		t.Stop()
		return s.stop.Err()
	case <-abort:
		t.Stop()
		return errors.New("restart abandoned")
	}
	ctx, cancel := context.WithTimeout(s.stop, s.startTimeout)
	inst, err := s.start(ctx, s.id)
	cancel()
	if err != nil {
		if s.stop.Err() != nil {
			return s.stop.Err()
		}
		s.count(fmt.Errorf("restart: %w", err))
		return nil
	}
	s.mu.Lock()
	s.setLocked(inst)
	s.rec.restarts++
	cause := s.rec.lastErr
	s.mu.Unlock()
	s.log.Info("handler restarted", "instance", s.id, "pid", inst.Pid(), "after", cause)
	if s.restarted != nil {
		s.restarted(errors.New(cause))
	}
	return nil
}

// release ends the call of l: an answer (err nil) counts for the
// instance and ends the careful time if l was careful; a failure kills
// the instance, unless it is failed (or replaced) already because another
// call in flight on it saw a failure first. It reports whether this
// failure was the first.
func (s *supervisor) release(l lease, err error) (first bool) {
	var kill instance
	s.mu.Lock()
	r := l.r
	current := s.cur == r
	switch {
	case err == nil && current:
		if l.careful {
			s.careful = false
		}
		s.rec.answered = true
		s.rec.batches++
	case err != nil && current:
		s.cur = nil
		s.careful = true
		close(s.changed)
		s.changed = make(chan struct{})
		kill, first = r.inst, true
	}
	s.doneLocked(r)
	s.mu.Unlock()
	if l.careful {
		s.serial.Unlock()
	}
	if kill != nil {
		kill.Kill()
		s.count(err)
	}
	return first
}

// abandon ends the call of l with no word on how it went (at the hard
// stop).
func (s *supervisor) abandon(l lease) {
	s.drop(l)
	if l.careful {
		s.serial.Unlock()
	}
}

// drop gives l back unused (serial, if taken, stays held).
func (s *supervisor) drop(l lease) {
	s.mu.Lock()
	s.doneLocked(l.r)
	s.mu.Unlock()
}

// doneLocked ends a lease on r. s.mu held.
func (s *supervisor) doneLocked(r *running) {
	r.calls--
	if r.retired && r.calls == 0 {
		close(r.drained)
	}
}

// watch returns what the slot's idle worker waits on: the current
// instance's exit (nil when there is none, or it is in the host's
// process), its number, and a channel closed when the instance changes.
func (s *supervisor) watch() (exited <-chan struct{}, gen uint64, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		exited, gen = s.cur.inst.Exited(), s.cur.gen
	}
	return exited, gen, s.changed
}

// lost fails instance gen, which exited while it had nothing to do,
// unless it is no longer the current one.
func (s *supervisor) lost(gen uint64) {
	s.mu.Lock()
	r := s.cur
	if r == nil || r.gen != gen {
		s.mu.Unlock()
		return
	}
	s.cur = nil
	s.careful = true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	r.inst.Kill()
	s.count(fmt.Errorf("plugin (pid %d) exited between batches [%s]", r.inst.Pid(), r.inst.ExitStatus()))
}

// count counts a crash of the slot's instance (or of its restart). A
// crash after a batch answered is not part of a crash loop: the count of
// crashes in a row (and so the backoff) starts over.
func (s *supervisor) count(err error) {
	now := time.Now()
	s.mu.Lock()
	if s.rec.answered {
		s.rec.failures = 0
	}
	s.rec.failures++
	n := s.rec.failures
	s.rec.recent = append(s.rec.recent, now)
	if len(s.rec.recent) > s.policy.DegradedAfter {
		s.rec.recent = s.rec.recent[len(s.rec.recent)-s.policy.DegradedAfter:]
	}
	s.rec.up, s.rec.pid, s.rec.answered = false, 0, false
	s.rec.lastErr, s.rec.lastCrash = err.Error(), now
	degraded := s.degradedLocked(now)
	s.mu.Unlock()
	if s.crashed != nil {
		s.crashed()
	}
	level := slog.LevelWarn
	if degraded {
		level = slog.LevelError
	}
	s.log.Log(context.Background(), level, "handler failed; restarting it", "instance", s.id,
		"crashes_in_a_row", n, "restart_in", s.policy.delay(n), "err", err)
}

// degradedLocked reports whether the slot keeps crashing: DegradedAfter
// crashes within DegradedWindow, or in a row without a batch answered.
// s.mu held.
func (s *supervisor) degradedLocked(now time.Time) bool {
	rp := &s.policy
	if len(s.rec.recent) >= rp.DegradedAfter && now.Sub(s.rec.recent[len(s.rec.recent)-rp.DegradedAfter]) < rp.DegradedWindow {
		return true
	}
	return s.rec.failures >= rp.DegradedAfter && !s.rec.answered
}

// recentLocked counts the slot's crashes within DegradedWindow (of the
// last DegradedAfter). s.mu held.
func (s *supervisor) recentLocked(now time.Time) int {
	n := 0
	for _, t := range s.rec.recent {
		if now.Sub(t) < s.policy.DegradedWindow {
			n++
		}
	}
	return n
}

// health reports the slot now, and whether it keeps crashing (with the
// count of its recent crashes).
func (s *supervisor) health(now time.Time) (ih InstanceHealth, degraded bool, recent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rec
	ih = InstanceHealth{
		Instance: s.id, Up: r.up, Pid: r.pid, Batches: r.batches, Restarts: r.restarts, Swaps: r.swaps,
		CrashesInARow: r.failures, LastError: r.lastErr, LastCrash: r.lastCrash,
	}
	if r.up {
		ih.Since = r.started
	} else {
		ih.NextStart = r.nextStart
	}
	if r.answered {
		ih.CrashesInARow = 0
	}
	return ih, s.degradedLocked(now), s.recentLocked(now)
}

// close stops the slot's instance gracefully (the handler's Close runs),
// killing it if ctx ends first.
func (s *supervisor) close(ctx context.Context) {
	s.mu.Lock()
	r := s.cur
	s.cur = nil
	s.rec.up, s.rec.pid = false, 0
	s.mu.Unlock()
	if r == nil {
		return
	}
	if err := r.inst.Close(ctx); err != nil {
		s.log.Warn("close handler", "instance", s.id, "err", err)
	}
	r.inst.Kill()
}

// replace puts inst, a new version of the handler started by start, in
// the slot, and makes start the slot's starter: from now on calls go to
// inst, while those already leased on the old instance finish there.
// Once they have, the old one is closed gracefully (killed if ctx ends
// first, or at the hard stop). It returns the old instance's pid (0 if
// the slot was down).
func (s *supervisor) replace(ctx context.Context, start starter, inst instance) int {
	s.startMu.Lock()
	s.start = start
	s.mu.Lock()
	old := s.cur
	s.setLocked(inst)
	s.rec.swaps++
	if old != nil {
		old.retired = true
		if old.calls == 0 {
			close(old.drained)
		}
	}
	s.mu.Unlock()
	s.startMu.Unlock()
	if old == nil {
		return 0
	}
	select {
	case <-old.drained:
	case <-ctx.Done():
	case <-s.stop.Done():
	}
	if err := old.inst.Close(ctx); err != nil {
		s.log.Warn("close the replaced handler", "instance", s.id, "pid", old.inst.Pid(), "err", err)
	}
	old.inst.Kill()
	return old.inst.Pid()
}
