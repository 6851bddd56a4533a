package broker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// topic is a loaded topic (a partition is a topic of its own): its log,
// producers and subscriptions.
type topic struct {
	c         *Cluster
	name      string
	parsed    pulsarwire.Topic
	partition int32 // -1 when not a partition
	owner     int
	log       *store.Log
	ledger    uint64

	pubMu       sync.Mutex // orders appends and keeps publish times monotonic
	lastPublish int64

	mu        sync.Mutex
	producers map[*producer]struct{}
	subs      map[string]*subscription
	access    producerAccess // exclusive producers and the topic epoch (topic_access.go)
	schemas   [][]byte       // registered schema definitions (encoded pb.Schema), version = index
	unloaded  bool
	subList   atomic.Pointer[[]*subscription] // read by publish without the lock

	in, out counter // published; dispatched to any subscription

	txns txnBuffer  // its transactions (topic_txn.go)
	comp compaction // its compacted view (topic_compaction.go)
}

// errNotOwner: a producer or consumer reached a broker that does not own
// the topic (it looked up long ago, or ownership moved).
var errNotOwner = errors.New("topic is not served by this broker")

// topicNotFound: auto-creation is off and the topic was never created.
var errTopicNotFound = errors.New("topic not found")

const partitionsKey = "partitions/"

// partitions returns the partition count of a partitioned topic.
func (c *Cluster) partitions(name string) (int, bool) {
	v, ok, err := c.store.GetMeta(partitionsKey + name)
	if err != nil || !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, false
	}
	return n, true
}

func (c *Cluster) setPartitions(name string, n int) error {
	return c.store.PutMeta(partitionsKey+name, []byte(strconv.Itoa(n)))
}

// topicExists reports whether a topic's log exists, or it is a partition
// of an existing partitioned topic.
func (c *Cluster) topicExists(t pulsarwire.Topic) bool {
	name := t.String()
	c.mu.Lock()
	_, loaded := c.topics[name]
	c.mu.Unlock()
	if loaded || c.store.HasTopic(name) {
		return true
	}
	if i, base := t.PartitionIndex(); i >= 0 {
		if n, ok := c.partitions(base.String()); ok && i < n {
			return true
		}
	}
	return false
}

// topicFor returns the loaded topic, loading (and with create, creating)
// it. Only the owning broker may call it for clients.
func (c *Cluster) topicFor(t pulsarwire.Topic, create bool) (*topic, error) {
	name := t.String()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("broker is closing")
	}
	if tp := c.topics[name]; tp != nil {
		c.mu.Unlock()
		return tp, nil
	}
	c.mu.Unlock()
	if !c.topicExists(t) {
		if !create || c.opts.DisableTopicAutoCreation {
			return nil, errTopicNotFound
		}
	}
	// Opening a topic reads files: not under the cluster lock. Two loads
	// of one topic may race; the first to register wins, the store hands
	// both the same log.
	lg, err := c.store.Topic(name)
	if err != nil {
		return nil, fmt.Errorf("open topic %s: %w", name, err)
	}
	idx, _ := t.PartitionIndex()
	tp := &topic{
		c:         c,
		name:      name,
		parsed:    t,
		partition: int32(idx),
		owner:     c.OwnerOf(name),
		log:       lg,
		ledger:    lg.LedgerID(),
		producers: make(map[*producer]struct{}),
		subs:      make(map[string]*subscription),
	}
	if tp.access.epoch, err = c.loadEpoch(name); err != nil {
		return nil, err
	}
	tp.txns.init(tp)
	tp.txns.loadAborted()
	subs, schemas, err := tp.readState()
	if err != nil {
		return nil, err
	}
	if c.txns != nil {
		c.txns.restore(tp, subs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("broker is closing")
	}
	if other := c.topics[name]; other != nil {
		return other, nil
	}
	tp.subs, tp.schemas = subs, schemas
	for _, s := range subs {
		s.start()
	}
	tp.publishSubs()
	c.topics[name] = tp
	return tp, nil
}

