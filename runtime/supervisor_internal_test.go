package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A failed call kills its instance once, however many calls in flight on
// it fail; the next lease is on a fresh instance, and careful.
func TestSupervisorReplacesAFailedInstanceOnce(t *testing.T) {
	fs := &fakes{}
	s, _ := testSupervisor(t, fs)
	a, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if a.careful || b.careful || a.inst() != b.inst() {
		t.Fatalf("two leases on a healthy slot: %+v %+v", a, b)
	}
	if !s.release(a, errors.New("crashed")) {
		t.Error("the first failure was not first")
	}
	if s.release(b, errors.New("crashed too")) {
		t.Error("the second failure of the same instance counted again")
	}
	if !fs.get(0).killed.Load() {
		t.Error("the failed instance was not killed")
	}
	c, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if c.inst() == a.inst() || !c.careful || fs.count() != 2 {
		t.Fatalf("after a failure: lease %+v, %d instances started", c, fs.count())
	}
	s.release(c, nil)
	ih, degraded, _ := s.health(time.Now())
	if ih.Restarts != 1 || ih.Pid != 101 || !ih.Up || ih.CrashesInARow != 0 || ih.LastError != "crashed" || degraded {
		t.Errorf("health %+v (degraded %v)", ih, degraded)
	}
	if d, _ := s.acquire(); d.careful {
		t.Error("still careful after a careful call was answered")
	} else {
		s.release(d, nil)
	}
}

// While careful, calls go one at a time: a second waits until the first
// careful call ends.
func TestSupervisorCarefulCallsGoOneAtATime(t *testing.T) {
	fs := &fakes{}
	s, _ := testSupervisor(t, fs)
	a, _ := s.acquire()
	s.release(a, errors.New("crashed"))
	first, err := s.acquire()
	if err != nil || !first.careful {
		t.Fatalf("lease %+v, %v", first, err)
	}
	got := make(chan lease)
	go func() {
		l, _ := s.acquire()
		got <- l
	}()
	select {
	case l := <-got:
		t.Fatalf("a second call went beside a careful one: %+v", l)
	case <-time.After(50 * time.Millisecond):
	}
	s.release(first, nil)
	second := <-got
	if second.careful {
		t.Error("careful after the careful call was answered")
	}
	s.release(second, nil)
}

// Crashes in a row make the slot degraded and lengthen the wait; an
// answer in between starts the count over.
func TestSupervisorCountsCrashesInARow(t *testing.T) {
	fs := &fakes{}
	s, _ := testSupervisor(t, fs)
	for range 3 {
		l, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		s.release(l, errors.New("boom"))
	}
	ih, degraded, recent := s.health(time.Now())
	if ih.CrashesInARow != 3 || !degraded || recent != 3 {
		t.Errorf("after 3 crashes: %+v degraded %v recent %d", ih, degraded, recent)
	}
	l, _ := s.acquire()
	s.release(l, nil)
	l, _ = s.acquire()
	s.release(l, errors.New("once more"))
	s.mu.Lock()
	n := s.rec.failures
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("crashes in a row after an answer and a crash: %d, want 1", n)
	}
	if d := quickRestarts.delay(3); d != 4*quickRestarts.Initial {
		t.Errorf("third restart waits %v", d)
	}
}

// A restart that fails counts as a crash and is tried again.
func TestSupervisorRetriesAFailedStart(t *testing.T) {
	fs := &fakes{}
	s, _ := testSupervisor(t, fs)
	l, _ := s.acquire()
	fs.mu.Lock()
	fs.fail = 2
	fs.mu.Unlock()
	s.release(l, errors.New("crashed"))
	l, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	s.release(l, nil)
	ih, _, _ := s.health(time.Now())
	if ih.Restarts != 1 || fs.count() != 2 {
		t.Errorf("health %+v, %d started", ih, fs.count())
	}
	if !strings.Contains(ih.LastError, "restart: no such binary") {
		t.Errorf("last error %q", ih.LastError)
	}
}

// At the hard stop a slot that is down gives up instead of restarting,
// and an instance that exits while idle is failed only if still current.
func TestSupervisorStopsAtTheHardStop(t *testing.T) {
	fs := &fakes{}
	s, cancel := testSupervisor(t, fs)
	_, gen, _ := s.watch()
	l, _ := s.acquire()
	s.release(l, errors.New("crashed"))
	s.lost(gen) // the same instance, already failed: nothing more
	if ih, _, _ := s.health(time.Now()); ih.CrashesInARow != 1 {
		t.Errorf("a stale exit counted: %+v", ih)
	}
	cancel()
	if _, err := s.acquire(); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire at the hard stop: %v", err)
	}
}
