package broker

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The transaction commands: a client's session with the coordinator
// (TC_CLIENT_CONNECT_REQUEST), NEW_TXN, ADD_PARTITION_TO_TXN,
// ADD_SUBSCRIPTION_TO_TXN and END_TXN, served by the coordinator
// (txn_coordinator.go) at the broker that owns it; a transactional SEND
// and ACK are cmd_produce.go's and cmd_ack.go's. With transactions off
// (Apache Pulsar's default, transactionCoordinatorEnabled=false) every
// coordinator command is refused with an ERROR, and a transactional SEND
// or ACK in its own reply, in Apache Pulsar's words.

// Apache Pulsar 4.0.8's refusals with transactions off.
const (
	txnOffMessage     = "Transactions are not enabled."
	txnOffSendMessage = "Transaction buffer disable!"
	txnOffAckMessage  = "org.apache.pulsar.broker.service.BrokerServiceException$NotAllowedException: Server don't support transaction ack!"
)

// inTxn reports whether a SEND or ACK names a transaction. Apache Pulsar
// goes by the fields' presence: (0,0) is a transaction id like any other.
func inTxn(most, least *uint64) bool { return most != nil && least != nil }

// txnsOff refuses a coordinator command when transactions are off; true
// when it did.
func (cn *conn) txnsOff(rid uint64) bool {
	if cn.c.txns != nil {
		return false
	}
	cn.log.Info("transaction command refused: transactions are off", "request_id", rid)
	cn.sendError(rid, pb.ServerError_NotAllowedError, txnOffMessage)
	return true
}

// servesCoordinator reports whether this broker serves coordinator tc:
// it is the one there is, and this broker owns its partition's name.
func (cn *conn) servesCoordinator(tc uint64) bool {
	return tc == txnCoordinatorID && cn.c.OwnerOf(txnCoordinatorPartition(tc)) == cn.srv.index
}

func txnCoordinatorPartition(tc uint64) string {
	return pulsarwire.TxnCoordinatorTopic + pulsarwire.PartitionSuffix + strconv.FormatUint(tc, 10)
}

func (cn *conn) handleTcClientConnect(m *pb.CommandTcClientConnectRequest) {
	rid := m.GetRequestId()
	if cn.txnsOff(rid) {
		return
	}
	resp := &pb.CommandTcClientConnectResponse{RequestId: proto.Uint64(rid)}
	if tc := m.GetTcId(); !cn.servesCoordinator(tc) {
		// Apache Pulsar: the coordinator's partition is not served here,
		// look it up again.
		resp.Error = pb.ServerError_ServiceNotReady.Enum()
		resp.Message = proto.String(fmt.Sprintf("Transaction coordinator %d (%s) is not served by this broker: "+
			"there is one coordinator, 0, served by the owner of its partition. Please redo the lookup.", tc, txnCoordinatorPartition(tc)))
	}
	cn.send(resp)
}

func (cn *conn) handleNewTxn(m *pb.CommandNewTxn) {
	rid := m.GetRequestId()
	if cn.txnsOff(rid) {
		return
	}
	tc := m.GetTcId()
	if !cn.servesCoordinator(tc) {
		cn.send(&pb.CommandNewTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(tc),
			Error: pb.ServerError_TransactionCoordinatorNotFound.Enum(), Message: proto.String(txnCoordinatorNotFoundMessage(tc))})
		return
	}
	id, err := cn.c.txns.begin(cn.principal, m.GetTxnTtlSeconds())
	if err != nil {
		cn.log.Error("beginning a transaction failed", "err", err)
		cn.send(&pb.CommandNewTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(tc),
			Error: pb.ServerError_UnknownError.Enum(), Message: proto.String(err.Error())})
		return
	}
	cn.send(&pb.CommandNewTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(id.Most), TxnidLeastBits: proto.Uint64(id.Least)})
}

// txnRequest is what the coordinator's requests on a transaction share.
type txnRequest interface {
	proto.Message
	GetRequestId() uint64
	GetTxnidMostBits() uint64
	GetTxnidLeastBits() uint64
}

