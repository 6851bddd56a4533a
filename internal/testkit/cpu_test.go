package testkit

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// CPUTime counts this process's CPU time, and a process named by its pid
// on top: naming this process again about doubles it, so the /proc
// reading is the process's CPU ticks.
func TestCPUTimeCountsThisProcessAndThePidsNamed(t *testing.T) {
	start := CPUTime()
	sum := sha256.Sum256(nil)
	deadline := time.Now().Add(time.Minute)
	for CPUTime()-start < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("CPUTime did not grow by 50ms in a minute of hashing: %v", CPUTime()-start)
		}
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
	}
	self := CPUTime()
	twice := CPUTime(os.Getpid())
	// Clock ticks are 10ms: the /proc reading may lag by one for user
	// and one for system time.
	if extra := twice - self; extra < self-20*time.Millisecond {
		t.Errorf("naming this process added %v, want about the %v it has used", extra, self)
	}
}
