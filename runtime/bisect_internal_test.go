package runtime

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/plugin/host"
)

// A panic that names a message strikes that message; at MaxCrashes
// strikes it is dead-lettered and the rest of its part goes on, the
// batch's own slice untouched.
func TestAfterFailureStrikesTheMessageAPanicNames(t *testing.T) {
	b := items("m", 4)
	orig := slices.Clone(b)
	parts := []part{{items: b}}
	crash := &host.CrashError{Index: 2, Panic: "bad input"}
	err := fmt.Errorf("call: %w", crash)
	for i := 1; i < 3; i++ {
		st := afterFailure(parts, err, 3)
		if len(st.dead) != 0 || st.split != 0 || len(st.parts[0].items) != 4 || b[2].crashes != i {
			t.Fatalf("strike %d: %+v, crashes %d", i, st, b[2].crashes)
		}
		parts = st.parts
	}
	st := afterFailure(parts, err, 3)
	if len(st.dead) != 1 || st.dead[0].it != b[2] || !strings.Contains(st.dead[0].reason, "crashed 3 times on it; last: panic: bad input") {
		t.Fatalf("third strike: %+v", st)
	}
	if got := ids(st.parts[0].items); !slices.Equal(got, []string{"m-0", "m-1", "m-3"}) {
		t.Errorf("left %v", got)
	}
	if !slices.Equal(b, orig) {
		t.Errorf("the batch's slice changed: %v", ids(b))
	}
	if st.parts[0].fails != 0 {
		t.Errorf("a named message's panic struck the part too: %d", st.parts[0].fails)
	}
}

// A failure that names no message strikes the part; at MaxCrashes
// strikes it is split in halves, sent one after the other before the
// parts behind it; a message failing alone is dead-lettered.
func TestAfterFailureSplitsAPartThatKeepsFailing(t *testing.T) {
	b := items("m", 5)
	rest := part{items: items("r", 2)}
	parts := []part{{items: b}, rest}
	err := errors.New("plugin exited")
	parts = afterFailure(parts, err, 2).parts
	if len(parts) != 2 || parts[0].fails != 1 {
		t.Fatalf("after one strike: %+v", parts)
	}
	st := afterFailure(parts, err, 2)
	if st.split != 5 || len(st.parts) != 3 {
		t.Fatalf("after two strikes: %+v", st)
	}
	if a, z := ids(st.parts[0].items), ids(st.parts[1].items); !slices.Equal(a, []string{"m-0", "m-1"}) || !slices.Equal(z, []string{"m-2", "m-3", "m-4"}) {
		t.Errorf("halves %v %v", a, z)
	}
	if !slices.Equal(ids(st.parts[2].items), ids(rest.items)) {
		t.Errorf("the part behind is %v", ids(st.parts[2].items))
	}
	one := []part{{items: items("x", 1), fails: 1}, rest}
	st = afterFailure(one, err, 2)
	if len(st.dead) != 1 || name(st.dead[0].it) != "x-0" || !strings.Contains(st.dead[0].reason, "failed 2 times on it alone; last: plugin exited") {
		t.Fatalf("alone: %+v", st)
	}
	if len(st.parts) != 1 || !slices.Equal(ids(st.parts[0].items), ids(rest.items)) {
		t.Errorf("after the dead letter: %+v", st.parts)
	}
}

// Driven to the end against a handler that fails on any part holding a
// poison message, the rule dead-letters that message alone, answers
// every other, and needs about MaxCrashes × log2(n) failures to do it.
func TestAfterFailureFindsAPoisonMessage(t *testing.T) {
	for _, n := range []int{1, 2, 7, 100, 1000} {
		for _, poison := range []int{0, n / 3, n - 1} {
			const maxCrashes = 3
			b := items("m", n)
			bad := b[poison]
			parts := []part{{items: b}}
			var answered []string
			var dead []*item
			failures := 0
			for len(parts) > 0 {
				cur := parts[0]
				if len(cur.items) == 0 {
					parts = parts[1:]
					continue
				}
				if !slices.Contains(cur.items, bad) {
					answered = append(answered, ids(cur.items)...)
					parts = parts[1:]
					continue
				}
				failures++
				st := afterFailure(parts, errors.New("exit"), maxCrashes)
				parts = st.parts
				for _, d := range st.dead {
					dead = append(dead, d.it)
				}
			}
			if len(dead) != 1 || dead[0] != bad || len(answered) != n-1 || slices.Contains(answered, name(bad)) {
				t.Fatalf("n=%d poison=%d: dead %v, %d answered", n, poison, ids(dead), len(answered))
			}
			if most := maxCrashes * (bits.Len(uint(n)) + 1); failures > most {
				t.Errorf("n=%d: %d failures, more than %d", n, failures, most)
			}
		}
	}
}
