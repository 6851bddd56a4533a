// Package pb holds the generated Go code of the handler plugin contract,
// plugin/proto/handler.proto. Edit the .proto, never the generated files.
// scripts/gen-proto regenerates this code and the Python SDK's with pinned
// tools (protoc from the grpcio-tools wheel, protoc-gen-go and
// protoc-gen-go-grpc by go install), so no protoc needs to be installed.
package pb

//go:generate ../../../scripts/gen-proto
