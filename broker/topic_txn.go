package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// A topic's transactions (Apache Pulsar's transaction buffer). A
// transactional SEND is stored at once, like any other, with the
// transaction's id in its metadata; while a transaction is open nothing
// from its first entry on is read for dispatch (Pulsar's maxReadPosition),
// so consumers see a topic's entries in log order once every transaction
// before them ended. Its end writes a marker entry (Pulsar's TXN_COMMIT or
// TXN_ABORT, never dispatched: ids keep Pulsar's gaps); after an abort its
// entries are skipped by dispatch, by the id in their metadata. The
// aborted transactions are kept in the store's metadata
// (txnaborted/<topic>) while the log holds their entries; the open ones
// come back from the coordinator's records after a restart.

// Apache Pulsar's marker types of a transaction's end.
const (
	markerTxnCommit = 21
	markerTxnAbort  = 22
)

const txnAbortedPrefix = "txnaborted/"

// txnBuffer is a topic's transactions.
type txnBuffer struct {
	t *topic
	// ongoing maps each open transaction that stored something here to
	// its first entry; guarded by t.pubMu (and, before the topic is
	// published, by the coordinator's restore).
	ongoing map[pulsarwire.TxnID]uint64
	// limit is the first entry dispatch may not read: the oldest open
	// transaction's first entry, MaxUint64 when none is open.
	limit atomic.Uint64
	// aborted maps each aborted transaction with entries here to its
	// marker's entry (or its first entry, when restored mid-abort).
	mu      sync.RWMutex
	aborted map[pulsarwire.TxnID]uint64
}

func (b *txnBuffer) init(t *topic) {
	b.t, b.ongoing, b.aborted = t, map[pulsarwire.TxnID]uint64{}, map[pulsarwire.TxnID]uint64{}
	b.limit.Store(math.MaxUint64)
}

// limitChanged recomputes limit from ongoing; t.pubMu held.
func (b *txnBuffer) limitChanged() {
	l := uint64(math.MaxUint64)
	for _, first := range b.ongoing {
		l = min(l, first)
	}
	b.limit.Store(l)
}

// readEnd is the first entry dispatch may not read: the log's end, or
// the first entry of the oldest open transaction.
func (t *topic) readEnd() uint64 { return min(t.log.Next(), t.txns.limit.Load()) }

// isAborted reports whether entries of transaction id are to be skipped.
func (b *txnBuffer) isAborted(id pulsarwire.TxnID) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.aborted[id]
	return ok
}

// hidden reports whether an entry is never dispatched: a transaction's
// marker, or an entry of an aborted transaction.
func (b *txnBuffer) hidden(info entryInfo) bool {
	return info.marker != 0 || info.inTxn && b.isAborted(info.txn)
}

// loadAborted reads the aborted transactions kept for the topic.
func (b *txnBuffer) loadAborted() {
	v, ok, err := b.t.c.store.GetMeta(txnAbortedPrefix + b.t.name)
	if err != nil || !ok {
		return
	}
	var m map[string]uint64
	if err := json.Unmarshal(v, &m); err != nil {
		b.t.c.log.Error("aborted transactions of a topic unreadable", "topic", b.t.name, "err", err)
		return
	}
	for s, at := range m {
		if id, err := parseTxnID(s); err == nil {
			b.aborted[id] = at
		}
	}
}

// saveAborted writes the aborted transactions; b.mu held.
func (b *txnBuffer) saveAbortedLocked() {
	key := txnAbortedPrefix + b.t.name
	if len(b.aborted) == 0 {
		b.t.c.store.DeleteMeta(key)
		return
	}
	m := make(map[string]uint64, len(b.aborted))
	for id, at := range b.aborted {
		m[id.String()] = at
	}
	v, _ := json.Marshal(m)
	if err := b.t.c.store.PutMeta(key, v); err != nil {
		b.t.c.log.Error("storing a topic's aborted transactions failed", "topic", b.t.name, "err", err)
	}
}

// trimAborted forgets aborted transactions whose entries are all gone
// from the log (trimmed).
func (b *txnBuffer) trimAborted(first uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.aborted)
	for id, at := range b.aborted {
		if at < first {
			delete(b.aborted, id)
		}
	}
	if len(b.aborted) != n {
		b.saveAbortedLocked()
	}
}

