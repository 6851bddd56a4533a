package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire"
	pb "github.com/streamrun/streamrun/pulsarwire/pb"
)

// Topic compaction, as Apache Pulsar's: a compacted view of a topic keeps
// the last message of each key up to the compaction horizon, and drops
// keys whose last message has an empty payload, and messages without a
// key. A consumer that subscribes with read_compacted (Exclusive and
// Failover only) reads the view below the horizon and the topic as it is
// after it. The view is kept apart from the topic's log (a metadata blob
// of its own), so that the log may be trimmed under it; a durable
// subscription named __compaction, whose cursor is at the horizon, keeps
// what is past it, as in Apache Pulsar.

// compactionSub is the subscription Apache Pulsar's compaction keeps on a
// compacted topic.
const compactionSub = "__compaction"

// The states of a topic's compaction, as the admin API says them.
const (
	compactionNotRun  = "NOT_RUN"
	compactionRunning = "RUNNING"
	compactionSuccess = "SUCCESS"
	compactionError   = "ERROR"
)

// compaction is a topic's compacted view and the state of its last run.
type compaction struct {
	mu        sync.Mutex
	loaded    bool
	status    string
	lastError string
	// horizon is the position after the last entry compacted; entries
	// are the view, in position order (each a whole entry, batches
	// rebuilt with their messages that are not kept marked compacted
	// out).
	horizon uint64
	entries []store.Entry
}

const compactionKey = "compaction/"

// compactedView returns t's view, loading it from the store the first
// time; has is false when t was never compacted.
func (t *topic) compactedView() (c *compaction, has bool) {
	c = &t.comp
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		c.loaded = true
		c.status = compactionNotRun
		if b, ok, err := t.c.store.GetMeta(compactionKey + t.name); err == nil && ok {
			if h, es, err := decodeCompaction(b); err == nil {
				c.horizon, c.entries, c.status = h, es, compactionSuccess
			} else {
				t.c.log.Warn("compacted view unreadable; compaction starts anew", "topic", t.name, "err", err)
			}
		}
	}
	return c, c.horizon > 0
}

// compactionStatus is the state of t's last compaction and its error.
func (t *topic) compactionStatus() (string, string) {
	c, _ := t.compactedView()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.lastError
}

// errCompactionRunning refuses a compaction while one runs, as Apache
// Pulsar (409 Conflict on the admin API).
var errCompactionRunning = errors.New("compaction already in progress")

// startCompaction compacts t on a goroutine of its own; an error only
// when one is running already.
func (t *topic) startCompaction() error {
	c, _ := t.compactedView()
	c.mu.Lock()
	if c.status == compactionRunning {
		c.mu.Unlock()
		return errCompactionRunning
	}
	c.status, c.lastError = compactionRunning, ""
	c.mu.Unlock()
	t.c.wg.Go(func() {
		err := t.compact()
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.status, c.lastError = compactionError, err.Error()
			t.c.log.Warn("compaction failed", "topic", t.name, "err", err)
			return
		}
		c.status = compactionSuccess
	})
	return nil
}

// compactPastThreshold starts a compaction of t when more bytes than its
// threshold (the namespace's policy, else Options.CompactionThreshold)
// came since the last one, as Apache Pulsar's checkCompaction: the
// entries past the horizon, estimated from the log's average entry.
func (t *topic) compactPastThreshold() {
	threshold := t.c.opts.CompactionThreshold
	if v, ok := t.c.compactionThreshold(t.parsed.NamespaceName()); ok {
		threshold = v
	}
	if threshold <= 0 {
		return
	}
	c, _ := t.compactedView()
	c.mu.Lock()
	horizon, running := c.horizon, c.status == compactionRunning
	c.mu.Unlock()
	first, next, size := t.log.First(), t.log.Next(), t.log.Size()
	if running || next <= first || next <= horizon {
		return
	}
	since := size
	if horizon > first {
		since = int64(float64(size) / float64(next-first) * float64(next-horizon))
	}
	if since > threshold {
		_ = t.startCompaction()
	}
}

// keyedMsg is where a key's last message is: its entry and its index in
// the entry's batch (-1 for an entry of one message).
type keyedMsg struct {
	entry uint64
	index int
}

