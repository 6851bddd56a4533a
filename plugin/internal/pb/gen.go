// Package pb holds the generated Go code of the handler plugin contract,
// plugin/proto/handler.proto. Edit the .proto, never the generated files.
package pb

//go:generate protoc --proto_path=../../proto --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative handler.proto
