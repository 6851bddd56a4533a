// Package codecfuzz holds the fuzz target of pulsarwire's payload
// decompression, apart from pulsarwire's tests and from the other
// decoders' targets (pulsarwire/wirefuzz) because Go's fuzzer snapshots
// and compares every coverage counter of the test binary after each
// input: the codecs' code would make every other target's executions
// cost more, and pulsarwire's own tests this one's (docs/benchmarks/hostile-input.md,
// "Fuzzing").
package codecfuzz