// readState reads a topic's durable subscriptions and schemas.
func (t *topic) readState() (map[string]*subscription, [][]byte, error) {
	curs, err := t.log.Cursors()
	if err != nil {
		return nil, nil, fmt.Errorf("load cursors of %s: %w", t.name, err)
	}
	subs := make(map[string]*subscription, len(curs))
	for name, state := range curs {
		s, err := decodeCursor(t, name, state)
		if err != nil {
			t.c.log.Error("cursor unreadable; starting it at the end of the topic", "topic", t.name, "subscription", name, "err", err)
			s = newSubscription(t, name, true, pb.CommandSubscribe_Exclusive, t.log.Next())
		}
		subs[name] = s
	}
	var schemas [][]byte
	sch, err := t.c.store.ListMeta(schemaKey(t.name))
	if err == nil {
		for i := 0; ; i++ {
			v, ok := sch[schemaKey(t.name)+strconv.Itoa(i)]
			if !ok {
				break
			}
			schemas = append(schemas, v)
		}
	}
	return subs, schemas, nil
}

func schemaKey(topic string) string { return "schema/" + topic + "/" }

// publishSubs refreshes the lock-free list of subscriptions; t.mu held.
func (t *topic) publishSubs() {
	l := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		l = append(l, s)
	}
	t.subList.Store(&l)
	// Without a subscription nothing reads the tail as it is written; a
	// subscription made later reads the backlog from the files.
	t.log.CacheTail(len(l) > 0)
}

// publish writes an entry (a SEND's message section as received) and wakes
// the subscriptions. When the log syncs (store.Log.Syncs) the entry is
// not yet durable nor readable: the caller waits for store.Log.SyncTo, then
// calls wakeSubs.
func (t *topic) publish(entry []byte, publishTime int64, msgs int32) (uint64, error) {
	return t.publishIn(nil, entry, publishTime, msgs)
}

// publishIn is publish for an entry of transaction txn (nil: none): the
// transaction's first entry here is told to the coordinator first (see
// txnBuffer.joinLocked).
func (t *topic) publishIn(txn *pulsarwire.TxnID, entry []byte, publishTime int64, msgs int32) (uint64, error) {
	t.pubMu.Lock()
	if txn != nil {
		if err := t.txns.joinLocked(*txn); err != nil {
			t.pubMu.Unlock()
			return 0, err
		}
	}
	if publishTime < t.lastPublish {
		publishTime = t.lastPublish
	}
	var id uint64
	var err error
	if sum, ok := pulsarwire.EntryChecksum(entry); ok {
		// Checked by the read loop: the store derives its record's
		// checksum from it rather than reading the entry once more.
		id, err = t.log.WriteKnownSum(publishTime, entry, pulsarwire.EntryChecksumSkip, sum)
	} else {
		id, err = t.log.Write(publishTime, entry)
	}
	if err == nil {
		t.lastPublish = publishTime
	}
	t.pubMu.Unlock()
	if err != nil {
		return 0, err
	}
	t.in.add(max(msgs, 1), len(entry))
	if !t.log.Syncs() {
		t.wakeSubs()
	}
	return id, nil
}

// wakeSubs tells the subscriptions that new entries are readable.
func (t *topic) wakeSubs() {
	if l := t.subList.Load(); l != nil {
		for _, s := range *l {
			s.wakeup()
		}
	}
}

// unload stops the topic's subscriptions (saving cursors) and closes its
// producers and consumers with a CLOSE_* so clients look it up again.
// detached, when given, runs once everything is detached and the cursors
// are saved, before the clients are told: the cluster forgets the topic
// there, so a client coming back at once loads it afresh from the store.
func (t *topic) unload(detached func()) {
	t.mu.Lock()
	if t.unloaded {
		t.mu.Unlock()
		return
	}
	t.unloaded = true
	ps := make([]*producer, 0, len(t.producers)+len(t.access.waiting))
	for p := range t.producers {
		ps = append(ps, p)
	}
	ps = append(ps, t.access.waiting...)
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	var closedPs []*producer
	for _, p := range ps {
		if p.detach() {
			closedPs = append(closedPs, p)
		}
	}
	var closedCs []*consumer
	for _, s := range subs {
		s.mu.Lock()
		cs := slices.Clone(s.consumers)
		s.mu.Unlock()
		for _, c := range cs {
			c.detach()
		}
		closedCs = append(closedCs, cs...)
		s.stop()
		s.save()
	}
	if detached != nil {
		detached()
	}
	for _, p := range closedPs {
		p.tellClosed()
	}
	for _, c := range closedCs {
		c.tellClosed()
	}
}

// isUnloaded reports whether the topic was unloaded (or is being).
func (t *topic) isUnloaded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unloaded
}

