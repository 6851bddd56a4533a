// Package wirefuzz holds the fuzz targets of pulsarwire's decoders of
// frames, entries, batches, fields, topic names and message ids (the
// codecs' target is in pulsarwire/codecfuzz). They live apart from
// pulsarwire's own tests because Go's fuzzer snapshots and compares every
// coverage counter of the test binary after each input: this binary has a
// quarter fewer counters than pulsarwire's test binary, and each
// execution costs that much less (docs/benchmarks/hostile-input.md, "Fuzzing").
package wirefuzz
