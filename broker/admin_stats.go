package broker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// The admin API's statistics: /stats, /partitioned-stats and
// /internalStats, with Apache Pulsar's field names and meanings for the
// fields kept here (docs/admin.md lists them, and what differs).

type consumerStats struct {
	ConsumerName     string  `json:"consumerName"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	BytesOutCounter  int64   `json:"bytesOutCounter"`
	MsgOutCounter    int64   `json:"msgOutCounter"`
	AvailablePermits int64   `json:"availablePermits"`
	UnackedMessages  int64   `json:"unackedMessages"`
	BlockedOnUnacked bool    `json:"blockedConsumerOnUnackedMsgs"`
	Address          string  `json:"address"`
	ConnectedSince   string  `json:"connectedSince"`
	ClientVersion    string  `json:"clientVersion"`
}

type subscriptionStats struct {
	MsgRateOut       float64         `json:"msgRateOut"`
	MsgThroughputOut float64         `json:"msgThroughputOut"`
	BytesOutCounter  int64           `json:"bytesOutCounter"`
	MsgOutCounter    int64           `json:"msgOutCounter"`
	MsgBacklog       int64           `json:"msgBacklog"`
	BacklogSize      int64           `json:"backlogSize"`
	BacklogNoDelayed int64           `json:"msgBacklogNoDelayed"`
	UnackedMessages  int64           `json:"unackedMessages"`
	Type             string          `json:"type"`
	IsDurable        bool            `json:"isDurable"`
	IsReplicated     bool            `json:"isReplicated"`
	Consumers        []consumerStats `json:"consumers"`
}

type publisherStats struct {
	AccessMode      string  `json:"accessMode"`
	MsgRateIn       float64 `json:"msgRateIn"`
	MsgThroughputIn float64 `json:"msgThroughputIn"`
	AverageMsgSize  float64 `json:"averageMsgSize"`
	ProducerID      uint64  `json:"producerId"`
	ProducerName    string  `json:"producerName"`
	Address         string  `json:"address"`
	ConnectedSince  string  `json:"connectedSince"`
	ClientVersion   string  `json:"clientVersion"`
}

type topicStats struct {
	MsgRateIn         float64                      `json:"msgRateIn"`
	MsgThroughputIn   float64                      `json:"msgThroughputIn"`
	MsgRateOut        float64                      `json:"msgRateOut"`
	MsgThroughputOut  float64                      `json:"msgThroughputOut"`
	BytesInCounter    int64                        `json:"bytesInCounter"`
	MsgInCounter      int64                        `json:"msgInCounter"`
	BytesOutCounter   int64                        `json:"bytesOutCounter"`
	MsgOutCounter     int64                        `json:"msgOutCounter"`
	AverageMsgSize    float64                      `json:"averageMsgSize"`
	StorageSize       int64                        `json:"storageSize"`
	BacklogSize       int64                        `json:"backlogSize"`
	Publishers        []publisherStats             `json:"publishers"`
	WaitingPublishers int                          `json:"waitingPublishers"`
	Subscriptions     map[string]subscriptionStats `json:"subscriptions"`
	Replication       map[string]any               `json:"replication"`
	Deduplication     string                       `json:"deduplicationStatus"`
}

func since(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// avgSize is bytes per message at the given rates, 0 when idle (Pulsar's
// averageMsgSize).
func avgSize(msgRate, byteRate float64) float64 {
	if msgRate == 0 {
		return 0
	}
	return byteRate / msgRate
}

func (t *topic) stats() topicStats {
	now := time.Now()
	st := topicStats{
		MsgInCounter:    t.in.msgs.Load(),
		BytesInCounter:  t.in.bytes.Load(),
		MsgOutCounter:   t.out.msgs.Load(),
		BytesOutCounter: t.out.bytes.Load(),
		StorageSize:     t.log.Size(),
		Publishers:      []publisherStats{},
		Subscriptions:   map[string]subscriptionStats{},
		Replication:     map[string]any{},
		Deduplication:   "Disabled",
	}
	st.MsgRateIn, st.MsgThroughputIn = t.in.rates(now)
	st.MsgRateOut, st.MsgThroughputOut = t.out.rates(now)
	st.AverageMsgSize = avgSize(st.MsgRateIn, st.MsgThroughputIn)
	t.mu.Lock()
	for p := range t.producers {
		ps := publisherStats{ProducerName: p.name, ProducerID: p.id, Address: p.conn.peer, ConnectedSince: since(p.since),
			AccessMode: p.access.String(), ClientVersion: p.conn.client}
		ps.MsgRateIn, ps.MsgThroughputIn = p.rate.rates(now, p.msgs.Load(), p.bytes.Load())
		ps.AverageMsgSize = avgSize(ps.MsgRateIn, ps.MsgThroughputIn)
		st.Publishers = append(st.Publishers, ps)
	}
	t.mu.Unlock()
	entrySize := t.averageEntrySize()
	for _, s := range t.subscriptions() {
		ss := s.stats(now)
		// Apache Pulsar estimates it too.
		ss.BacklogSize = int64(entrySize * float64(ss.MsgBacklog))
		st.BacklogSize = max(st.BacklogSize, ss.BacklogSize)
		st.Subscriptions[s.name] = ss
	}
	return st
}

// averageEntrySize is the mean size of the entries published since the
// topic loaded or, before any, of those stored (record headers included).
func (t *topic) averageEntrySize() float64 {
	if n := t.in.entries.Load(); n > 0 {
		return float64(t.in.bytes.Load()) / float64(n)
	}
	if n := t.log.Next() - t.log.First(); n > 0 {
		return float64(t.log.Size()) / float64(n)
	}
	return 0
}

func (s *subscription) stats(now time.Time) subscriptionStats {
	ss := subscriptionStats{
		Consumers: []consumerStats{}, MsgBacklog: s.backlog(), IsDurable: s.durable,
		MsgOutCounter: s.out.msgs.Load(), BytesOutCounter: s.out.bytes.Load(),
	}
	ss.BacklogNoDelayed = ss.MsgBacklog
	ss.MsgRateOut, ss.MsgThroughputOut = s.out.rates(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.Type = s.typ.String()
	for _, c := range s.consumers {
		cs := consumerStats{
			ConsumerName: c.name, AvailablePermits: max(c.permits, 0), UnackedMessages: c.unacked.Load(),
			MsgOutCounter: c.msgsOut.Load(), BytesOutCounter: c.bytesOut.Load(),
			BlockedOnUnacked: c.unacked.Load() >= maxUnackedPerConsumer,
			Address:          c.conn.peer, ConnectedSince: since(c.since), ClientVersion: c.conn.client,
		}
		cs.MsgRateOut, cs.MsgThroughputOut = c.rate.rates(now, cs.MsgOutCounter, cs.BytesOutCounter)
		ss.UnackedMessages += cs.UnackedMessages
		ss.Consumers = append(ss.Consumers, cs)
	}
	return ss
}

func (c adminAPI) adminStats(_ http.ResponseWriter, r *http.Request) (any, error) {
	tp, err := c.adminTopic(r)
	if err != nil {
		return nil, err
	}
	return tp.stats(), nil
}

// adminTopic is the existing topic a request's path names; a topic that
// does not exist is a 404, as Apache Pulsar answers.
func (c adminAPI) adminTopic(r *http.Request) (*topic, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	return c.existingTopic(t)
}

func (c adminAPI) existingTopic(t pulsarwire.Topic) (*topic, error) {
	tp, err := c.topicFor(t, false)
	if err != nil {
		return nil, herr(http.StatusNotFound, "Topic not found")
	}
	return tp, nil
}

// add sums a partition's stats into a.
func (a *topicStats) add(st topicStats) {
	a.MsgRateIn += st.MsgRateIn
	a.MsgThroughputIn += st.MsgThroughputIn
	a.MsgRateOut += st.MsgRateOut
	a.MsgThroughputOut += st.MsgThroughputOut
	a.MsgInCounter += st.MsgInCounter
	a.BytesInCounter += st.BytesInCounter
	a.MsgOutCounter += st.MsgOutCounter
	a.BytesOutCounter += st.BytesOutCounter
	a.StorageSize += st.StorageSize
	a.BacklogSize += st.BacklogSize
	a.AverageMsgSize = avgSize(a.MsgRateIn, a.MsgThroughputIn)
	a.Publishers = append(a.Publishers, st.Publishers...)
	for name, ss := range st.Subscriptions {
		x := a.Subscriptions[name]
		x.Type, x.IsDurable = ss.Type, ss.IsDurable
		x.MsgRateOut += ss.MsgRateOut
		x.MsgThroughputOut += ss.MsgThroughputOut
		x.MsgOutCounter += ss.MsgOutCounter
		x.BytesOutCounter += ss.BytesOutCounter
		x.MsgBacklog += ss.MsgBacklog
		x.BacklogSize += ss.BacklogSize
		x.BacklogNoDelayed += ss.BacklogNoDelayed
		x.UnackedMessages += ss.UnackedMessages
		x.Consumers = append(x.Consumers, ss.Consumers...)
		if x.Consumers == nil {
			x.Consumers = []consumerStats{}
		}
		a.Subscriptions[name] = x
	}
}

func (c adminAPI) adminPartitionedStats(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, ok := c.partitions(t.String())
	if !ok {
		return nil, herr(http.StatusNotFound, "Partitioned Topic not found")
	}
	agg := topicStats{Publishers: []publisherStats{}, Subscriptions: map[string]subscriptionStats{}, Replication: map[string]any{}, Deduplication: "Disabled"}
	parts := map[string]topicStats{}
	for i := 0; i < n; i++ {
		tp, err := c.topicFor(t.Partition(i), false)
		if err != nil {
			continue
		}
		st := tp.stats()
		parts[tp.name] = st
		agg.add(st)
	}
	out := map[string]any{}
	b, _ := json.Marshal(agg)
	json.Unmarshal(b, &out)
	out["metadata"] = partitionedMetadata{Partitions: n}
	if r.URL.Query().Get("perPartition") != "false" {
		out["partitions"] = parts
	}
	return out, nil
}

// ---------------------------------------------------------------- internal stats

type ledgerInfo struct {
	LedgerID int64 `json:"ledgerId"`
	Entries  int64 `json:"entries"`
	Size     int64 `json:"size"`
}

type cursorStats struct {
	MarkDeletePosition string `json:"markDeletePosition"`
	ReadPosition       string `json:"readPosition"`
	// Ranges acknowledged past the mark-delete position, in Pulsar's
	// form: "[(L:a..L:b],(L:c..L:d]]", each open below, closed above.
	IndividuallyDeleted string `json:"individuallyDeletedMessages"`
	// Entries from the first unacknowledged one to the end.
	EntriesSinceFirstNotAcked int64  `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	State                     string `json:"state"`
	Active                    bool   `json:"active"`
}