// unloadTopic unloads one loaded topic (the admin API's unload); false
// when it is not loaded.
func (c *Cluster) unloadTopic(name string) bool {
	c.mu.Lock()
	tp := c.topics[name]
	c.mu.Unlock()
	if tp == nil {
		return false
	}
	tp.unload(func() {
		c.mu.Lock()
		if c.topics[name] == tp {
			delete(c.topics, name)
		}
		c.mu.Unlock()
	})
	return true
}

func (c *Cluster) unloadTopics(match func(*topic) bool) {
	c.mu.Lock()
	var ts []*topic
	for name, t := range c.topics {
		if match(t) {
			ts = append(ts, t)
			delete(c.topics, name)
		}
	}
	c.mu.Unlock()
	for _, t := range ts {
		t.unload(nil)
	}
}

// deleteTopic removes a topic and its data. Without force it refuses a
// topic with producers or consumers connected.
func (c *Cluster) deleteTopic(name string, force bool) error {
	c.mu.Lock()
	tp := c.topics[name]
	c.mu.Unlock()
	if tp != nil {
		if !force && tp.connected() {
			return errTopicBusy
		}
		c.mu.Lock()
		if c.topics[name] == tp {
			delete(c.topics, name)
		}
		c.mu.Unlock()
		tp.unload(nil)
	}
	held := c.heldBy(name)
	if err := c.store.DeleteTopic(name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if tp != nil {
				return nil
			}
			return errTopicNotFound
		}
		return err
	}
	c.freed(held)
	c.store.DeleteMeta(epochKey + name)
	if ks, err := c.store.ListMeta(schemaKey(name)); err == nil {
		for k := range ks {
			c.store.DeleteMeta(k)
		}
	}
	return nil
}

var errTopicBusy = errors.New("topic has active producers or consumers")

// heldBy is the memory a topic's messages take in a Memory store, 0 on
// disk (where only a bounded tail cache is in memory).
func (c *Cluster) heldBy(name string) int64 {
	if !c.opts.Memory || !c.store.HasTopic(name) {
		return 0
	}
	l, err := c.store.Topic(name)
	if err != nil {
		return 0
	}
	return l.Size()
}

func (t *topic) connected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.producers) > 0 {
		return true
	}
	for _, s := range t.subs {
		if s.consumerCount() > 0 {
			return true
		}
	}
	return false
}

// abandonAfter is how long a non-durable subscription kept after a seek
// waits for its reader to come back before it is dropped.
const abandonAfter = time.Minute

func (t *topic) flushCursors() {
	for _, s := range t.subscriptions() {
		s.save()
		t.dropIf(s, abandoned)
	}
}

// dropIf removes a subscription when cond, checked under the topic's and
// the subscription's locks, holds: a consumer arriving meanwhile either
// finds it or, once it is marked deleted, gets a retryable error. Only
// the call that takes it out of t.subs marks and stops it: one already
// gone is being torn down by whoever removed it. It reports whether it
// removed it.
func (t *topic) dropIf(s *subscription, cond func(*subscription) bool) bool {
	t.mu.Lock()
	s.mu.Lock()
	drop := t.subs[s.name] == s && cond(s)
	if drop {
		delete(t.subs, s.name)
		t.publishSubs()
		s.deleted = true
	}
	s.mu.Unlock()
	t.mu.Unlock()
	if drop {
		s.stop()
	}
	return drop
}

// unused: a subscription just created for a consumer that was refused,
// unless another consumer joined it meanwhile.
func unused(s *subscription) bool { return len(s.consumers) == 0 }

// emptied: a non-durable subscription whose last consumer left, unless a
// consumer arrived meanwhile or a seek keeps it for its reader.
func emptied(s *subscription) bool {
	return !s.durable && len(s.consumers) == 0 && !s.keepEmpty
}

// abandoned: a non-durable subscription kept after a seek whose reader
// did not come back.
func abandoned(s *subscription) bool {
	return !s.durable && s.keepEmpty && len(s.consumers) == 0 && time.Since(s.keptAt) > abandonAfter
}

func (t *topic) subscription(name string) *subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[name]
}

func (t *topic) subscriptions() []*subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		out = append(out, s)
	}
	return out
}

