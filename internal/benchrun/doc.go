// Package benchrun holds the measuring side of `streamrun bench`: the
// latency histograms, the counters behind the once-a-second progress
// line, the timestamp a payload carries from its producer to whoever
// receives it, the conditions a run was measured under, and the result
// as it is printed (text) or written for machines (JSON, see Result).
//
// It measures; it does not talk to brokers. The command wires producers,
// consumers and pipelines to a Meter.
package benchrun