type internalStats struct {
	EntriesAddedCounter  int64                  `json:"entriesAddedCounter"`
	NumberOfEntries      int64                  `json:"numberOfEntries"`
	TotalSize            int64                  `json:"totalSize"`
	CurrentLedgerEntries int64                  `json:"currentLedgerEntries"`
	CurrentLedgerSize    int64                  `json:"currentLedgerSize"`
	LastConfirmedEntry   string                 `json:"lastConfirmedEntry"`
	State                string                 `json:"state"`
	Ledgers              []ledgerInfo           `json:"ledgers"`
	Cursors              map[string]cursorStats `json:"cursors"`
}

// pos is an entry position as Pulsar writes it, "ledger:entry"; entry -1
// is "before the first".
func pos(ledger uint64, entry int64) string { return fmt.Sprintf("%d:%d", ledger, entry) }

func (t *topic) internalStats() internalStats {
	first, next := t.log.First(), t.log.Next()
	size := t.log.Size()
	st := internalStats{
		EntriesAddedCounter: t.in.entries.Load(),
		NumberOfEntries:     int64(next - first),
		TotalSize:           size,
		LastConfirmedEntry:  pos(t.ledger, int64(next)-1),
		State:               "LedgerOpened",
		Cursors:             map[string]cursorStats{},
	}
	st.CurrentLedgerEntries, st.CurrentLedgerSize = st.NumberOfEntries, size
	st.Ledgers = []ledgerInfo{{LedgerID: int64(t.ledger), Entries: st.NumberOfEntries, Size: size}}
	for _, s := range t.subscriptions() {
		s.mu.Lock()
		cs := cursorStats{
			MarkDeletePosition:        pos(t.ledger, int64(s.markDelete)-1),
			ReadPosition:              pos(t.ledger, int64(max(s.readPos, s.markDelete))),
			EntriesSinceFirstNotAcked: int64(next) - int64(s.markDelete),
			State:                     "Open",
			Active:                    len(s.consumers) > 0,
		}
		var b strings.Builder
		b.WriteByte('[')
		for i, sp := range s.acked.s {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%s..%s]", pos(t.ledger, int64(sp.lo)-1), pos(t.ledger, int64(sp.hi)-1))
		}
		b.WriteByte(']')
		cs.IndividuallyDeleted = b.String()
		s.mu.Unlock()
		st.Cursors[s.name] = cs
	}
	return st
}

