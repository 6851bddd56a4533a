package broker

import (
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Refusals: a command answered with a server error in its own reply
// shape (LOOKUP_RESPONSE, SEND_ERROR, ACK_RESPONSE, ...) or an ERROR.

// answerError answers a command with a server error in the shape the
// client waits for (pulsarwire.Refusal); a refused CONNECT ends the
// connection.
func (cn *conn) answerError(cmd *pb.BaseCommand, code pb.ServerError, msg string) {
	if cmd.GetType() == pb.BaseCommand_CONNECT {
		cn.sendError(noRequest, code, msg)
		cn.finish()
		return
	}
	if r := pulsarwire.Refusal(cmd, code, msg); r != nil {
		cn.send(r)
	}
}

// The failure replies of commands whose answer is not CommandError: the
// client waits for its own response type, with the error inside.

func (cn *conn) lookupFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandLookupTopicResponse{
		RequestId: proto.Uint64(rid),
		Response:  pb.CommandLookupTopicResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	})
}

func (cn *conn) metadataFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandPartitionedTopicMetadataResponse{
		RequestId: proto.Uint64(rid),
		Response:  pb.CommandPartitionedTopicMetadataResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	})
}

func (cn *conn) sendFailed(s *pb.CommandSend, code pb.ServerError, msg string) {
	cn.sendAfterReceipts(&pb.CommandSendError{
		ProducerId: proto.Uint64(s.GetProducerId()),
		SequenceId: proto.Uint64(s.GetSequenceId()),
		Error:      code.Enum(),
		Message:    proto.String(msg),
	})
}

func (cn *conn) getSchemaFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandGetSchemaResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

func (cn *conn) getOrCreateSchemaFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

func (cn *conn) consumerStatsFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandConsumerStatsResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

// ackReply answers an ACK that carries a request id (nothing otherwise):
// success when code is nil.
func (cn *conn) ackReply(a *pb.CommandAck, code *pb.ServerError, msg string) {
	if a.RequestId == nil {
		return
	}
	r := &pb.CommandAckResponse{ConsumerId: proto.Uint64(a.GetConsumerId()), RequestId: proto.Uint64(a.GetRequestId())}
	if code != nil {
		r.Error, r.Message = code, proto.String(msg)
	}
	cn.send(r)
}

func (cn *conn) sendError(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandError{RequestId: proto.Uint64(rid), Error: code.Enum(), Message: proto.String(msg)})
}
