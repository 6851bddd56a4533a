package pulsarwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// ProtocolVersion is the protocol version streamrun speaks: v20 added
// topic migration, the newest change a client needs to know of. A peer
// answers with the lower of the two.
const ProtocolVersion = 20

//go:generate go run ./internal/cmdgen -o commands_gen.go

// A Command describes one kind of BaseCommand, once, for everything that
// handles commands: the codec (Wrap, Body), the client (request ids,
// answers and refusals) and the broker (what to answer, what a command is
// about). The table of them, commands_gen.go, is generated from the
// protocol's descriptors by internal/cmdgen: a command's field in
// BaseCommand is the one whose number is its type, and its ids and topic
// are found by name.
type Command struct {
	Type pb.BaseCommand_Type
	// Answer is the kind that answers this command when it succeeds
	// (LOOKUP_RESPONSE for LOOKUP, SUCCESS for SUBSCRIBE, SEND_RECEIPT for
	// SEND); 0 when nothing answers it.
	Answer pb.BaseCommand_Type
	// Failure is the kind that carries a refusal of this command: the
	// answer itself when it has an error field (LOOKUP_RESPONSE,
	// ACK_RESPONSE, GET_SCHEMA_RESPONSE, ...), SEND_ERROR for SEND, ERROR
	// for any other request with a request id; 0 when it cannot be refused.
	Failure pb.BaseCommand_Type
	// IsAnswer is set for the kinds that answer a request (SUCCESS, ERROR,
	// PRODUCER_SUCCESS, the *_RESPONSE kinds, ...).
	IsAnswer bool

	// Each accessor is nil when the kind's message has no such field; the
	// functions below say what a nil one means.
	modelled                          bool
	requestID, consumerID, producerID func(*pb.BaseCommand) (uint64, bool)
	topic                             func(*pb.BaseCommand) (string, bool)
	setRequestID                      func(*pb.BaseCommand, uint64) bool
	refusal                           func(*pb.BaseCommand, pb.ServerError, string) proto.Message
	refused                           func(*pb.BaseCommand) error
}

// envelope holds a BaseCommand and its type in one allocation.
type envelope struct {
	cmd pb.BaseCommand
	typ pb.BaseCommand_Type
}

// Describe returns the description of kind t; a kind streamrun does not
// model (topic-list watchers, migration) gets one with only Type set.
func Describe(t pb.BaseCommand_Type) Command {
	d := *describe(t)
	d.Type = t
	return d
}

// unmodelled describes every kind streamrun does not model.
var unmodelled Command

func describe(t pb.BaseCommand_Type) *Command {
	if t >= 0 && int(t) < len(commands) && commands[t].modelled {
		return &commands[t]
	}
	return &unmodelled
}

// Wrap puts one command into its BaseCommand envelope. It panics on a
// message that is not a command, which is a programming error.
func Wrap(m proto.Message) *pb.BaseCommand {
	c, ok := wrap(m)
	if !ok {
		panic(fmt.Sprintf("pulsarwire.Wrap: %T is not a command", m))
	}
	return c
}

// Body returns the command inside the envelope that its type names, or
// nil when that field is missing (a malformed frame) or the type is one
// this package leaves out.
func Body(c *pb.BaseCommand) proto.Message {
	return bodyOf(c)
}

// RequestID returns the request id c carries: set in its body, or, for a
// kind this package does not model, field 1 of its body (where every such
// command keeps its request id), read from the unknown fields. False when
// it carries none.
func RequestID(c *pb.BaseCommand) (uint64, bool) {
	d := describe(c.GetType())
	if !d.modelled {
		return unknownRequestID(c)
	}
	if d.requestID == nil {
		return 0, false
	}
	return d.requestID(c)
}

// SetRequestID puts id into the request inside c; false when c is not a
// request that carries one.
func SetRequestID(c *pb.BaseCommand, id uint64) bool {
	d := describe(c.GetType())
	return d.setRequestID != nil && d.setRequestID(c, id)
}

// ConsumerID and ProducerID return the consumer or producer id c's body
// carries; false when it carries none.
func ConsumerID(c *pb.BaseCommand) (uint64, bool) {
	if d := describe(c.GetType()); d.consumerID != nil {
		return d.consumerID(c)
	}
	return 0, false
}

func ProducerID(c *pb.BaseCommand) (uint64, bool) {
	if d := describe(c.GetType()); d.producerID != nil {
		return d.producerID(c)
	}
	return 0, false
}

// TopicOf returns the topic named in c's body, as written there (not made a
// full name); false when it names none.
func TopicOf(c *pb.BaseCommand) (string, bool) {
	if d := describe(c.GetType()); d.topic != nil {
		return d.topic(c)
	}
	return "", false
}

// Refusal returns the body of the answer that refuses request c with code
// and msg, in the shape the client waits for (c's Failure kind, with the
// ids it refers to): nil when c cannot be refused, or does not carry the
// request id its refusal needs (an ACK without one). For a kind this
// package does not model, it is an ERROR when c carries a request id.
func Refusal(c *pb.BaseCommand, code pb.ServerError, msg string) proto.Message {
	d := describe(c.GetType())
	if d.refusal != nil {
		return d.refusal(c, code, msg)
	}
	if !d.modelled {
		if rid, ok := unknownRequestID(c); ok {
			return &pb.CommandError{RequestId: proto.Uint64(rid), Error: code.Enum(), Message: proto.String(msg)}
		}
	}
	return nil
}

// Refused returns the server's refusal an answer carries, as a
// *ServerError, or nil: an ERROR, or an answer whose error field is set
// or whose response is Failed.
func Refused(c *pb.BaseCommand) error {
	if d := describe(c.GetType()); d.refused != nil {
		return d.refused(c)
	}
	return nil
}

// unknownRequestID digs field 1 (a varint) out of the unknown field whose
// number is the command's type, where the unmodelled commands live.
func unknownRequestID(cmd *pb.BaseCommand) (uint64, bool) {
	raw := cmd.ProtoReflect().GetUnknown()
	want := protowire.Number(cmd.GetType())
	for len(raw) > 0 {
		num, typ, l := protowire.ConsumeTag(raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
		if num == want && typ == protowire.BytesType {
			body, l := protowire.ConsumeBytes(raw)
			if l < 0 {
				return 0, false
			}
			for len(body) > 0 {
				n, t, l := protowire.ConsumeTag(body)
				if l < 0 {
					return 0, false
				}
				body = body[l:]
				if n == 1 && t == protowire.VarintType {
					v, l := protowire.ConsumeVarint(body)
					return v, l >= 0
				}
				l = protowire.ConsumeFieldValue(n, t, body)
				if l < 0 {
					return 0, false
				}
				body = body[l:]
			}
			return 0, false
		}
		l = protowire.ConsumeFieldValue(num, typ, raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
	}
	return 0, false
}
