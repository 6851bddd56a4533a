package broker

import (
	"fmt"
	"testing"
	"time"
)

// Apache Pulsar 4.0.8 standalone, observed: Failover consumers
// "consumer-0" and "consumer-1" on these non-partitioned topics; which one
// it made active.
func TestFailoverRingPicksAsApachePulsar(t *testing.T) {
	observed := []int{0, 0, 0, 1, 1, 0, 0, 1, 0, 1}
	cs := []*consumer{{name: "consumer-0"}, {name: "consumer-1"}}
	for i, want := range observed {
		topic := fmt.Sprintf("persistent://public/default/fo-probe-%d-%d", 1795989131+i, i)
		if got := failoverRingPick(topic, cs); got != want {
			t.Errorf("%s: active consumer-%d, Apache Pulsar chose consumer-%d", topic, got, want)
		}
	}
}

func TestMurmur3KnownValues(t *testing.T) {
	// Reference values of MurmurHash3_x86_32 with seed 0.
	for in, want := range map[string]uint32{"": 0, "hello": 0x248bfa47, "The quick brown fox jumps over the lazy dog": 0x2e4ff723} {
		if got := murmur3([]byte(in), 0); got != want {
			t.Errorf("murmur3(%q) = %#x, want %#x", in, got, want)
		}
	}
}

func TestFailoverDelayDefaultsToApachePulsars(t *testing.T) {
	if got := (Options{}).withDefaults().FailoverDelay; got != time.Second {
		t.Fatalf("default FailoverDelay %v, want 1s", got)
	}
}
