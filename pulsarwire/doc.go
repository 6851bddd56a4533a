// Package pulsarwire encodes and decodes Apache Pulsar's binary protocol:
// frames and their checksums, the commands (one table describing every
// kind, generated from the protocol's descriptors), message metadata,
// batches, compression, message ids, topic names and the server's error
// codes.
//
// It knows nothing of connections, goroutines, retries or policy: a
// Reader reads frames from any stream, and the Append functions write
// them into a caller's buffer. The client (internal/connpool, pool,
// subscribe) and the embedded broker build on it.
package pulsarwire
