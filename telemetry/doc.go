// Package telemetry configures OpenTelemetry tracing for streamrun's
// programs: from the standard OTEL_* environment variables, over the
// defaults a pipeline file's telemetry section gives, into an SDK tracer
// provider that exports by OTLP over gRPC or HTTP. It is off (nil
// provider, nothing recorded, nothing to pay) unless an OTLP endpoint is
// configured.
//
// Package telemetry/scrape serves metrics for Prometheus and the health
// endpoints; package telemetry/msgtrace holds the message spans and the
// trace context in message properties. docs/telemetry.md describes all
// three for operators.
package telemetry
