// Package control serves a running host's control API and web console
// (docs/control.md): a listener of its own, loopback unless TLS and a
// token key are given, off unless asked for.
//
// The API lists the pipelines with their configuration, state, handler
// instances, rates, backlog, in-flight counts and dead-letter reasons;
// says what a new version of a file would change (a reload's dry run,
// by the change classes of docs/reload.md) and applies it as SIGHUP
// does; pauses and resumes a pipeline; and streams a sample of a
// pipeline's messages (the tap, server-sent events). Every change goes
// through the run's files (streamrun.Run.Apply, SetPaused): written
// back, or refused when a file cannot be written, so the file stays the
// truth. openapi.yaml describes every route; the console, plain HTML,
// CSS and JavaScript embedded in the binary, uses nothing else.
package control
