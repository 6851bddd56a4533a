package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/streamrun/streamrun/subscribe"
)

// outputs is what the quickstart saw of quickstart-out: every output
// once (a plugin may deliver a message twice after a crash:
// at-least-once, so only distinct payloads count), each key's new outputs
// in the order their inputs were published, and which key each stored
// entry held.
type outputs struct {
	want int
	all  chan struct{} // closed once every output was seen

	mu       sync.Mutex
	seen     map[string]bool
	last     map[string]int    // by key: the index of its newest output
	entryKey map[string]string // by stored entry (ledger:entry:partition): its key
	problems []error
}

func newOutputs(n int) *outputs {
	return &outputs{want: n, all: make(chan struct{}), seen: make(map[string]bool, n),
		last: map[string]int{}, entryKey: map[string]string{}}
}

// add takes one output as it arrives.
func (o *outputs) add(m *subscribe.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	payload := string(m.Payload)
	entry := fmt.Sprintf("%d:%d:%d", m.ID.Ledger, m.ID.Entry, m.ID.Partition)
	if k, ok := o.entryKey[entry]; ok && k != m.Key {
		o.problem("entry %s holds keys %s and %s: a batch mixed keys", entry, k, m.Key)
	}
	o.entryKey[entry] = m.Key
	if o.seen[payload] {
		return // a redelivery
	}
	i, err := strconv.Atoi(strings.TrimPrefix(payload, "HELLO STREAMRUN "))
	if err != nil || !strings.HasPrefix(payload, "HELLO STREAMRUN ") {
		o.problem("unexpected output %q", payload)
		return
	}
	if want := fmt.Sprintf("user-%d", i%keys); m.Key != want {
		o.problem("output %q has key %q, want %q", payload, m.Key, want)
	}
	if last, ok := o.last[m.Key]; ok && i < last {
		o.problem("key %s: output %d came after %d", m.Key, i, last)
	}
	o.last[m.Key] = i
	o.seen[payload] = true
	if len(o.seen) == o.want {
		close(o.all)
	}
}

func (o *outputs) problem(format string, args ...any) {
	if len(o.problems) < 10 {
		o.problems = append(o.problems, fmt.Errorf(format, args...))
	}
}

// check says what was wrong with the outputs.
func (o *outputs) check() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return errors.Join(o.problems...)
}

// distinct is how many different outputs came.
func (o *outputs) distinct() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// entries is how many stored entries the outputs came in.
func (o *outputs) entries() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entryKey)
}
