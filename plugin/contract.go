package plugin

// ContractVersion is the version of the host-plugin contract
// (plugin/proto/handler.proto) this package speaks. It is negotiated in
// go-plugin's handshake: a host and a plugin built against different
// versions refuse each other at start with an error naming both.
const ContractVersion = 1

// DefaultMaxMessageSize is the largest gRPC message (a batch, or a batch's
// results) either side accepts unless told otherwise: 64 MiB, well above
// gRPC's 4 MiB default, so a batch of 1000 messages of Pulsar's 5 MiB
// maximum size is the only kind that needs it raised.
//
// Both constants are plugin/internal/contract's, spelled out here so
// that a handler author reads their values (a test keeps them equal).
const DefaultMaxMessageSize = 64 << 20
