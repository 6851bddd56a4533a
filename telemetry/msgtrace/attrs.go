package msgtrace

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of the OpenTelemetry messaging conventions, and
// streamrun's own under "streamrun.".
const (
	KeySystem        = attribute.Key("messaging.system")
	KeyOperationName = attribute.Key("messaging.operation.name")
	KeyOperationType = attribute.Key("messaging.operation.type")
	KeyDestination   = attribute.Key("messaging.destination.name")
	KeyConsumerGroup = attribute.Key("messaging.consumer.group.name")
	KeyBatchCount    = attribute.Key("messaging.batch.message_count")
	KeyMessageID     = attribute.Key("messaging.message.id")
	KeyErrorType     = attribute.Key("error.type")

	KeyPipeline = attribute.Key("streamrun.pipeline")
	KeyInstance = attribute.Key("streamrun.handler.instance")
	KeyOutcome  = attribute.Key("streamrun.outcome")
	KeyReason   = attribute.Key("streamrun.reason")
	KeyDelay    = attribute.Key("streamrun.retry.delay_ms")
)

// SystemPulsar is messaging.system for everything streamrun does.
var SystemPulsar = KeySystem.String("pulsar")

// Span event names, for what becomes of a message or a handler.
const (
	EventRetry      = "streamrun.retry"
	EventDeadLetter = "streamrun.dead_letter"
	EventCrash      = "streamrun.handler.crash"
	EventHandedBack = "streamrun.handed_back"
)
