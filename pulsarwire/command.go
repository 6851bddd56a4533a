package pulsarwire

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// ProtocolVersion is the protocol version streamrun speaks: v20 added
// topic migration, the newest change a client needs to know of. A peer
// answers with the lower of the two.
const ProtocolVersion = 20

// Wrap puts one command into its BaseCommand envelope. It panics on a
// message that is not a command, which is a programming error.
func Wrap(m proto.Message) *pb.BaseCommand {
	c := &pb.BaseCommand{}
	set := func(t pb.BaseCommand_Type) { c.Type = t.Enum() }
	switch v := m.(type) {
	case *pb.CommandConnect:
		set(pb.BaseCommand_CONNECT)
		c.Connect = v
	case *pb.CommandConnected:
		set(pb.BaseCommand_CONNECTED)
		c.Connected = v
	case *pb.CommandSubscribe:
		set(pb.BaseCommand_SUBSCRIBE)
		c.Subscribe = v
	case *pb.CommandProducer:
		set(pb.BaseCommand_PRODUCER)
		c.Producer = v
	case *pb.CommandSend:
		set(pb.BaseCommand_SEND)
		c.Send = v
	case *pb.CommandSendReceipt:
		set(pb.BaseCommand_SEND_RECEIPT)
		c.SendReceipt = v
	case *pb.CommandSendError:
		set(pb.BaseCommand_SEND_ERROR)
		c.SendError = v
	case *pb.CommandMessage:
		set(pb.BaseCommand_MESSAGE)
		c.Message = v
	case *pb.CommandAck:
		set(pb.BaseCommand_ACK)
		c.Ack = v
	case *pb.CommandFlow:
		set(pb.BaseCommand_FLOW)
		c.Flow = v
	case *pb.CommandUnsubscribe:
		set(pb.BaseCommand_UNSUBSCRIBE)
		c.Unsubscribe = v
	case *pb.CommandSuccess:
		set(pb.BaseCommand_SUCCESS)
		c.Success = v
	case *pb.CommandError:
		set(pb.BaseCommand_ERROR)
		c.Error = v
	case *pb.CommandCloseProducer:
		set(pb.BaseCommand_CLOSE_PRODUCER)
		c.CloseProducer = v
	case *pb.CommandCloseConsumer:
		set(pb.BaseCommand_CLOSE_CONSUMER)
		c.CloseConsumer = v
	case *pb.CommandProducerSuccess:
		set(pb.BaseCommand_PRODUCER_SUCCESS)
		c.ProducerSuccess = v
	case *pb.CommandPing:
		set(pb.BaseCommand_PING)
		c.Ping = v
	case *pb.CommandPong:
		set(pb.BaseCommand_PONG)
		c.Pong = v
	case *pb.CommandRedeliverUnacknowledgedMessages:
		set(pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES)
		c.RedeliverUnacknowledgedMessages = v
	case *pb.CommandPartitionedTopicMetadata:
		set(pb.BaseCommand_PARTITIONED_METADATA)
		c.PartitionMetadata = v
	case *pb.CommandPartitionedTopicMetadataResponse:
		set(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE)
		c.PartitionMetadataResponse = v
	case *pb.CommandLookupTopic:
		set(pb.BaseCommand_LOOKUP)
		c.LookupTopic = v
	case *pb.CommandLookupTopicResponse:
		set(pb.BaseCommand_LOOKUP_RESPONSE)
		c.LookupTopicResponse = v
	case *pb.CommandConsumerStats:
		set(pb.BaseCommand_CONSUMER_STATS)
		c.ConsumerStats = v
	case *pb.CommandConsumerStatsResponse:
		set(pb.BaseCommand_CONSUMER_STATS_RESPONSE)
		c.ConsumerStatsResponse = v
	case *pb.CommandReachedEndOfTopic:
		set(pb.BaseCommand_REACHED_END_OF_TOPIC)
		c.ReachedEndOfTopic = v
	case *pb.CommandSeek:
		set(pb.BaseCommand_SEEK)
		c.Seek = v
	case *pb.CommandGetLastMessageId:
		set(pb.BaseCommand_GET_LAST_MESSAGE_ID)
		c.GetLastMessageId = v
	case *pb.CommandGetLastMessageIdResponse:
		set(pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE)
		c.GetLastMessageIdResponse = v
	case *pb.CommandActiveConsumerChange:
		set(pb.BaseCommand_ACTIVE_CONSUMER_CHANGE)
		c.ActiveConsumerChange = v
	case *pb.CommandGetTopicsOfNamespace:
		set(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE)
		c.GetTopicsOfNamespace = v
	case *pb.CommandGetTopicsOfNamespaceResponse:
		set(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE)
		c.GetTopicsOfNamespaceResponse = v
	case *pb.CommandGetSchema:
		set(pb.BaseCommand_GET_SCHEMA)
		c.GetSchema = v
	case *pb.CommandGetSchemaResponse:
		set(pb.BaseCommand_GET_SCHEMA_RESPONSE)
		c.GetSchemaResponse = v
	case *pb.CommandAuthChallenge:
		set(pb.BaseCommand_AUTH_CHALLENGE)
		c.AuthChallenge = v
	case *pb.CommandAuthResponse:
		set(pb.BaseCommand_AUTH_RESPONSE)
		c.AuthResponse = v
	case *pb.CommandAckResponse:
		set(pb.BaseCommand_ACK_RESPONSE)
		c.AckResponse = v
	case *pb.CommandGetOrCreateSchema:
		set(pb.BaseCommand_GET_OR_CREATE_SCHEMA)
		c.GetOrCreateSchema = v
	case *pb.CommandGetOrCreateSchemaResponse:
		set(pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE)
		c.GetOrCreateSchemaResponse = v
	default:
		panic(fmt.Sprintf("pulsarwire.Wrap: %T is not a command", m))
	}
	return c
}

