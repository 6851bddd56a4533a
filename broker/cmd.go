package broker

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The commands a client sends: handle runs one, through the table of
// handlers by kind. The handlers live in one file per command family,
// cmd_<family>.go.

// handle runs one command; false ends the connection.
func (cn *conn) handle(f pulsarwire.Frame) bool {
	cmd := f.Cmd
	typ := cmd.GetType()
	if typ != pb.BaseCommand_CONNECT && !cn.connected.Load() {
		cn.log.Warn("closing connection: command before CONNECT", "command", typ.String())
		cn.finish()
		return false
	}
	if ic := cn.c.opts.Intercept; ic != nil {
		if handled, keep := cn.intercept(ic, cmd); handled {
			return keep
		}
	}
	body := pulsarwire.Body(cmd)
	h := handlerOf(typ)
	if body == nil && typ != pb.BaseCommand_PING && typ != pb.BaseCommand_PONG {
		if h != nil {
			cn.log.Warn("closing connection: command without its body", "command", typ.String())
			cn.finish()
			return false
		}
		cn.unsupported(cmd)
		return true
	}
	if h == nil {
		cn.unsupported(cmd)
		return true
	}
	keep := h(cn, f, body)
	if cn.dropAnswer {
		cn.abort("fault: dropped before the answer")
		return false
	}
	return keep
}

// A handler serves one kind of command, given its frame and its body
// (nil for PING and PONG, which may come without one); false ends the
// connection.
type handler func(cn *conn, f pulsarwire.Frame, body proto.Message) bool

// handlers are the commands a client may send that this broker serves,
// by kind. The handlers themselves live in one file per command family.
var handlers = [...]handler{
	pb.BaseCommand_CONNECT: func(cn *conn, _ pulsarwire.Frame, m proto.Message) bool {
		return cn.handleConnect(m.(*pb.CommandConnect))
	},
	pb.BaseCommand_PING: func(cn *conn, _ pulsarwire.Frame, _ proto.Message) bool {
		cn.send(&pb.CommandPong{})
		return true
	},
	pb.BaseCommand_PONG: func(cn *conn, _ pulsarwire.Frame, _ proto.Message) bool {
		select {
		case cn.pong <- struct{}{}:
		default:
		}
		return true
	},
	pb.BaseCommand_SEND: func(cn *conn, f pulsarwire.Frame, _ proto.Message) bool {
		return cn.handleSend(f)
	},
	// We never challenge; a client answering anyway is harmless.
	pb.BaseCommand_AUTH_RESPONSE:                     func(*conn, pulsarwire.Frame, proto.Message) bool { return true },
	pb.BaseCommand_LOOKUP:                            serve((*conn).handleLookup),
	pb.BaseCommand_PARTITIONED_METADATA:              serve((*conn).handlePartitionedMetadata),
	pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:           serve((*conn).handleTopicsOfNamespace),
	pb.BaseCommand_PRODUCER:                          serve((*conn).handleProducer),
	pb.BaseCommand_CLOSE_PRODUCER:                    serve((*conn).handleCloseProducer),
	pb.BaseCommand_SUBSCRIBE:                         serve((*conn).handleSubscribe),
	pb.BaseCommand_FLOW:                              serve((*conn).handleFlow),
	pb.BaseCommand_ACK:                               serve((*conn).handleAck),
	pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES: serve((*conn).handleRedeliver),
	pb.BaseCommand_CLOSE_CONSUMER:                    serve((*conn).handleCloseConsumer),
	pb.BaseCommand_UNSUBSCRIBE:                       serve((*conn).handleUnsubscribe),
	pb.BaseCommand_SEEK:                              serve((*conn).handleSeek),
	pb.BaseCommand_GET_LAST_MESSAGE_ID:               serve((*conn).handleGetLastMessageID),
	pb.BaseCommand_CONSUMER_STATS:                    serve((*conn).handleConsumerStats),
	pb.BaseCommand_GET_SCHEMA:                        serve((*conn).handleGetSchema),
	pb.BaseCommand_GET_OR_CREATE_SCHEMA:              serve((*conn).handleGetOrCreateSchema),
	pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST:         serve((*conn).handleTcClientConnect),
	pb.BaseCommand_NEW_TXN:                           serve((*conn).handleNewTxn),
	pb.BaseCommand_ADD_PARTITION_TO_TXN:              serve(func(cn *conn, m *pb.CommandAddPartitionToTxn) { handleAddPartitionToTxn(cn, m) }),
	pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:           serve(func(cn *conn, m *pb.CommandAddSubscriptionToTxn) { handleAddSubscriptionToTxn(cn, m) }),
	pb.BaseCommand_END_TXN:                           serve(func(cn *conn, m *pb.CommandEndTxn) { handleEndTxn(cn, m) }),
}

// serve makes a handler of a function of the command's body alone.
func serve[M proto.Message](h func(*conn, M)) handler {
	return func(cn *conn, _ pulsarwire.Frame, body proto.Message) bool {
		h(cn, body.(M))
		return true
	}
}

// handlerOf is the handler of kind t, nil when this broker does not serve it.
func handlerOf(t pb.BaseCommand_Type) handler {
	if t < 0 || int(t) >= len(handlers) {
		return nil
	}
	return handlers[t]
}

// unsupported answers a command this broker does not implement
// (topic-list watchers, anything a server sends): with an
// ERROR when it carries a request id, else by closing the connection, as
// the client's state can no longer be trusted.
func (cn *conn) unsupported(cmd *pb.BaseCommand) {
	typ := cmd.GetType()
	msg := fmt.Sprintf("%s is not supported by the streamrun broker", typ)
	if r := pulsarwire.Refusal(cmd, pb.ServerError_NotAllowedError, msg); r != nil {
		rid, _ := pulsarwire.RequestID(cmd)
		cn.log.Warn("unsupported command refused", "command", typ.String(), "request_id", rid)
		cn.send(r)
		return
	}
	cn.log.Warn("closing connection: unsupported command without a request id to answer", "command", typ.String())
	cn.finish()
}

// topicOf names the topic a command is about, for fault matching: the
// one it names, else its producer's or consumer's.
func (cn *conn) topicOf(cmd *pb.BaseCommand) string {
	if name, ok := pulsarwire.TopicOf(cmd); ok {
		return fullName(name)
	}
	if id, ok := pulsarwire.ProducerID(cmd); ok {
		if p := cn.producer(id); p != nil {
			return p.topic.name
		}
		return ""
	}
	if id, ok := pulsarwire.ConsumerID(cmd); ok {
		if c := cn.consumer(id); c != nil {
			return c.sub.t.name
		}
	}
	return ""
}
