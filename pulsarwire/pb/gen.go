// Package pb holds the generated Go types of the Pulsar protocol commands
// that streamrun uses. Edit commands.proto, never the generated file.
package pb

//go:generate protoc --go_out=. --go_opt=paths=source_relative commands.proto
