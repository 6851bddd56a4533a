// Package clienttrace traces what a client program publishes (package
// pool) and receives (package subscribe) as the OTEL_* environment says
// (docs/telemetry.md): a "send" span per message published, ended by its
// receipt, and a "process" span per message received, child of and
// linked to the send that carried its context (package msgtrace).
// `streamrun produce` and `streamrun consume` use it; a Go program of
// its own can too.
package clienttrace
