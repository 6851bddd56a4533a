package broker

import (
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Receipts at fsync durability (Options.Sync). The read loop writes each
// SEND's entry to its log and goes on reading the next SEND; the receipt
// waits in the connection's queue until an fsync covers the entry. One
// goroutine per connection drains the queue in order, so a producer's
// answers still go out in the order of its SENDs, only after the fsync
// covering the entry (docs/contract.md §5), and one
// fsync covers everything written before it: this connection's SENDs that
// arrived meanwhile as well as other connections' (group commit). Without
// the queue a connection would wait for each fsync before reading its next
// SEND, and a single producer would pay one fsync per entry.

// receiptQueueLen bounds the answers waiting for an fsync: a full queue
// holds the read loop, so a producer cannot run ahead of the disk without
// limit.
const receiptQueueLen = 4096

// receiptBatch is the most answers the receipt loop takes per round.
const receiptBatch = 1024

// pendingAnswer is an answer waiting for the receipts before it: a receipt
// for entry id of t once an fsync covers it, or (t nil) cmd as it is.
type pendingAnswer struct {
	t          *topic
	id         uint64
	producer   uint64
	seq        uint64
	highest    uint64
	hasHighest bool
	cmd        proto.Message
}

// queueAnswer puts a on the receipt queue, starting the receipt loop on
// first use; false means the connection ended while the queue was full.
// Called from the read loop only.
func (cn *conn) queueAnswer(a pendingAnswer) bool {
	if cn.receipts == nil {
		cn.receipts = make(chan pendingAnswer, receiptQueueLen)
		cn.receiptsDone = make(chan struct{})
		cn.srv.wg.Add(1)
		go cn.receiptLoop(cn.receipts, cn.receiptsDone)
	}
	select {
	case cn.receipts <- a:
		return true
	case <-cn.quit:
		return false
	}
}

// sendAfterReceipts sends m once the answers already queued have gone
// out (at once when nothing ever was queued). Called from the read loop
// only.
func (cn *conn) sendAfterReceipts(m proto.Message) {
	if cn.receipts == nil {
		cn.send(m)
		return
	}
	cn.queueAnswer(pendingAnswer{cmd: m})
}

// stopReceipts ends the receipt loop once it has answered everything
// queued. The read loop calls it as it ends.
func (cn *conn) stopReceipts() {
	if cn.receipts == nil {
		return
	}
	close(cn.receipts)
	<-cn.receiptsDone
}

// receiptLoop answers the queued SENDs in order, taking whatever has
// queued up since its last round in one go: one fsync per log and one
// append to the output for all of it.
func (cn *conn) receiptLoop(q <-chan pendingAnswer, done chan<- struct{}) {
	defer cn.srv.wg.Done()
	defer close(done)
	batch := make([]pendingAnswer, 0, receiptBatch)
	var syncs []topicSync
	for {
		a, ok := <-q
		if !ok {
			return
		}
		batch = append(batch[:0], a)
	more:
		for len(batch) < receiptBatch {
			select {
			case a, ok := <-q:
				if !ok {
					break more
				}
				batch = append(batch, a)
			default:
				break more
			}
		}
		syncs = cn.answer(batch, syncs[:0])
		clear(batch) // let the topics and commands go
	}
}

// topicSync is one fsync of a round: t's log up to entry n (excluded).
type topicSync struct {
	t   *topic
	n   uint64
	err error
}

// answer fsyncs what batch's receipts need, then sends its answers in
// order: a receipt, or the send error of an entry whose fsync failed.
func (cn *conn) answer(batch []pendingAnswer, syncs []topicSync) []topicSync {
	for i := range batch {
		if t := batch[i].t; t != nil {
			syncs = addSync(syncs, t, batch[i].id+1)
		}
	}
	for i := range syncs {
		s := &syncs[i]
		if s.err = s.t.log.SyncTo(s.n); s.err == nil {
			s.t.wakeSubs()
		} else {
			cn.log.Error("fsync failed; the messages it covered are refused", "topic", s.t.name, "err", s.err)
		}
	}
	b := cn.out()
	if b == nil {
		return syncs
	}
	for i := range batch {
		a := &batch[i]
		if a.t == nil {
			*b = cn.appendAnswer(*b, a.cmd)
			continue
		}
		if err := syncErr(syncs, a.t); err != nil {
			code, msg := appendFailure(a.t, err)
			*b = cn.appendAnswer(*b, &pb.CommandSendError{ProducerId: proto.Uint64(a.producer), SequenceId: proto.Uint64(a.seq),
				Error: code.Enum(), Message: proto.String(msg)})
			continue
		}
		*b = appendReceipt(*b, a.producer, a.seq, a.highest, a.t.ledger, a.id, a.hasHighest)
	}
	// Written here, after the fsync, not by the writer goroutine: one
	// thread wake-up less per fsync.
	cn.doneInline()
	for i := range syncs {
		syncs[i] = topicSync{}
	}
	return syncs
}

// appendAnswer appends m's frame to dst (dst unchanged when m cannot be
// encoded, which is a broker bug).
func (cn *conn) appendAnswer(dst []byte, m proto.Message) []byte {
	out, err := appendCmd(dst, m)
	if err != nil {
		cn.log.Error("broker bug: cannot encode a command", "err", err)
		return dst
	}
	return out
}

// addSync notes that t's log must be fsynced below n.
func addSync(syncs []topicSync, t *topic, n uint64) []topicSync {
	for i := range syncs {
		if syncs[i].t == t {
			syncs[i].n = max(syncs[i].n, n)
			return syncs
		}
	}
	return append(syncs, topicSync{t: t, n: n})
}

func syncErr(syncs []topicSync, t *topic) error {
	for i := range syncs {
		if syncs[i].t == t {
			return syncs[i].err
		}
	}
	return nil
}
