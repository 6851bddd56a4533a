// Package msgtrace traces messages the way the OpenTelemetry messaging
// semantic conventions describe: a "send {topic}" span (PRODUCER) for each
// message published, a "process {topic}" span (CONSUMER) for each batch
// handed to a handler, linked to each message's creation context, and the
// W3C trace context carried in message properties.
//
// It uses the OpenTelemetry API only; which SDK records and exports the
// spans is the program's choice (package telemetry sets one up).
//
// The trace context travels in the message properties "traceparent" and
// "tracestate", written by the W3C Trace Context propagator: the names and
// format that OpenTelemetry's Pulsar instrumentation of the Java client
// writes and reads (through a text-map setter on the message's
// properties), and that a Go program using pulsar-client-go with the
// OpenTelemetry propagator and a map carrier writes. So traces join
// whichever of them produced or consumes a message.
package msgtrace
