// Package benchrun is `streamrun bench` apart from its flags and output:
// Run (or a Bench: Start, then Produce, Consume or Pipeline, then Close)
// puts a load on a broker, an embedded one unless Options.ServiceURL
// names one, and measures it; Options.Check refuses options that cannot
// go together, by field name; a pipeline runs through streamrun.Start, as `streamrun
// run` runs a file, with IdentityHandler unless told otherwise.
//
// The measuring side holds the latency histograms, the counters behind
// the once-a-second progress line, the timestamp a payload carries from
// its producer to whoever receives it, the conditions a run was measured
// under, and the result as it is printed (text) or written for machines
// (JSON, see Result).
package benchrun
