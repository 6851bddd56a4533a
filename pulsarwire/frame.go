package pulsarwire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Sizes and markers of the framing.
//
// A simple frame is [total u32][cmd size u32][BaseCommand]. A frame that
// carries a message (SEND, MESSAGE) continues with an entry:
// [0x0e01][crc32c u32][metadata size u32][MessageMetadata][payload], the
// checksum covering everything after it. A broker may put
// [0x0e02][size u32][BrokerEntryMetadata] before the entry. Big-endian.
const (
	// DefaultMaxMessageSize is the broker's max_message_size when its
	// CONNECTED does not say: 5 MiB.
	DefaultMaxMessageSize = 5 << 20
	// FramePadding is what a frame may hold beyond max_message_size for its
	// command and metadata, as Apache Pulsar allows (10 KiB).
	FramePadding = 10 << 10

	magicCRC32C      = 0x0e01
	magicBrokerEntry = 0x0e02
)

// MaxFrameSize is the largest frame (without its 4-byte length) accepted
// when messages may be up to maxMessageSize bytes.
func MaxFrameSize(maxMessageSize int) int { return maxMessageSize + FramePadding }

// Frame is one decoded frame. Its byte slices alias the input.
type Frame struct {
	Cmd *pb.BaseCommand

	// The rest is set for frames that carry a message (SEND, MESSAGE).

	// BrokerEntryMetadata is the raw 0x0e02 section, nil when absent.
	BrokerEntryMetadata []byte
	// Entry is the message section as sent, from the checksum marker to
	// the end: what a broker stores and later sends to consumers as is.
	Entry []byte
	// Metadata is the decoded MessageMetadata of Entry.
	Metadata *pb.MessageMetadata
	// Payload is what follows the metadata: one message or a batch,
	// compressed as Metadata.Compression says.
	Payload []byte
}

// HasPayload reports whether the frame carries a message.
func (f *Frame) HasPayload() bool { return f.Entry != nil }

// ParseFrame decodes a frame without its leading 4-byte total size.
//
// On a checksum mismatch it returns the frame with Cmd set (so a broker
// can answer the right producer) and an error matching ErrChecksum.
func ParseFrame(body []byte) (Frame, error) {
	var f Frame
	if len(body) < 4 {
		return f, fmt.Errorf("command size: %w", ErrTruncated)
	}
	cmdSize := int(binary.BigEndian.Uint32(body))
	rest := body[4:]
	if cmdSize > len(rest) {
		return f, fmt.Errorf("command of %d bytes in a frame of %d: %w", cmdSize, len(body), ErrTruncated)
	}
	cmd, ok := decodeFlow(rest[:cmdSize])
	if !ok {
		cmd = new(pb.BaseCommand)
		if err := proto.Unmarshal(rest[:cmdSize], cmd); err != nil {
			return f, fmt.Errorf("command: %v: %w", err, ErrCorrupt)
		}
	}
	f.Cmd = cmd
	rest = rest[cmdSize:]
	if len(rest) == 0 {
		return f, nil
	}
	if len(rest) >= 2 && binary.BigEndian.Uint16(rest) == magicBrokerEntry {
		if len(rest) < 6 {
			return f, fmt.Errorf("broker entry metadata size: %w", ErrTruncated)
		}
		n := int(binary.BigEndian.Uint32(rest[2:]))
		if n > len(rest)-6 {
			return f, fmt.Errorf("broker entry metadata of %d bytes: %w", n, ErrTruncated)
		}
		f.BrokerEntryMetadata = rest[6 : 6+n]
		rest = rest[6+n:]
	}
	md, payload, err := ParseEntry(rest)
	if md == nil {
		return f, fmt.Errorf("%s: %w", cmd.GetType(), err)
	}
	f.Entry, f.Metadata, f.Payload = rest, md, payload
	if err != nil {
		return f, fmt.Errorf("%s: %w", cmd.GetType(), err)
	}
	return f, nil
}

// EntryChecksumSkip is where the part of a message section its checksum
// covers starts: after the magic number and the checksum itself.
const EntryChecksumSkip = 6