// compact makes t's view of everything published so far: the last view,
// then the entries past its horizon.
func (t *topic) compact() error {
	c, _ := t.compactedView()
	c.mu.Lock()
	prev, from := c.entries, c.horizon
	c.mu.Unlock()
	end := t.readEnd()
	if from < t.log.First() && from > 0 {
		// Trimmed past the horizon: what was between is gone.
		from = t.log.First()
	}
	if from == 0 {
		from = t.log.First()
	}
	var fresh []store.Entry
	for at := from; at < end; {
		es, err := t.log.Read(at, maxReadEntries, maxReadBytes)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", t.name, at, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.ID >= end {
				break
			}
			if info := entryOf(e); t.txns.hidden(info) {
				continue // a transaction's marker, or an aborted entry
			}
			fresh = append(fresh, e)
		}
		at = es[len(es)-1].ID + 1
	}
	all := append(append([]store.Entry(nil), prev...), fresh...)
	var codecs pulsarwire.Codecs
	defer codecs.Close()
	// The last message of each key, and whether it deletes the key.
	last := map[string]keyedMsg{}
	deletes := map[string]bool{}
	for _, e := range all {
		msgs, err := entryMessages(&codecs, e.Data)
		if err != nil {
			continue // unreadable: kept out, as Apache Pulsar skips it
		}
		for _, m := range msgs {
			if m.out || !m.hasKey {
				continue
			}
			last[m.key] = keyedMsg{entry: e.ID, index: m.index}
			deletes[m.key] = m.empty
		}
	}
	var view []store.Entry
	for _, e := range all {
		data, keep, err := compactEntry(&codecs, e, last, deletes)
		if err != nil || !keep {
			continue
		}
		view = append(view, store.Entry{ID: e.ID, PublishTime: e.PublishTime, Data: data})
	}
	if err := t.c.store.PutMeta(compactionKey+t.name, encodeCompaction(end, view)); err != nil {
		return fmt.Errorf("save the compacted view of %s: %w", t.name, err)
	}
	c.mu.Lock()
	c.horizon, c.entries = end, view
	c.mu.Unlock()
	t.keepFromHorizon(end)
	return nil
}

// keepFromHorizon puts the __compaction subscription's cursor at the
// horizon, so that the entries after it are kept until the next
// compaction.
func (t *topic) keepFromHorizon(horizon uint64) {
	t.ensureSubscription(compactionSub)
	t.mu.Lock()
	s := t.subs[compactionSub]
	t.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.reset(horizon)
	s.dirty = true
	s.mu.Unlock()
	s.save()
}

// entryMsg is one message of an entry, as compaction sees it.
type entryMsg struct {
	index  int // -1: the entry is one message
	key    string
	hasKey bool
	empty  bool // no payload: deletes the key
	out    bool // compacted out before
}

// entryMessages lists the messages of a stored entry.
func entryMessages(codecs *pulsarwire.Codecs, entry []byte) ([]entryMsg, error) {
	md, payload, err := pulsarwire.ParseEntry(entry)
	if err != nil {
		return nil, err
	}
	if md.NumMessagesInBatch == nil {
		return []entryMsg{{index: -1, key: md.GetPartitionKey(), hasKey: md.PartitionKey != nil, empty: len(payload) == 0 && !md.GetNullValue()}}, nil
	}
	body, err := batchBody(codecs, md, payload)
	if err != nil {
		return nil, err
	}
	bms, err := pulsarwire.SplitBatch(body, int(md.GetNumMessagesInBatch()))
	if err != nil {
		return nil, err
	}
	out := make([]entryMsg, len(bms))
	for i, bm := range bms {
		out[i] = entryMsg{index: i, key: bm.Meta.GetPartitionKey(), hasKey: bm.Meta.PartitionKey != nil,
			empty: len(bm.Payload) == 0, out: bm.Meta.GetCompactedOut()}
	}
	return out, nil
}

// batchBody is a batch entry's payload, decompressed.
func batchBody(codecs *pulsarwire.Codecs, md *pb.MessageMetadata, payload []byte) ([]byte, error) {
	if md.GetCompression() == pb.CompressionType_NONE {
		return payload, nil
	}
	return codecs.Decompress(md.GetCompression(), nil, payload, int(md.GetUncompressedSize()), 64<<20)
}

