package pulsarwire

import (
	"errors"
	"fmt"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Errors of the wire itself: what a decoder returns for input it cannot
// accept. Each is wrapped with where it was found, so match with errors.Is.
var (
	// ErrTruncated: the input ends before the sizes it declares.
	ErrTruncated = errors.New("pulsarwire: truncated frame")
	// ErrFrameTooLarge: a frame declares more than the negotiated maximum.
	ErrFrameTooLarge = errors.New("pulsarwire: frame too large")
	// ErrChecksum: the CRC32C of metadata and payload does not match.
	ErrChecksum = errors.New("pulsarwire: checksum mismatch")
	// ErrCorrupt: sizes or protobuf content that cannot be right.
	ErrCorrupt = errors.New("pulsarwire: corrupt frame")
	// ErrUnsupported: a valid frame of a kind this side does not implement.
	ErrUnsupported = errors.New("pulsarwire: unsupported")
	// ErrConnectionClosed: the connection went away while an operation
	// waited on it. Retryable: the operation can run on a new connection.
	ErrConnectionClosed = errors.New("pulsarwire: connection closed")
	// ErrTimeout: the peer did not answer in time. Retryable.
	ErrTimeout = errors.New("pulsarwire: timed out")
	// ErrHTTP: the peer answered in HTTP, so the address is a web or admin
	// port, not a Pulsar service port. Final: it will not change.
	ErrHTTP = errors.New("this looks like HTTP; the admin API is not the service URL")
)

// ServerError is an error the broker answered with, keeping its code.
//
// It matches, with errors.Is, the sentinel of the same code (for example
// ErrServiceNotReady) and any other ServerError with the same code.
type ServerError struct {
	Code    pb.ServerError
	Message string
}

func (e *ServerError) Error() string {
	if e.Message == "" {
		return "server error " + e.Code.String()
	}
	return fmt.Sprintf("server error %s: %s", e.Code, e.Message)
}

// Is reports whether target is a ServerError with the same code.
func (e *ServerError) Is(target error) bool {
	t, ok := target.(*ServerError)
	return ok && t.Code == e.Code
}

// Retryable reports whether the server meant "not now" (see Retryable).
func (e *ServerError) Retryable() bool { return retryableCodes[e.Code] }

// Sentinels for the server codes streamrun acts upon. Compare with
// errors.Is; their Message is empty.
var (
	ErrUnknownError          = &ServerError{Code: pb.ServerError_UnknownError}
	ErrMetadataError         = &ServerError{Code: pb.ServerError_MetadataError}
	ErrPersistenceError      = &ServerError{Code: pb.ServerError_PersistenceError}
	ErrAuthenticationError   = &ServerError{Code: pb.ServerError_AuthenticationError}
	ErrAuthorizationError    = &ServerError{Code: pb.ServerError_AuthorizationError}
	ErrConsumerBusy          = &ServerError{Code: pb.ServerError_ConsumerBusy}
	ErrServiceNotReady       = &ServerError{Code: pb.ServerError_ServiceNotReady}
	ErrChecksumError         = &ServerError{Code: pb.ServerError_ChecksumError}
	ErrUnsupportedVersion    = &ServerError{Code: pb.ServerError_UnsupportedVersionError}
	ErrTopicNotFound         = &ServerError{Code: pb.ServerError_TopicNotFound}
	ErrSubscriptionNotFound  = &ServerError{Code: pb.ServerError_SubscriptionNotFound}
	ErrConsumerNotFound      = &ServerError{Code: pb.ServerError_ConsumerNotFound}
	ErrTooManyRequests       = &ServerError{Code: pb.ServerError_TooManyRequests}
	ErrTopicTerminated       = &ServerError{Code: pb.ServerError_TopicTerminatedError}
	ErrProducerBusy          = &ServerError{Code: pb.ServerError_ProducerBusy}
	ErrInvalidTopicName      = &ServerError{Code: pb.ServerError_InvalidTopicName}
	ErrIncompatibleSchema    = &ServerError{Code: pb.ServerError_IncompatibleSchema}
	ErrNotAllowed            = &ServerError{Code: pb.ServerError_NotAllowedError}
	ErrProducerFenced        = &ServerError{Code: pb.ServerError_ProducerFenced}
	ErrProducerBlockedQuota  = &ServerError{Code: pb.ServerError_ProducerBlockedQuotaExceededError}
	ErrProducerQuotaExceeded = &ServerError{Code: pb.ServerError_ProducerBlockedQuotaExceededException}

	// Transactions: no coordinator serves the id, the transaction is not
	// in the state the request needs (ended, timed out), another
	// transaction holds the message acknowledged, no such transaction.
	ErrTransactionCoordinatorNotFound = &ServerError{Code: pb.ServerError_TransactionCoordinatorNotFound}
	ErrInvalidTxnStatus               = &ServerError{Code: pb.ServerError_InvalidTxnStatus}
	ErrTransactionConflict            = &ServerError{Code: pb.ServerError_TransactionConflict}
	ErrTransactionNotFound            = &ServerError{Code: pb.ServerError_TransactionNotFound}
)

// retryableCodes are the answers that mean "not now": the same request can
// succeed later (after a broker restart, a load shift, a consumer leaving).
// Everything else is final: retrying would get the same answer.
var retryableCodes = map[pb.ServerError]bool{
	pb.ServerError_ServiceNotReady:  true,
	pb.ServerError_TooManyRequests:  true,
	pb.ServerError_ConsumerBusy:     true,
	pb.ServerError_ProducerBusy:     true,
	pb.ServerError_MetadataError:    true,
	pb.ServerError_PersistenceError: true,
	pb.ServerError_UnknownError:     true,
	// The coordinator of a transaction is loading or moving (its
	// partition of the coordinators' topic changes owner).
	pb.ServerError_TransactionCoordinatorNotFound: true,
}

// NewServerError returns the error for a code and message from the broker.
func NewServerError(code pb.ServerError, msg string) *ServerError {
	return &ServerError{Code: code, Message: msg}
}

// Retryable reports whether err means "not now": a retryable server code,
// a timeout or a dropped connection. Final errors (authentication,
// authorization, bad topic names, unknown topics where creation is off,
// schema conflicts, ...) and anything unrecognised are not retryable.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var se *ServerError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrConnectionClosed)
}

// ServerCode returns the server's code carried by err, if any.
func ServerCode(err error) (pb.ServerError, bool) {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code, true
	}
	return 0, false
}
