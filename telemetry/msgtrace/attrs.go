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

	// A pipeline step's name and kind, and what it did with a batch's
	// messages (its streamrun.step event).
	KeyStep             = attribute.Key("streamrun.step")
	KeyStepKind         = attribute.Key("streamrun.step.kind")
	KeyStepIn           = attribute.Key("streamrun.step.in")
	KeyStepOut          = attribute.Key("streamrun.step.out")
	KeyStepFiltered     = attribute.Key("streamrun.step.filtered")
	KeyStepDeadLettered = attribute.Key("streamrun.step.dead_lettered")
	KeyStepErrors       = attribute.Key("streamrun.step.errors")
)

// SystemPulsar is messaging.system for everything streamrun does.
var SystemPulsar = KeySystem.String("pulsar")

// Span event names, for what becomes of a message or a handler.
const (
	EventRetry      = "streamrun.retry"
	EventDeadLetter = "streamrun.dead_letter"
	EventCrash      = "streamrun.handler.crash"
	EventHandedBack = "streamrun.handed_back"
	// EventStep is a pipeline step run over a batch's messages (or their
	// outputs), one event a step.
	EventStep = "streamrun.step"
)
