package pipelines

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// This file holds the rules of a source as a file writes it: subscription
// types and their spellings, initial positions, rewind positions, topic
// names and patterns. The runtime converts them to its consumer's options
// in one place (runtime/source.go).

// ParseSubscriptionType reads a subscription type, ignoring case, '_',
// '-' and spaces: "Key_Shared", "key-shared" and "keyshared" are
// KeyShared. "" is the default, Shared.
func ParseSubscriptionType(s string) (SubscriptionType, error) {
	return pulsarwire.ParseSubscriptionType(s)
}

// squash lowers s and drops '_', '-' and spaces.
func squash(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' && r != ' ' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ParseInitialPosition reads latest or earliest, in any case; "" is the
// default, Latest.
func ParseInitialPosition(s string) (InitialPosition, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "latest":
		return Latest, nil
	case "earliest":
		return Earliest, nil
	}
	return "", fmt.Errorf("initial position %q: want latest or earliest", s)
}

func (p InitialPosition) normal() (InitialPosition, bool) {
	n, err := ParseInitialPosition(string(p))
	return n, err == nil
}

// PositionKind says what a Position is.
type PositionKind uint8

// Position kinds.
const (
	// NoPosition: no rewind.
	NoPosition PositionKind = iota
	AtEarliest
	AtLatest
	// AtMessageID: Position.ID is the next message delivered.
	AtMessageID
	// AtTime: the first message published at or after Position.Time.
	AtTime
)

// Position is where Source.Rewind moves a subscription's cursor.
type Position struct {
	Kind PositionKind
	ID   pulsarwire.MessageID // AtMessageID
	Time time.Time            // AtTime
}

const positionForms = "want earliest, latest, a message id ledger:entry:partition[:batch] or an RFC 3339 time such as 2025-06-01T12:00:00Z"

// ParsePosition reads a rewind position: "earliest", "latest", a message
// id "ledger:entry:partition[:batch]" or an RFC 3339 time. "" is
// NoPosition.
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "":
		return Position{}, nil
	case "earliest":
		return Position{Kind: AtEarliest}, nil
	case "latest":
		return Position{Kind: AtLatest}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Position{Kind: AtTime, Time: t}, nil
	}
	if id, err := pulsarwire.ParseMessageID(s); err == nil {
		return Position{Kind: AtMessageID, ID: id}, nil
	}
	return Position{}, fmt.Errorf("%q: %s", s, positionForms)
}

// checkTopic reports why t is not a topic name Pulsar accepts.
func checkTopic(t string) error {
	_, err := pulsarwire.ParseTopic(t)
	return err
}

// checkPattern reports why p is not a topic pattern: a Go regular
// expression matched against whole topic names of one namespace, whose
// domain, tenant and namespace are written literally
// (persistent://tenant/ns/<expression>; "tenant/ns/<expression>" and a
// bare expression, in public/default, are short forms of it).
func checkPattern(p string) error {
	full := p
	if !strings.Contains(p, "://") {
		if strings.Count(p, "/") >= 2 {
			full = "persistent://" + p
		} else {
			full = "persistent://public/default/" + p
		}
	}
	domain, rest, _ := strings.Cut(full, "://")
	if domain != "persistent" && domain != "non-persistent" {
		return fmt.Errorf("%q: the domain must be persistent:// or non-persistent://", p)
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%q: want persistent://tenant/namespace/<regular expression>", p)
	}
	for _, s := range parts[:2] {
		if regexp.QuoteMeta(s) != s {
			return fmt.Errorf("%q: the tenant and namespace must be literal, not %q", p, s)
		}
	}
	if _, err := regexp.Compile(parts[2]); err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	return nil
}
