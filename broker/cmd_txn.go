package broker

import "github.com/streamrun/streamrun/pulsarwire/pb"

// Transactions. With them off (Apache Pulsar's default,
// transactionCoordinatorEnabled=false) every coordinator command is
// refused with an ERROR, and a transactional SEND or ACK in its own
// reply, in Apache Pulsar's words.

// Apache Pulsar 4.0.8's refusals with transactions off.
const (
	txnOffMessage     = "Transactions are not enabled."
	txnOffSendMessage = "Transaction buffer disable!"
	txnOffAckMessage  = "org.apache.pulsar.broker.service.BrokerServiceException$NotAllowedException: Server don't support transaction ack!"
)

// txnCommand refuses a coordinator command: transactions are off.
func txnCommand[M interface{ GetRequestId() uint64 }](cn *conn, m M) {
	cn.log.Info("transaction command refused: transactions are off", "request_id", m.GetRequestId())
	cn.sendError(m.GetRequestId(), pb.ServerError_NotAllowedError, txnOffMessage)
}

// inTxn reports whether a SEND or ACK names a transaction. Apache Pulsar
// goes by the fields' presence: (0,0) is a transaction id like any other.
func inTxn(most, least *uint64) bool { return most != nil && least != nil }