// compactEntry is e as the view keeps it: as it is when it is one kept
// message; a batch with a kept message rebuilt, uncompressed, with each
// message that is not kept marked compacted out (no key, no payload), as
// Apache Pulsar rebuilds it; keep is false when nothing of it is kept.
func compactEntry(codecs *pulsarwire.Codecs, e store.Entry, last map[string]keyedMsg, deletes map[string]bool) (data []byte, keep bool, err error) {
	md, payload, err := pulsarwire.ParseEntry(e.Data)
	if err != nil {
		return nil, false, err
	}
	kept := func(key string, index int) bool {
		return last[key] == keyedMsg{entry: e.ID, index: index} && !deletes[key]
	}
	if md.NumMessagesInBatch == nil {
		return e.Data, md.PartitionKey != nil && kept(md.GetPartitionKey(), -1), nil
	}
	body, err := batchBody(codecs, md, payload)
	if err != nil {
		return nil, false, err
	}
	bms, err := pulsarwire.SplitBatch(body, int(md.GetNumMessagesInBatch()))
	if err != nil {
		return nil, false, err
	}
	var rebuilt []byte
	for i, bm := range bms {
		smm, p := bm.Meta, bm.Payload
		if bm.Meta.GetCompactedOut() || bm.Meta.PartitionKey == nil || !kept(bm.Meta.GetPartitionKey(), i) {
			smm, p = &pb.SingleMessageMetadata{PayloadSize: proto.Int32(0), CompactedOut: proto.Bool(true)}, nil
		} else {
			keep = true
		}
		if rebuilt, err = pulsarwire.AppendBatchMessage(rebuilt, smm, p); err != nil {
			return nil, false, err
		}
	}
	if !keep {
		return nil, false, nil
	}
	nmd := proto.Clone(md).(*pb.MessageMetadata)
	nmd.Compression = nil
	nmd.UncompressedSize = proto.Uint32(uint32(len(rebuilt)))
	data, err = pulsarwire.AppendEntry(nil, nmd, rebuilt)
	return data, true, err
}

// compactedFrom is what a read_compacted subscription reads from
// position from, at most n entries: the view's entries from there, then
// the log from the horizon. ok is false when the view does not apply
// (never compacted, or from is past the horizon).
func (t *topic) compactedFrom(from uint64, n int) (es []store.Entry, ok bool, err error) {
	c, has := t.compactedView()
	if !has {
		return nil, false, nil
	}
	c.mu.Lock()
	horizon, view := c.horizon, c.entries
	c.mu.Unlock()
	if from >= horizon {
		return nil, false, nil
	}
	if from <= t.log.First() {
		from = 0 // the earliest: the view's start, whatever was trimmed
	}
	for _, e := range view {
		if e.ID >= from && len(es) < n {
			es = append(es, e)
		}
	}
	if len(es) < n && horizon < t.readEnd() {
		more, err := t.log.Read(horizon, n-len(es), maxReadBytes)
		if err != nil {
			return es, true, err
		}
		es = append(es, more...)
	}
	return es, true, nil
}

// compactedStart is where a read_compacted subscription starting at the
// log's first entry starts: the view's first entry when it is before
// (the log was trimmed under the view), else first.
func (t *topic) compactedStart(first uint64) uint64 {
	c, has := t.compactedView()
	if !has {
		return first
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > 0 && c.entries[0].ID < first {
		return c.entries[0].ID
	}
	return first
}

// lastCompacted is the last entry of t's view, when nothing was published
// after its horizon: what a read_compacted consumer is told is the last
// message (Apache Pulsar's answer from its compacted ledger).
func (t *topic) lastCompacted() (store.Entry, bool) {
	c, has := t.compactedView()
	if !has {
		return store.Entry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 || t.log.Next() != c.horizon {
		return store.Entry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// encodeCompaction is the stored form of a view: the horizon, then each
// entry's id, publish time, length and bytes, little-endian.
func encodeCompaction(horizon uint64, es []store.Entry) []byte {
	n := 8
	for _, e := range es {
		n += 20 + len(e.Data)
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint64(b, horizon)
	for _, e := range es {
		b = binary.LittleEndian.AppendUint64(b, e.ID)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.PublishTime))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b
}

func decodeCompaction(b []byte) (uint64, []store.Entry, error) {
	if len(b) < 8 {
		return 0, nil, errors.New("short compacted view")
	}
	horizon := binary.LittleEndian.Uint64(b)
	b = b[8:]
	var es []store.Entry
	for len(b) > 0 {
		if len(b) < 20 {
			return 0, nil, errors.New("truncated compacted view")
		}
		e := store.Entry{ID: binary.LittleEndian.Uint64(b), PublishTime: int64(binary.LittleEndian.Uint64(b[8:]))}
		n := binary.LittleEndian.Uint32(b[16:])
		b = b[20:]
		if uint64(len(b)) < uint64(n) {
			return 0, nil, errors.New("truncated compacted view")
		}
		e.Data = b[:n:n]
		b = b[n:]
		es = append(es, e)
	}
	return horizon, es, nil
}
