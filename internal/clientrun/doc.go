// Package clientrun is `streamrun produce`, `consume` and `state` apart
// from their flags and output: each connects within a bound (Conn), does
// its work through pool and subscribe, and closes within a bound, so
// that a Go program does what the command does with the same calls.
//
// Produce publishes a msglines.Source to a topic and waits for every
// receipt; Consume hands a subscription's messages to a function until a
// count, an idle stop or the end of ctx; State reads a pipeline's keyed
// state from its changelog. ProgressLine shows how publishing goes
// while it does. The Check methods (Conn, ConsumeOptions,
// ProduceOptions) are the rules the options follow, naming fields so
// that a command names its flags.
// Traces (telemetry/clienttrace) are the caller's to start and end, so
// that they outlive what the command prints.
package clientrun