// EntryChecksum returns the crc32c a message section carries for its bytes
// from EntryChecksumSkip on; false when it carries none. It does not check
// it (ParseEntry does).
func EntryChecksum(entry []byte) (uint32, bool) {
	if len(entry) < EntryChecksumSkip || binary.BigEndian.Uint16(entry) != magicCRC32C {
		return 0, false
	}
	return binary.BigEndian.Uint32(entry[2:]), true
}

// ParseEntry decodes a message section: an optional checksum, the
// metadata and the payload. On a checksum mismatch it still returns the
// metadata and payload, with an error matching ErrChecksum.
func ParseEntry(entry []byte) (*pb.MessageMetadata, []byte, error) {
	rest := entry
	var want uint32
	checked := false
	if len(rest) >= 2 && binary.BigEndian.Uint16(rest) == magicCRC32C {
		if len(rest) < 6 {
			return nil, nil, fmt.Errorf("checksum: %w", ErrTruncated)
		}
		want = binary.BigEndian.Uint32(rest[2:])
		rest = rest[6:]
		checked = true
	}
	if len(rest) < 4 {
		return nil, nil, fmt.Errorf("metadata size: %w", ErrTruncated)
	}
	mdSize := int(binary.BigEndian.Uint32(rest))
	if mdSize > len(rest)-4 {
		return nil, nil, fmt.Errorf("metadata of %d bytes in %d: %w", mdSize, len(rest)-4, ErrTruncated)
	}
	md := new(pb.MessageMetadata)
	if err := proto.Unmarshal(rest[4:4+mdSize], md); err != nil {
		return nil, nil, fmt.Errorf("metadata: %v: %w", err, ErrCorrupt)
	}
	payload := rest[4+mdSize:]
	if checked {
		if got := Checksum(rest); got != want {
			return md, payload, fmt.Errorf("crc32c %08x, frame says %08x: %w", got, want, ErrChecksum)
		}
	}
	return md, payload, nil
}

// beginFrame reserves the total and command sizes and appends cmd.
func beginFrame(dst []byte, cmd *pb.BaseCommand) ([]byte, int, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	dst, err = proto.MarshalOptions{}.MarshalAppend(dst, cmd)
	if err != nil {
		return dst[:start], start, fmt.Errorf("encode %s: %w", cmd.GetType(), err)
	}
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-8))
	return dst, start, nil
}

func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendCommand appends a simple frame holding cmd to dst.
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	dst, start, err := beginFrame(dst, cmd)
	if err != nil {
		return dst, err
	}
	return endFrame(dst, start), nil
}

// AppendPayloadCommand appends a frame holding cmd, md and payload, with
// the checksum, to dst.
func AppendPayloadCommand(dst []byte, cmd *pb.BaseCommand, md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	dst, start, err := beginFrame(dst, cmd)
	if err != nil {
		return dst, err
	}
	dst, err = AppendEntry(dst, md, payload)
	if err != nil {
		return dst[:start], err
	}
	return endFrame(dst, start), nil
}

// AppendEntry appends a message section (checksum, metadata, payload).
func AppendEntry(dst []byte, md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, magicCRC32C>>8, magicCRC32C&0xff, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	dst, err = proto.MarshalOptions{}.MarshalAppend(dst, md)
	if err != nil {
		return dst[:start], fmt.Errorf("encode metadata: %w", err)
	}
	binary.BigEndian.PutUint32(dst[start+6:], uint32(len(dst)-start-10))
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+2:], Checksum(dst[start+6:]))
	return dst, nil
}

// AppendEntryCommand appends a frame holding cmd followed by an entry as
// stored (Frame.Entry): how a broker sends a stored message to a consumer.
func AppendEntryCommand(dst []byte, cmd *pb.BaseCommand, entry []byte) ([]byte, error) {
	dst, start, err := beginFrame(dst, cmd)
	if err != nil {
		return dst, err
	}
	dst = append(dst, entry...)
	return endFrame(dst, start), nil
}
