package pool

import (
	"fmt"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Compression is how a producer compresses each entry it sends. Consumers
// of any Pulsar client read all of them.
type Compression int

const (
	// NoCompression sends entries as they are (the default).
	NoCompression Compression = iota
	LZ4
	ZLIB
	ZSTD
	Snappy
)

var compressionNames = [...]string{NoCompression: "none", LZ4: "lz4", ZLIB: "zlib", ZSTD: "zstd", Snappy: "snappy"}

func (c Compression) String() string {
	if c >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// ParseCompression reads a compression by name: none, lz4, zlib, zstd or
// snappy, in any case.
func ParseCompression(s string) (Compression, error) {
	for c, name := range compressionNames {
		if strings.EqualFold(s, name) {
			return Compression(c), nil
		}
	}
	return 0, fmt.Errorf("compression %q: want none, lz4, zlib, zstd or snappy", s)
}

// wire is c as the protocol names it.
func (c Compression) wire() (pb.CompressionType, error) {
	switch c {
	case NoCompression:
		return pb.CompressionType_NONE, nil
	case LZ4:
		return pb.CompressionType_LZ4, nil
	case ZLIB:
		return pb.CompressionType_ZLIB, nil
	case ZSTD:
		return pb.CompressionType_ZSTD, nil
	case Snappy:
		return pb.CompressionType_SNAPPY, nil
	}
	return 0, fmt.Errorf("pool: ProducerOptions.Compression %d is not a compression", int(c))
}