// trim drops entries no subscription needs (every subscription has
// acknowledged them, or the topic has none) that are older than
// Options.Retention, as Apache Pulsar without a retention policy does a
// ledger at a time (the store frees a segment at a time, memory at once).
// The recent ones stay so that a reset-cursor or seek to a recent time
// finds them.
func (t *topic) trim() {
	keep := t.c.opts.Retention
	if keep < 0 {
		return
	}
	lowest := t.log.Next()
	for _, s := range t.subscriptions() {
		lowest = min(lowest, s.lowWater())
	}
	// SeekTime below can only lower lowest; on a restart it indexes every
	// sealed segment, so skip it when there is nothing to trim anyway.
	if lowest <= t.log.First() {
		return
	}
	if recent, err := t.log.SeekTime(time.Now().Add(-keep).UnixMilli()); err == nil {
		lowest = min(lowest, recent)
	}
	if lowest > t.log.First() {
		before := t.log.Size()
		if err := t.log.Trim(lowest); err != nil && !errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrDeleted) {
			t.c.log.Warn("trim failed", "topic", t.name, "err", err)
		}
		t.c.freed(before - t.log.Size())
		t.txns.trimAborted(t.log.First())
	}
}

// listTopics lists a namespace's persistent topics as Apache Pulsar does
// for GET_TOPICS_OF_NAMESPACE: non-partitioned topics and every partition
// of each partitioned topic, never the partitioned topic's own name.
func (c *Cluster) listTopics(namespace string) []string {
	prefix := "persistent://" + namespace + "/"
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range c.store.Topics() {
		if strings.HasPrefix(n, prefix) {
			add(n)
		}
	}
	for base, n := range c.partitionedTopics(namespace) {
		for i := 0; i < n; i++ {
			add(base + pulsarwire.PartitionSuffix + strconv.Itoa(i))
		}
	}
	slices.Sort(out)
	return out
}

// partitionedTopics returns a namespace's partitioned topics and counts.
func (c *Cluster) partitionedTopics(namespace string) map[string]int {
	out := map[string]int{}
	ms, err := c.store.ListMeta(partitionsKey + "persistent://" + namespace + "/")
	if err != nil {
		return out
	}
	for k, v := range ms {
		n, err := strconv.Atoi(string(v))
		if err == nil {
			out[strings.TrimPrefix(k, partitionsKey)] = n
		}
	}
	return out
}

// clientTopic checks the topic a PRODUCER or SUBSCRIBE names: a valid,
// persistent topic this broker owns. Otherwise it returns the code and
// reason to refuse with.
func (cn *conn) clientTopic(topic string) (t pulsarwire.Topic, code pb.ServerError, reason string, ok bool) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return t, pb.ServerError_InvalidTopicName, err.Error(), false
	}
	if !t.Persistent {
		return t, pb.ServerError_NotAllowedError, "non-persistent topics are not supported by the streamrun broker", false
	}
	name := t.String()
	if err := cn.checkOwner(name); err != nil {
		return t, pb.ServerError_ServiceNotReady, fmt.Sprintf("Topic %s is not served by this broker (owner: %s)", name, cn.c.broker(cn.c.OwnerOf(name)).url()), false
	}
	return t, 0, "", true
}

// checkOwner reports whether broker srv may serve topic t to clients.
func (cn *conn) checkOwner(name string) error {
	if cn.c.OwnerOf(name) != cn.srv.index {
		return errNotOwner
	}
	return nil
}

// errorText is the reason put in an error reply: a server error's own
// message (the client prints the code itself), else the error's text.
func errorText(err error) string {
	var se *pulsarwire.ServerError
	if errors.As(err, &se) && se.Message != "" {
		return se.Message
	}
	return err.Error()
}

// errorCode maps an internal error to the server error a client gets.
func errorCode(err error) pb.ServerError {
	if code, ok := pulsarwire.ServerCode(err); ok {
		return code
	}
	switch {
	case errors.Is(err, errNotOwner):
		return pb.ServerError_ServiceNotReady
	case errors.Is(err, errTopicNotFound):
		return pb.ServerError_TopicNotFound
	case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrDeleted):
		return pb.ServerError_ServiceNotReady
	}
	return pb.ServerError_PersistenceError
}

// partitionsOf lists the topics behind a name: its partitions when it is
// partitioned, else itself.
func (c *Cluster) partitionsOf(t pulsarwire.Topic) []pulsarwire.Topic {
	if n, ok := c.partitions(t.String()); ok {
		out := make([]pulsarwire.Topic, n)
		for i := range out {
			out[i] = t.Partition(i)
		}
		return out
	}
	return []pulsarwire.Topic{t}
}
