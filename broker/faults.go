package broker

import (
	"sync"
	"sync/atomic"
	"time"

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
// otherwise (Delay alone) it is handled normally, only late.
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
	// Delay holds the connection's command processing this long first.
	Delay time.Duration
	// Count is how many commands the fault applies to before it removes
	// itself; 0 means until Remove is called.
	Count int
}

// FaultHandle is an added fault.
type FaultHandle struct {
	f     Fault
	topic string // normalized
	set   *faultSet
	fired atomic.Int64
	left  int // guarded by set.mu; <0: unlimited
}

// Fired returns how many commands the fault has applied to so far.
func (h *FaultHandle) Fired() int { return int(h.fired.Load()) }

// Remove stops the fault. Removing it twice is harmless.
func (h *FaultHandle) Remove() { h.set.remove(h) }

type faultSet struct {
	mu     sync.Mutex
	faults []*FaultHandle
	n      atomic.Int32 // len(faults), read without the lock on the hot path
}

func (s *faultSet) add(f Fault) *FaultHandle {
	h := &FaultHandle{f: f, set: s, left: f.Count}
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

func (s *faultSet) remove(h *FaultHandle) {
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

// match finds the fault for a command, spending one of its budget.
func (s *faultSet) match(broker int, typ pb.BaseCommand_Type, topic string) (Fault, *FaultHandle, bool) {
	if s.n.Load() == 0 {
		return Fault{}, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.faults {
		f := h.f
		if f.Broker >= 0 && f.Broker != broker {
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
		return f, h, true
	}
	return Fault{}, nil, false
}

// answers reports whether the fault answers with an error.
func (f Fault) answers() bool {
	return !f.Drop && (f.Err != 0 || f.Message != "" || f.Delay == 0)
}

func (f Fault) message() string {
	if f.Message == "" {
		return "injected fault"
	}
	return f.Message
}
