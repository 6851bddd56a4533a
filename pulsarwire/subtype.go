package pulsarwire

import (
	"fmt"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// SubscriptionType is how the consumers of one subscription share it
// (CommandSubscribe's subType), spelled as a pipeline file writes it. ""
// is Shared, the protocol's default. Package subscribe (subscribe.Type)
// and package pipelines (pipelines.SubscriptionType) use this one
// definition.
type SubscriptionType string

// Subscription types.
const (
	// Shared: each message goes to one of the consumers; order is not
	// kept.
	Shared SubscriptionType = "shared"
	// Exclusive: one consumer at a time; order kept.
	Exclusive SubscriptionType = "exclusive"
	// Failover: one active consumer (per partition), the others stand by;
	// order kept.
	Failover SubscriptionType = "failover"
	// KeyShared: each key (ordering key, else partition key) goes to one
	// consumer at a time; order kept per key.
	KeyShared SubscriptionType = "key_shared"
)

// ParseSubscriptionType reads a subscription type, ignoring case, '_',
// '-' and spaces: "Key_Shared", "key-shared" and "keyshared" are
// KeyShared. "" is Shared.
func ParseSubscriptionType(s string) (SubscriptionType, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' && r != ' ' {
			b.WriteRune(r)
		}
	}
	switch b.String() {
	case "", "shared":
		return Shared, nil
	case "exclusive":
		return Exclusive, nil
	case "failover":
		return Failover, nil
	case "keyshared":
		return KeyShared, nil
	}
	return "", fmt.Errorf("%q: want shared, exclusive, failover or key_shared", s)
}

// Canonical is t in its canonical spelling ("Key-Shared" is KeyShared,
// "" Shared); false for no known type.
func (t SubscriptionType) Canonical() (SubscriptionType, bool) {
	c, err := ParseSubscriptionType(string(t))
	return c, err == nil
}

// KeepsOrder reports whether the type delivers a key's messages in order
// to one consumer (Exclusive, Failover, KeyShared).
func (t SubscriptionType) KeepsOrder() bool {
	c, _ := t.Canonical()
	return c == Exclusive || c == Failover || c == KeyShared
}

// SingleActive reports whether one consumer at a time receives
// (Exclusive, Failover): the types that take cumulative acks.
func (t SubscriptionType) SingleActive() bool {
	c, _ := t.Canonical()
	return c == Exclusive || c == Failover
}

// Name is Apache Pulsar's name of the type: "Shared", "Exclusive",
// "Failover", "KeyShared".
func (t SubscriptionType) Name() string {
	switch c, _ := t.Canonical(); c {
	case Shared:
		return "Shared"
	case Exclusive:
		return "Exclusive"
	case Failover:
		return "Failover"
	case KeyShared:
		return "KeyShared"
	}
	return fmt.Sprintf("SubscriptionType(%q)", string(t))
}

// Wire is the type as CommandSubscribe carries it.
func (t SubscriptionType) Wire() pb.CommandSubscribe_SubType {
	switch c, _ := t.Canonical(); c {
	case Exclusive:
		return pb.CommandSubscribe_Exclusive
	case Failover:
		return pb.CommandSubscribe_Failover
	case KeyShared:
		return pb.CommandSubscribe_Key_Shared
	}
	return pb.CommandSubscribe_Shared
}
