package plugin

// ContractVersion is the newest version of the host-plugin contract
// (plugin/proto/handler.proto) this package speaks; it speaks version 1
// too. The version is negotiated in go-plugin's handshake (the highest
// both ends speak): a host and a plugin with none in common refuse each
// other at start with an error naming both. Version 2 moves batches off
// gRPC onto a channel the host hands the plugin (docs/runtime.md, "The
// plugin boundary"); version 3 answers the common outcomes in a byte a
// message; version 4 puts a change of the message's own keyed state in
// that byte too; version 5 sends incremental windows in a compact form,
// and a window due with messages waiting as one add and fire, which
// ReadWindow and IncrementalWindow take care of.
const ContractVersion = 5

// DefaultMaxMessageSize is the largest gRPC message (a batch, or a batch's
// results) either side accepts unless told otherwise: 64 MiB, well above
// gRPC's 4 MiB default, so a batch of 1000 messages of Pulsar's 5 MiB
// maximum size is the only kind that needs it raised.
//
// Both constants are plugin/internal/contract's, spelled out here so
// that a handler author reads their values (a test keeps them equal).
const DefaultMaxMessageSize = 64 << 20