// serveTxn runs a request on an existing transaction: refused when
// transactions are off or another broker serves its coordinator, else
// done by do, whose error (an *errTxn keeps its code) is the refusal. The
// answer is the request's own response kind, naming the transaction.
func serveTxn[M txnRequest](do func(cn *conn, m M, id pulsarwire.TxnID) error) func(*conn, M) {
	return func(cn *conn, m M) {
		if cn.txnsOff(m.GetRequestId()) {
			return
		}
		id := pulsarwire.TxnID{Most: m.GetTxnidMostBits(), Least: m.GetTxnidLeastBits()}
		cmd := pulsarwire.Wrap(m)
		if !cn.servesCoordinator(id.Most) {
			cn.send(pulsarwire.Refusal(cmd, pb.ServerError_TransactionCoordinatorNotFound, txnCoordinatorNotFoundMessage(id.Most)))
			return
		}
		if err := do(cn, m, id); err != nil {
			code, msg, _ := txnRefusal(err)
			cn.log.Debug("transaction request refused", "command", cmd.GetType().String(), "txn", id, "code", code.String(), "reason", msg)
			cn.send(pulsarwire.Refusal(cmd, code, msg))
			return
		}
		cn.send(txnAnswer(cmd, id))
	}
}

// txnAnswer is a request's success answer, naming the transaction.
func txnAnswer(cmd *pb.BaseCommand, id pulsarwire.TxnID) proto.Message {
	rid, _ := pulsarwire.RequestID(cmd)
	most, least := proto.Uint64(id.Most), proto.Uint64(id.Least)
	switch cmd.GetType() {
	case pb.BaseCommand_ADD_PARTITION_TO_TXN:
		return &pb.CommandAddPartitionToTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: most, TxnidLeastBits: least}
	case pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		return &pb.CommandAddSubscriptionToTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: most, TxnidLeastBits: least}
	default:
		return &pb.CommandEndTxnResponse{RequestId: proto.Uint64(rid), TxnidMostBits: most, TxnidLeastBits: least}
	}
}

var (
	handleAddPartitionToTxn = serveTxn(func(cn *conn, m *pb.CommandAddPartitionToTxn, id pulsarwire.TxnID) error {
		topics := make([]string, 0, len(m.GetPartitions()))
		for _, p := range m.GetPartitions() {
			t, err := pulsarwire.ParseTopic(p)
			if err != nil {
				return &errTxn{pb.ServerError_InvalidTopicName, err.Error()}
			}
			topics = append(topics, t.String())
		}
		return cn.c.txns.addTopics(id, cn.principal, topics)
	})
	handleAddSubscriptionToTxn = serveTxn(func(cn *conn, m *pb.CommandAddSubscriptionToTxn, id pulsarwire.TxnID) error {
		subs := make([]*pb.Subscription, 0, len(m.GetSubscription()))
		for _, s := range m.GetSubscription() {
			t, err := pulsarwire.ParseTopic(s.GetTopic())
			if err != nil {
				return &errTxn{pb.ServerError_InvalidTopicName, err.Error()}
			}
			subs = append(subs, &pb.Subscription{Topic: proto.String(t.String()), Subscription: proto.String(s.GetSubscription())})
		}
		return cn.c.txns.addSubs(id, cn.principal, subs)
	})
	handleEndTxn = serveTxn(func(cn *conn, m *pb.CommandEndTxn, id pulsarwire.TxnID) error {
		if m.TxnAction == nil {
			return &errTxn{pb.ServerError_UnknownError, "END_TXN without txn_action (COMMIT or ABORT)"}
		}
		return cn.c.txns.end(id, cn.principal, m.GetTxnAction())
	})
)

// sendInTxn stores a transactional SEND's entry: refused unless the
// coordinator has its transaction open, with the transaction's id
// written into the entry's metadata when the client left it out.
func (cn *conn) sendInTxn(p *producer, f pulsarwire.Frame, s *pb.CommandSend) (uint64, *errTxn, error) {
	id := pulsarwire.TxnID{Most: s.GetTxnidMostBits(), Least: s.GetTxnidLeastBits()}
	entry, err := withTxnID(f.Entry, f.Metadata, f.Payload, id)
	if err != nil {
		return 0, &errTxn{pb.ServerError_UnknownError, err.Error()}, nil
	}
	n, err := p.topic.publishIn(&id, entry, int64(f.Metadata.GetPublishTime()), s.GetNumMessages())
	if e, ok := err.(*errTxn); ok {
		return 0, e, nil
	}
	return n, nil, err
}
