// Package faults makes an embedded broker misbehave on purpose, for
// tests: "fail the next 3 lookups of topic X with ServiceNotReady", "drop
// the connection at the next PRODUCER", "hold every SEND 100 ms". A Set of
// faults plugs into a broker as its Options.Intercept (Install); with
// InstallAPI it is also served over the admin API, for a broker run as a
// process of its own (`streamrun broker --fault-api`, a build with the
// faultapi tag). broker/brokertest installs a Set on every test cluster
// (brokertest.Faults).
//
// Nothing outside tests imports this package, so a production build of
// the broker carries none of it.
package faults

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Fault makes the broker misbehave for commands that match it, for tests:
// "fail the next 3 lookups of topic X with ServiceNotReady". A command
// matches when every non-zero selector matches; the first matching fault
// (in the order they were added) applies.
//
// What happens to a matching command: it waits Delay; then, with Drop, the
// connection is closed; otherwise, when Err or Message is set or Delay is
// zero, it is answered with Err (see below) instead of being handled;
// otherwise (Delay alone) it is handled normally, only late. With
// DropAnswer it is handled, then the connection is closed with the answer
// unsent.
type Fault struct {
	// Broker is the index of the broker whose connections are affected;
	// -1 means any. The zero value is broker 0.
	Broker int
	// Command is the kind of command to match; 0 (the zero value) means
	// every command a client sends except PING and PONG.
	Command pb.BaseCommand_Type
	// Topic matches commands about this topic (LOOKUP, PARTITIONED_METADATA,
	// PRODUCER, SUBSCRIBE, GET_SCHEMA, and the commands of a producer or
	// consumer on it). Short names are accepted ("orders" means
	// persistent://public/default/orders). "" matches everything, commands
	// without a topic included.
	Topic string
	// Err is the server error answered, in the command's own response
	// (LOOKUP_RESPONSE, PARTITIONED_METADATA_RESPONSE, SEND_ERROR,
	// ACK_RESPONSE, ...) or an ERROR. The zero value is UnknownError.
	// Commands that have no response (FLOW, REDELIVER, an ACK without a
	// request id) are dropped silently.
	Err pb.ServerError
	// Message is the error's text. Default: "injected fault".
	Message string
	// Drop closes the connection instead of answering.
	Drop bool
	// DropAnswer handles the command, then closes the connection before
	// its answer goes out: the broker did it, the client never hears so
	// (an END_TXN that committed, its answer lost).
	DropAnswer bool
	// Delay holds the connection's command processing this long first.
	Delay time.Duration
	// Count is how many commands the fault applies to before it removes
	// itself; 0 means until Remove is called.
	Count int
}

// Handle is an added fault.
type Handle struct {
	f     Fault
	topic string // normalized
	set   *Set
	fired atomic.Int64
	left  int // guarded by set.mu; <0: unlimited
}

// Fired returns how many commands the fault has applied to so far.
func (h *Handle) Fired() int { return int(h.fired.Load()) }

// Remove stops the fault. Removing it twice is harmless.
func (h *Handle) Remove() { h.set.remove(h) }

// Set is a list of faults, matched in the order they were added. The zero
// Set is empty and ready; it is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	faults []*Handle
	n      atomic.Int32 // len(faults), read without the lock on the hot path
}

// Add puts a fault in place (see Fault) and returns its handle.
func (s *Set) Add(f Fault) *Handle {
	h := &Handle{f: f, set: s, left: f.Count}
	if f.Count <= 0 {
		h.left = -1
	}
	if f.Topic != "" {
		if t, err := pulsarwire.ParseTopic(f.Topic); err == nil {
			h.topic = t.String()
		} else {
			h.topic = f.Topic
		}
	}
	s.mu.Lock()
	s.faults = append(s.faults, h)
	s.n.Store(int32(len(s.faults)))
	s.mu.Unlock()
	return h
}

func (s *Set) remove(h *Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.faults {
		if x == h {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			break
		}
	}
	s.n.Store(int32(len(s.faults)))
}

// Install makes s the interceptor of the broker o configures.
func (s *Set) Install(o *broker.Options) { o.Intercept = s }

// Intercept implements broker.Interceptor: the first fault matching the
// command decides, spending one of its budget.
func (s *Set) Intercept(brokerIndex int, typ pb.BaseCommand_Type, topicOf func() string) (broker.Verdict, bool) {
	if s.n.Load() == 0 {
		return broker.Verdict{}, false
	}
	f, ok := s.match(brokerIndex, typ, topicOf())
	if !ok {
		return broker.Verdict{}, false
	}
	return broker.Verdict{Delay: f.Delay, Drop: f.Drop, DropAnswer: f.DropAnswer && !f.Drop, Refuse: f.answers(), Err: f.Err, Message: f.message()}, true
}

// match finds the fault for a command, spending one of its budget.
func (s *Set) match(brokerIndex int, typ pb.BaseCommand_Type, topic string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.faults {
		f := h.f
		if f.Broker >= 0 && f.Broker != brokerIndex {
			continue
		}
		if f.Command == 0 && (typ == pb.BaseCommand_PING || typ == pb.BaseCommand_PONG) {
			continue
		}
		if f.Command != 0 && f.Command != typ {
			continue
		}
		if h.topic != "" && h.topic != topic {
			continue
		}
		h.fired.Add(1)
		if h.left > 0 {
			h.left--
			if h.left == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
				s.n.Store(int32(len(s.faults)))
			}
		}
		return f, true
	}
	return Fault{}, false
}

// answers reports whether the fault answers with an error.
func (f Fault) answers() bool {
	return !f.Drop && !f.DropAnswer && (f.Err != 0 || f.Message != "" || f.Delay == 0)
}

func (f Fault) message() string {
	if f.Message == "" {
		return "injected fault"
	}
	return f.Message
}
