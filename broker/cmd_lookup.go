package broker

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// handleLookup answers where a topic is served: Connect when this broker
// owns it, else Redirect to the owner, authoritative either way (the owner
// is a pure function of the name, so one hop always suffices).
func (cn *conn) handleLookup(m *pb.CommandLookupTopic) {
	rid := m.GetRequestId()
	t, err := pulsarwire.ParseTopic(m.GetTopic())
	if err != nil {
		cn.lookupFailed(rid, pb.ServerError_InvalidTopicName, err.Error())
		return
	}
	if code, reason, ok := cn.authorizeLookup(t); !ok {
		cn.lookupFailed(rid, code, reason)
		return
	}
	owner := cn.c.OwnerOf(t.String())
	s := cn.c.broker(owner)
	resp := &pb.CommandLookupTopicResponse{
		RequestId:        proto.Uint64(rid),
		BrokerServiceUrl: proto.String(s.url()),
		Authoritative:    proto.Bool(true),
		Response:         pb.CommandLookupTopicResponse_Connect.Enum(),
	}
	if u := s.tlsURL(); u != "" {
		resp.BrokerServiceUrlTls = proto.String(u)
	}
	if owner != cn.srv.index {
		resp.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
	}
	cn.send(resp)
}

// handlePartitionedMetadata answers a topic's partition count: its count
// when partitioned, 0 for a non-partitioned topic or one that would be
// created on first use (standalone's allowAutoTopicCreationType).
func (cn *conn) handlePartitionedMetadata(m *pb.CommandPartitionedTopicMetadata) {
	rid := m.GetRequestId()
	t, err := pulsarwire.ParseTopic(m.GetTopic())
	if err != nil {
		cn.metadataFailed(rid, pb.ServerError_InvalidTopicName, err.Error())
		return
	}
	if code, reason, ok := cn.authorizeLookup(t); !ok {
		cn.metadataFailed(rid, code, reason)
		return
	}
	n := 0
	if t.String() == pulsarwire.TxnCoordinatorTopic {
		// The coordinators: one with transactions on, as Apache Pulsar
		// standalone makes it; none (transactions off) else.
		if cn.c.txns != nil {
			n = 1
		}
	} else if i, _ := t.PartitionIndex(); i < 0 {
		if p, ok := cn.c.partitions(t.String()); ok {
			n = p
		} else if cn.c.opts.DisableTopicAutoCreation && !cn.c.topicExists(t) {
			cn.metadataFailed(rid, pb.ServerError_TopicNotFound, "Topic "+t.String()+" does not exist")
			return
		}
	}
	cn.send(&pb.CommandPartitionedTopicMetadataResponse{
		RequestId:  proto.Uint64(rid),
		Partitions: proto.Uint32(uint32(n)),
		Response:   pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
	})
}

// handleTopicsOfNamespace lists a namespace's topics. The pattern is left
// to the client (filtered=false): Java regular expressions are not Go's.
func (cn *conn) handleTopicsOfNamespace(m *pb.CommandGetTopicsOfNamespace) {
	// Listing a namespace's topics is a consumer's operation (pattern
	// subscriptions), as in Apache Pulsar.
	if !cn.c.allowedIn(cn.principal, m.GetNamespace(), actionConsume) {
		cn.sendError(m.GetRequestId(), pb.ServerError_AuthorizationError,
			fmt.Sprintf("Client with role %q is not authorized to list the topics of %s", cn.principal, m.GetNamespace()))
		return
	}
	var topics []string
	if m.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		topics = cn.c.listTopics(m.GetNamespace())
	}
	cn.send(&pb.CommandGetTopicsOfNamespaceResponse{
		RequestId: proto.Uint64(m.GetRequestId()),
		Topics:    topics,
		Filtered:  proto.Bool(false),
		Changed:   proto.Bool(true),
	})
}
