package subscribe

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Position is a place in a topic that a subscription's cursor can be
// moved to (Options.Rewind, Consumer.Seek): the earliest message kept,
// after the latest, a message id, or the first message published at or
// after a time. The zero Position is "none".
type Position struct {
	kind posKind
	id   pulsarwire.MessageID
	time time.Time
}

type posKind uint8

const (
	posNone posKind = iota
	posEarliest
	posLatest
	posID
	posTime
)

// AtEarliest is the oldest message the topic keeps.
func AtEarliest() Position { return Position{kind: posEarliest} }

// AtLatest is after the newest message: only what is published next.
func AtLatest() Position { return Position{kind: posLatest} }

// AtMessage is the message id itself: it is the next one delivered. A
// batch index skips the messages of the batch before it.
func AtMessage(id pulsarwire.MessageID) Position {
	switch id {
	case pulsarwire.Earliest:
		return AtEarliest()
	case pulsarwire.Latest:
		return AtLatest()
	}
	return Position{kind: posID, id: id}
}

// AtTime is the first message published at or after t (the broker's
// publish time, in milliseconds).
func AtTime(t time.Time) Position { return Position{kind: posTime, time: t} }

// IsZero reports whether p is "none".
func (p Position) IsZero() bool { return p.kind == posNone }

// MessageID returns the id of a position made with AtMessage.
func (p Position) MessageID() (pulsarwire.MessageID, bool) { return p.id, p.kind == posID }

// String is the form ParsePosition reads.
func (p Position) String() string {
	switch p.kind {
	case posEarliest:
		return "earliest"
	case posLatest:
		return "latest"
	case posID:
		return p.id.String()
	case posTime:
		return p.time.Format(time.RFC3339Nano)
	}
	return ""
}

// ParsePosition reads "earliest", "latest", a message id
// "ledger:entry:partition[:batchIndex]" or an RFC 3339 time
// ("2025-06-01T12:00:00Z").
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "earliest":
		return AtEarliest(), nil
	case "latest":
		return AtLatest(), nil
	case "":
		return Position{}, fmt.Errorf("position is empty: want earliest, latest, ledger:entry:partition[:batch] or an RFC 3339 time")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return AtTime(t), nil
	}
	if id, err := pulsarwire.ParseMessageID(s); err == nil {
		return AtMessage(id), nil
	}
	return Position{}, fmt.Errorf("position %q: want earliest, latest, ledger:entry:partition[:batch] or an RFC 3339 time", s)
}

// seekCommand is the SEEK for p; nil for the zero Position.
func (p Position) seekCommand(consumerID uint64) *pb.CommandSeek {
	cmd := &pb.CommandSeek{ConsumerId: proto.Uint64(consumerID)}
	switch p.kind {
	case posEarliest:
		cmd.MessageId = pulsarwire.Earliest.Proto()
	case posLatest:
		cmd.MessageId = pulsarwire.Latest.Proto()
	case posID:
		id := p.id
		id.BatchIndex, id.BatchSize = -1, 0 // the broker moves whole entries
		cmd.MessageId = id.Proto()
	case posTime:
		cmd.MessagePublishTime = proto.Uint64(uint64(p.time.UnixMilli()))
	default:
		return nil
	}
	return cmd
}