// joinLocked makes the topic's next entry one of transaction id's: the
// first of it here is told to the coordinator, which refuses one that is
// not open; t.pubMu held.
func (b *txnBuffer) joinLocked(id pulsarwire.TxnID) error {
	if _, ok := b.ongoing[id]; ok {
		return nil
	}
	first := b.t.log.Next()
	if err := b.t.c.txns.published(id, b.t.name, first); err != nil {
		return err
	}
	b.ongoing[id] = first
	b.limitChanged()
	return nil
}

// endTxn ends transaction id on the topic: a marker entry, then its
// entries become readable (commit) or skipped (abort), and dispatch
// reads on. Nothing happens when it stored nothing here.
func (t *topic) endTxn(id pulsarwire.TxnID, commit bool) {
	b := &t.txns
	t.pubMu.Lock()
	first, ok := b.ongoing[id]
	if !ok {
		t.pubMu.Unlock()
		return
	}
	marker := int32(markerTxnCommit)
	if !commit {
		marker = markerTxnAbort
	}
	now := max(time.Now().UnixMilli(), t.lastPublish)
	md := &pb.MessageMetadata{ProducerName: proto.String(""), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(uint64(now)),
		MarkerType: proto.Int32(marker), TxnidLeastBits: proto.Uint64(id.Least), TxnidMostBits: proto.Uint64(id.Most)}
	entry, err := pulsarwire.AppendEntry(nil, md, nil)
	at := first
	if err == nil {
		var mid uint64
		if mid, err = t.log.Write(now, entry); err == nil {
			at, t.lastPublish = mid, now
		}
	}
	if err != nil {
		// The marker is for Pulsar's ids and stats; the outcome lives in
		// the coordinator's record and the aborted list.
		t.c.log.Warn("writing a transaction marker failed", "topic", t.name, "txn", id, "err", err)
	}
	if !commit {
		b.mu.Lock()
		b.aborted[id] = at
		b.saveAbortedLocked()
		b.mu.Unlock()
	}
	delete(b.ongoing, id)
	b.limitChanged()
	t.pubMu.Unlock()
	if err == nil && t.log.Syncs() {
		if err := t.log.SyncTo(at); err != nil {
			t.c.log.Warn("syncing a transaction marker failed", "topic", t.name, "txn", id, "err", err)
		}
	}
	t.wakeSubs()
}

// withTxnID returns entry with id in its metadata's transaction fields:
// as it is when they say id already (Apache Pulsar's Java client sets
// them), else with its metadata rewritten (pulsar-client-go v0.19 sets
// them on CommandSend only, apache/pulsar-client-go#1498), so that what
// is stored says which transaction it belongs to, as dispatch and a
// restart read it.
func withTxnID(entry []byte, md *pb.MessageMetadata, payload []byte, id pulsarwire.TxnID) ([]byte, error) {
	if md.TxnidMostBits != nil && md.TxnidLeastBits != nil && md.GetTxnidMostBits() == id.Most && md.GetTxnidLeastBits() == id.Least {
		return entry, nil
	}
	md = proto.Clone(md).(*pb.MessageMetadata)
	md.TxnidMostBits, md.TxnidLeastBits = proto.Uint64(id.Most), proto.Uint64(id.Least)
	return pulsarwire.AppendEntry(nil, md, payload)
}

// parseTxnID reads Apache Pulsar's text form, "(most,least)".
func parseTxnID(s string) (pulsarwire.TxnID, error) {
	var id pulsarwire.TxnID
	_, err := fmt.Sscanf(s, "(%d,%d)", &id.Most, &id.Least)
	return id, err
}

// lastDispatchable is the newest entry a consumer could be given: below
// readEnd, not a marker, not of an aborted transaction (Apache Pulsar's
// getLastDispatchablePosition); false when there is none among the last
// few hundred.
func (t *topic) lastDispatchable() (uint64, entryInfo, bool) {
	end := t.readEnd()
	for id, n := end, 0; id > t.log.First() && n < 256; n++ {
		id--
		es, err := t.log.Read(id, 1, maxReadBytes)
		if err != nil || len(es) == 0 || es[0].ID != id {
			return 0, entryInfo{}, false
		}
		info := entryOf(es[0])
		if !t.txns.hidden(info) {
			return id, info, true
		}
	}
	return 0, entryInfo{}, false
}