func (c adminAPI) adminInternalStats(_ http.ResponseWriter, r *http.Request) (any, error) {
	tp, err := c.adminTopic(r)
	if err != nil {
		return nil, err
	}
	return tp.internalStats(), nil
}

// counter counts what passes a point (published to a topic, dispatched
// to a subscription): entries, messages (a batch counts its messages, as
// Apache Pulsar's msgInCounter and msgOutCounter do) and bytes of the
// entries as stored (metadata and payload).
type counter struct {
	entries, msgs, bytes atomic.Int64
	rate                 meter
}

// add counts one entry of msgs messages and n bytes.
func (c *counter) add(msgs int32, n int) {
	c.entries.Add(1)
	c.msgs.Add(int64(msgs))
	c.bytes.Add(int64(n))
}

// rates returns the messages and bytes per second of late.
func (c *counter) rates(now time.Time) (float64, float64) {
	return c.rate.rates(now, c.msgs.Load(), c.bytes.Load())
}

// countOut counts an entry of msgs messages and n bytes dispatched by s;
// s.mu held.
func (s *subscription) countOut(msgs int32, n int) {
	s.out.add(msgs, n)
	s.t.out.add(msgs, n)
}

// meter turns running totals of messages and bytes into rates, lazily:
// the window starts at the first read.
type meter struct {
	mu            sync.Mutex
	since         time.Time // start of the current window
	msgs0, bytes0 int64     // the totals then
	msgRate       float64   // of the last full window
	byteRate      float64
}

func (m *meter) rates(now time.Time, msgs, bytes int64) (float64, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.since.IsZero() {
		m.since, m.msgs0, m.bytes0 = now, msgs, bytes
		return 0, 0
	}
	el := now.Sub(m.since)
	if el < minRateWindow {
		return m.msgRate, m.byteRate
	}
	mr := float64(msgs-m.msgs0) / el.Seconds()
	br := float64(bytes-m.bytes0) / el.Seconds()
	if el >= rateWindow {
		m.msgRate, m.byteRate = mr, br
		m.since, m.msgs0, m.bytes0 = now, msgs, bytes
	}
	return mr, br
}