// Body returns the command inside the envelope that its type names, or
// nil when that field is missing (a malformed frame) or the type is one
// this package leaves out.
func Body(c *pb.BaseCommand) proto.Message {
	var m proto.Message
	switch c.GetType() {
	case pb.BaseCommand_CONNECT:
		m = c.Connect
	case pb.BaseCommand_CONNECTED:
		m = c.Connected
	case pb.BaseCommand_SUBSCRIBE:
		m = c.Subscribe
	case pb.BaseCommand_PRODUCER:
		m = c.Producer
	case pb.BaseCommand_SEND:
		m = c.Send
	case pb.BaseCommand_SEND_RECEIPT:
		m = c.SendReceipt
	case pb.BaseCommand_SEND_ERROR:
		m = c.SendError
	case pb.BaseCommand_MESSAGE:
		m = c.Message
	case pb.BaseCommand_ACK:
		m = c.Ack
	case pb.BaseCommand_FLOW:
		m = c.Flow
	case pb.BaseCommand_UNSUBSCRIBE:
		m = c.Unsubscribe
	case pb.BaseCommand_SUCCESS:
		m = c.Success
	case pb.BaseCommand_ERROR:
		m = c.Error
	case pb.BaseCommand_CLOSE_PRODUCER:
		m = c.CloseProducer
	case pb.BaseCommand_CLOSE_CONSUMER:
		m = c.CloseConsumer
	case pb.BaseCommand_PRODUCER_SUCCESS:
		m = c.ProducerSuccess
	case pb.BaseCommand_PING:
		m = c.Ping
	case pb.BaseCommand_PONG:
		m = c.Pong
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		m = c.RedeliverUnacknowledgedMessages
	case pb.BaseCommand_PARTITIONED_METADATA:
		m = c.PartitionMetadata
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		m = c.PartitionMetadataResponse
	case pb.BaseCommand_LOOKUP:
		m = c.LookupTopic
	case pb.BaseCommand_LOOKUP_RESPONSE:
		m = c.LookupTopicResponse
	case pb.BaseCommand_CONSUMER_STATS:
		m = c.ConsumerStats
	case pb.BaseCommand_CONSUMER_STATS_RESPONSE:
		m = c.ConsumerStatsResponse
	case pb.BaseCommand_REACHED_END_OF_TOPIC:
		m = c.ReachedEndOfTopic
	case pb.BaseCommand_SEEK:
		m = c.Seek
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		m = c.GetLastMessageId
	case pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE:
		m = c.GetLastMessageIdResponse
	case pb.BaseCommand_ACTIVE_CONSUMER_CHANGE:
		m = c.ActiveConsumerChange
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		m = c.GetTopicsOfNamespace
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		m = c.GetTopicsOfNamespaceResponse
	case pb.BaseCommand_GET_SCHEMA:
		m = c.GetSchema
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		m = c.GetSchemaResponse
	case pb.BaseCommand_AUTH_CHALLENGE:
		m = c.AuthChallenge
	case pb.BaseCommand_AUTH_RESPONSE:
		m = c.AuthResponse
	case pb.BaseCommand_ACK_RESPONSE:
		m = c.AckResponse
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		m = c.GetOrCreateSchema
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE:
		m = c.GetOrCreateSchemaResponse
	}
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	return m
}
