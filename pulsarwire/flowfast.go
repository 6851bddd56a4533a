package pulsarwire

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Field numbers of the two messages decodeFlow reads.
const (
	fieldBaseType  = 1  // BaseCommand.type
	fieldBaseFlow  = 11 // BaseCommand.flow
	fieldFlowID    = 1  // CommandFlow.consumer_id
	fieldFlowGrant = 2  // CommandFlow.messagePermits
)

// decodeFlow decodes a BaseCommand that is a FLOW and nothing else (its
// type, and a flow of a consumer id and a permit count, each once) without
// the reflection of proto.Unmarshal; ok is false for anything else, which
// the caller decodes with proto.Unmarshal. A consumer sends a FLOW every
// few entries, and a broker draining a backlog spends a tenth of its
// user-space CPU decoding them the general way, with the copies of the
// entries between them evicting the decoder's tables from the caches.
// For every input it accepts, the result equals proto.Unmarshal's
// (TestDecodeFlowMatchesProto).
func decodeFlow(b []byte) (cmd *pb.BaseCommand, ok bool) {
	var typ, id, grant uint64
	var seenType, seenFlow, seenID, seenGrant bool
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case num == fieldBaseType && wt == protowire.VarintType && !seenType:
			if typ, n = protowire.ConsumeVarint(b); n < 0 {
				return nil, false
			}
			seenType = true
		case num == fieldBaseFlow && wt == protowire.BytesType && !seenFlow:
			var body []byte
			if body, n = protowire.ConsumeBytes(b); n < 0 {
				return nil, false
			}
			if id, grant, seenID, seenGrant = flowBody(body); !seenID || !seenGrant {
				return nil, false
			}
			seenFlow = true
		default:
			return nil, false
		}
		b = b[n:]
	}
	if !seenType || !seenFlow || typ != uint64(pb.BaseCommand_FLOW) || grant > math.MaxUint32 {
		return nil, false
	}
	t := pb.BaseCommand_FLOW
	g := uint32(grant)
	return &pb.BaseCommand{Type: &t, Flow: &pb.CommandFlow{ConsumerId: &id, MessagePermits: &g}}, true
}

// flowBody reads a CommandFlow's two fields; a field seen twice or any
// other field makes it report neither.
func flowBody(b []byte) (id, grant uint64, seenID, seenGrant bool) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 || wt != protowire.VarintType {
			return 0, 0, false, false
		}
		b = b[n:]
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return 0, 0, false, false
		}
		b = b[m:]
		switch {
		case num == fieldFlowID && !seenID:
			id, seenID = v, true
		case num == fieldFlowGrant && !seenGrant:
			grant, seenGrant = v, true
		default:
			return 0, 0, false, false
		}
	}
	return id, grant, seenID, seenGrant
}
