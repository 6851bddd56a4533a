package pool

import (
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// setRequestID puts id into the request inside cmd; false when that kind
// of command carries none.
func setRequestID(cmd *pb.BaseCommand, id uint64) bool {
	if pulsarwire.Body(cmd) == nil {
		return false
	}
	p := proto.Uint64(id)
	switch cmd.GetType() {
	case pb.BaseCommand_PRODUCER:
		cmd.Producer.RequestId = p
	case pb.BaseCommand_SUBSCRIBE:
		cmd.Subscribe.RequestId = p
	case pb.BaseCommand_UNSUBSCRIBE:
		cmd.Unsubscribe.RequestId = p
	case pb.BaseCommand_LOOKUP:
		cmd.LookupTopic.RequestId = p
	case pb.BaseCommand_PARTITIONED_METADATA:
		cmd.PartitionMetadata.RequestId = p
	case pb.BaseCommand_CLOSE_PRODUCER:
		cmd.CloseProducer.RequestId = p
	case pb.BaseCommand_CLOSE_CONSUMER:
		cmd.CloseConsumer.RequestId = p
	case pb.BaseCommand_SEEK:
		cmd.Seek.RequestId = p
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		cmd.GetLastMessageId.RequestId = p
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		cmd.GetTopicsOfNamespace.RequestId = p
	case pb.BaseCommand_GET_SCHEMA:
		cmd.GetSchema.RequestId = p
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		cmd.GetOrCreateSchema.RequestId = p
	case pb.BaseCommand_CONSUMER_STATS:
		cmd.ConsumerStats.RequestId = p
	case pb.BaseCommand_ACK:
		cmd.Ack.RequestId = p
	default:
		return false
	}
	return true
}

// responseRequestID is the request id an answer refers to. (dispatch
// handles ACK_RESPONSE itself.)
func responseRequestID(cmd *pb.BaseCommand) (uint64, bool) {
	switch cmd.GetType() {
	case pb.BaseCommand_SUCCESS:
		return cmd.GetSuccess().GetRequestId(), cmd.Success != nil
	case pb.BaseCommand_ERROR:
		return cmd.GetError().GetRequestId(), cmd.Error != nil
	case pb.BaseCommand_PRODUCER_SUCCESS:
		return cmd.GetProducerSuccess().GetRequestId(), cmd.ProducerSuccess != nil
	case pb.BaseCommand_LOOKUP_RESPONSE:
		return cmd.GetLookupTopicResponse().GetRequestId(), cmd.LookupTopicResponse != nil
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		return cmd.GetPartitionMetadataResponse().GetRequestId(), cmd.PartitionMetadataResponse != nil
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		return cmd.GetGetTopicsOfNamespaceResponse().GetRequestId(), cmd.GetTopicsOfNamespaceResponse != nil
	case pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE:
		return cmd.GetGetLastMessageIdResponse().GetRequestId(), cmd.GetLastMessageIdResponse != nil
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		return cmd.GetGetSchemaResponse().GetRequestId(), cmd.GetSchemaResponse != nil
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE:
		return cmd.GetGetOrCreateSchemaResponse().GetRequestId(), cmd.GetOrCreateSchemaResponse != nil
	case pb.BaseCommand_CONSUMER_STATS_RESPONSE:
		return cmd.GetConsumerStatsResponse().GetRequestId(), cmd.ConsumerStatsResponse != nil
	}
	return 0, false
}

// responseError is the broker's refusal carried by an answer, if any.
func responseError(cmd *pb.BaseCommand) error {
	switch cmd.GetType() {
	case pb.BaseCommand_ERROR:
		e := cmd.GetError()
		return pulsarwire.NewServerError(e.GetError(), e.GetMessage())
	case pb.BaseCommand_LOOKUP_RESPONSE:
		r := cmd.GetLookupTopicResponse()
		if r.GetResponse() == pb.CommandLookupTopicResponse_Failed {
			return pulsarwire.NewServerError(r.GetError(), r.GetMessage())
		}
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		r := cmd.GetPartitionMetadataResponse()
		if r.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed || r.Error != nil {
			return pulsarwire.NewServerError(r.GetError(), r.GetMessage())
		}
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		if r := cmd.GetGetSchemaResponse(); r.ErrorCode != nil {
			return pulsarwire.NewServerError(r.GetErrorCode(), r.GetErrorMessage())
		}
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE:
		if r := cmd.GetGetOrCreateSchemaResponse(); r.ErrorCode != nil {
			return pulsarwire.NewServerError(r.GetErrorCode(), r.GetErrorMessage())
		}
	case pb.BaseCommand_CONSUMER_STATS_RESPONSE:
		if r := cmd.GetConsumerStatsResponse(); r.ErrorCode != nil {
			return pulsarwire.NewServerError(r.GetErrorCode(), r.GetErrorMessage())
		}
	case pb.BaseCommand_ACK_RESPONSE:
		if r := cmd.GetAckResponse(); r.Error != nil {
			return pulsarwire.NewServerError(r.GetError(), r.GetMessage())
		}
	}
	return nil
}
