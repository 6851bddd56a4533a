package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The transaction coordinator (Options.Transactions): it begins
// transactions, records what each touches (the topics it publishes to,
// the subscriptions it acknowledges on, with the entries it acknowledged),
// and ends them: commit or abort on every topic (a marker in its log) and
// subscription (the held acknowledgements applied or handed back), or the
// abort of one past its timeout.
//
// There is one coordinator, id 0, as Apache Pulsar standalone makes one
// partition of its coordinators' topic; the broker owning that
// partition's name serves it. A transaction's record is kept in the
// store's metadata (key txn/<id>) from its begin to its end, written
// before each answer that depends on it, so that after kill -9 an open
// transaction is open again (and aborted when its timeout passes, as
// Apache Pulsar does) and one whose commit or abort had begun is finished.
// Ids are reserved in blocks (txn/next) so that none is given twice.

// txnCoordinatorID is the one coordinator's id.
const txnCoordinatorID = 0

// txnIDBlock is how many transaction ids a write of txn/next reserves.
const txnIDBlock = 1000

// txnTimeoutCheck is how often the coordinator looks for transactions
// past their timeout.
const txnTimeoutCheck = 100 * time.Millisecond

const (
	txnKeyPrefix = "txn/"
	txnNextKey   = "txnnext"
)

// Apache Pulsar's messages for refused coordinator requests.
func txnNotFoundMessage(id pulsarwire.TxnID) string {
	return "The transaction with this txdID `" + id.String() + "`not found "
}

func txnCoordinatorNotFoundMessage(tc uint64) string {
	return "Transaction coordinator with id " + strconv.FormatUint(tc, 10) + " not found!"
}

func txnStatusMessage(id pulsarwire.TxnID, want, got txnStatus) string {
	return "Expect Txn `" + id.String() + "` to be in " + want.String() + " status but it is in " + got.String() + " status"
}

// txnStatus is where a transaction is; its text is Apache Pulsar's.
type txnStatus int

const (
	txnOpen txnStatus = iota
	txnCommitting
	txnAborting
)

func (s txnStatus) String() string {
	switch s {
	case txnCommitting:
		return "COMMITTING"
	case txnAborting:
		return "ABORTING"
	}
	return "OPEN"
}

// txnRecord is one transaction as the coordinator keeps and stores it.
type txnRecord struct {
	ID       uint64    `json:"id"`
	Status   txnStatus `json:"status"`
	OpenedAt int64     `json:"openedAt"` // unix ms
	Timeout  int64     `json:"timeout"`  // ms
	Owner    string    `json:"owner,omitempty"`
	// Topics it published to: the first entry it stored in each, -1 when
	// none yet (registered by ADD_PARTITION_TO_TXN only).
	Topics map[string]int64 `json:"topics,omitempty"`
	// Subs it acknowledged on, by topic and subscription name.
	Subs map[string]*txnSubAcks `json:"subs,omitempty"`

	// ended, made by an END_TXN that waits for the end under way, is
	// closed once finish forgot the record; under tc.mu.
	ended chan struct{}
}

// txnSubAcks is what a transaction acknowledged on one subscription.
type txnSubAcks struct {
	Topic string   `json:"topic"`
	Sub   string   `json:"sub"`
	Acks  []uint64 `json:"acks,omitempty"`
	// Cumulative, when set, is the entry up to which it acknowledged
	// cumulatively (+1, so that 0 means none).
	Cumulative uint64 `json:"cumulative,omitempty"`
}

func subKey(topic, sub string) string { return topic + "\x00" + sub }

func (r *txnRecord) txnID() pulsarwire.TxnID {
	return pulsarwire.TxnID{Most: txnCoordinatorID, Least: r.ID}
}

func (r *txnRecord) deadline() time.Time {
	return time.UnixMilli(r.OpenedAt + r.Timeout)
}

// txnCoordinator is the cluster's coordinator; its methods are safe for
// concurrent use.
type txnCoordinator struct {
	c *Cluster
	// saveMu orders the writes of records: each marshals the record as it
	// is when its turn comes, so a later write never carries an older
	// state.
	saveMu sync.Mutex

	started time.Time // when it recovered its records

	mu       sync.Mutex
	txns     map[uint64]*txnRecord
	next     uint64 // the next id to give
	reserved uint64 // ids below this are reserved in the store

	// endingOn, nil but in tests, runs when finish found the topic it
	// is about to end a transaction on (endOn).
	endingOn atomic.Pointer[func(topic string)]
}

// newTxnCoordinator loads the stored transactions. Those whose end had
// begun are finished by recover, once the brokers run.
func newTxnCoordinator(c *Cluster) (*txnCoordinator, error) {
	tc := &txnCoordinator{c: c, txns: map[uint64]*txnRecord{}, started: time.Now()}
	if v, ok, err := c.store.GetMeta(txnNextKey); err != nil {
		return nil, err
	} else if ok {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("transaction coordinator: next id %q: %w", v, err)
		}
		tc.next, tc.reserved = n, n
	}
	recs, err := c.store.ListMeta(txnKeyPrefix)
	if err != nil {
		return nil, err
	}
	for k, v := range recs {
		r := &txnRecord{}
		if err := json.Unmarshal(v, r); err != nil {
			c.log.Error("transaction record unreadable; dropped", "key", k, "err", err)
			c.store.DeleteMeta(k)
			continue
		}
		tc.txns[r.ID] = r
		tc.next = max(tc.next, r.ID+1)
	}
	if len(tc.txns) > 0 {
		c.log.Info("transactions recovered", "open", len(tc.txns))
	}
	return tc, nil
}

// run aborts transactions past their timeout until the cluster closes,
// after finishing those whose end had begun before a restart.
func (tc *txnCoordinator) run() {
	defer tc.c.wg.Done()
	tc.mu.Lock()
	var ending []*txnRecord
	for _, r := range tc.txns {
		if r.Status != txnOpen {
			ending = append(ending, r)
		}
	}
	tc.mu.Unlock()
	for _, r := range ending {
		tc.finish(r)
	}
	t := time.NewTicker(txnTimeoutCheck)
	defer t.Stop()
	for {
		select {
		case <-tc.c.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		tc.mu.Lock()
		var due []*txnRecord
		for _, r := range tc.txns {
			if r.Status == txnOpen && !now.Before(r.deadline()) {
				r.Status = txnAborting
				due = append(due, r)
			}
		}
		tc.mu.Unlock()
		for _, r := range due {
			tc.c.log.Info("transaction timed out; aborting it", "txn", r.txnID(), "timeout_ms", r.Timeout)
			if err := tc.save(r); err != nil {
				tc.c.log.Error("storing a transaction's abort failed", "txn", r.txnID(), "err", err)
			}
			tc.finish(r)
		}
	}
}

// save writes r; tc.mu not held (r's fields are not changed meanwhile:
// callers own the change they store).
func (tc *txnCoordinator) save(r *txnRecord) error {
	tc.saveMu.Lock()
	defer tc.saveMu.Unlock()
	tc.mu.Lock()
	if tc.txns[r.ID] != r {
		tc.mu.Unlock()
		return nil // ended meanwhile; its record is gone
	}
	b, err := json.Marshal(r)
	tc.mu.Unlock()
	if err != nil {
		return err
	}
	return tc.c.store.PutMeta(txnKeyPrefix+strconv.FormatUint(r.ID, 10), b)
}

// begin starts a transaction of owner with timeout ms.
func (tc *txnCoordinator) begin(owner string, timeout uint64) (pulsarwire.TxnID, error) {
	tc.mu.Lock()
	if tc.next >= tc.reserved {
		upTo := tc.next + txnIDBlock
		if err := tc.c.store.PutMeta(txnNextKey, []byte(strconv.FormatUint(upTo, 10))); err != nil {
			tc.mu.Unlock()
			return pulsarwire.TxnID{}, err
		}
		tc.reserved = upTo
	}
	r := &txnRecord{ID: tc.next, OpenedAt: time.Now().UnixMilli(), Timeout: int64(timeout), Owner: owner}
	tc.next++
	tc.txns[r.ID] = r
	tc.mu.Unlock()
	if err := tc.save(r); err != nil {
		tc.mu.Lock()
		delete(tc.txns, r.ID)
		tc.mu.Unlock()
		return pulsarwire.TxnID{}, err
	}
	return r.txnID(), nil
}

// errTxn is a refusal with Apache Pulsar's code and message.
type errTxn struct {
	code pb.ServerError
	msg  string
}

func (e *errTxn) Error() string { return e.msg }

func txnNotFound(id pulsarwire.TxnID) error {
	return &errTxn{pb.ServerError_TransactionNotFound, txnNotFoundMessage(id)}
}

// open returns the open transaction id for a request of principal: not
// found when there is none, or when it is another's (Apache Pulsar says
// "neither the owner ... nor a super user" then, with TransactionNotFound
// too); tc.mu held.
func (tc *txnCoordinator) openLocked(id pulsarwire.TxnID, principal string) (*txnRecord, error) {
	if id.Most != txnCoordinatorID {
		return nil, &errTxn{pb.ServerError_TransactionCoordinatorNotFound, txnCoordinatorNotFoundMessage(id.Most)}
	}
	r := tc.txns[id.Least]
	if r == nil {
		return nil, txnNotFound(id)
	}
	if r.Owner != principal && !(tc.c.authzOn() && tc.c.superUser(principal)) {
		return nil, &errTxn{pb.ServerError_TransactionNotFound,
			fmt.Sprintf("Client (%s) is neither the owner of the transaction %s nor a super user", principal, id)}
	}
	if r.Status != txnOpen {
		return nil, &errTxn{pb.ServerError_InvalidTxnStatus, txnStatusMessage(id, txnOpen, r.Status)}
	}
	return r, nil
}

// addTopics registers topics the transaction publishes to.
func (tc *txnCoordinator) addTopics(id pulsarwire.TxnID, principal string, topics []string) error {
	tc.mu.Lock()
	r, err := tc.openLocked(id, principal)
	if err != nil {
		tc.mu.Unlock()
		return err
	}
	changed := false
	for _, t := range topics {
		if r.Topics == nil {
			r.Topics = map[string]int64{}
		}
		if _, ok := r.Topics[t]; !ok {
			r.Topics[t] = -1
			changed = true
		}
	}
	tc.mu.Unlock()
	if !changed {
		return nil
	}
	return tc.save(r)
}

// addSubs registers subscriptions the transaction acknowledges on.
func (tc *txnCoordinator) addSubs(id pulsarwire.TxnID, principal string, subs []*pb.Subscription) error {
	tc.mu.Lock()
	r, err := tc.openLocked(id, principal)
	if err != nil {
		tc.mu.Unlock()
		return err
	}
	changed := false
	for _, s := range subs {
		if r.addSubLocked(s.GetTopic(), s.GetSubscription()) {
			changed = true
		}
	}
	tc.mu.Unlock()
	if !changed {
		return nil
	}
	return tc.save(r)
}

func (r *txnRecord) addSubLocked(topic, sub string) bool {
	if r.Subs == nil {
		r.Subs = map[string]*txnSubAcks{}
	}
	k := subKey(topic, sub)
	if r.Subs[k] != nil {
		return false
	}
	r.Subs[k] = &txnSubAcks{Topic: topic, Sub: sub}
	return true
}

// published notes that the transaction stores its first entry in topic
// at first (the topic's next entry; its publish lock held, so that the
// entry goes in only after this and before any end of the transaction
// there), registering the topic if it was not. It refuses a transaction
// that is not open: its end has begun, or it never was.
func (tc *txnCoordinator) published(id pulsarwire.TxnID, topic string, first uint64) error {
	tc.mu.Lock()
	r, err := tc.openAnyLocked(id)
	if err != nil {
		tc.mu.Unlock()
		return err
	}
	if r.Topics == nil {
		r.Topics = map[string]int64{}
	}
	r.Topics[topic] = int64(first)
	tc.mu.Unlock()
	return tc.save(r)
}

// openAnyLocked is openLocked without the owner check: a SEND or ACK
// names a transaction its client was given; tc.mu held.
func (tc *txnCoordinator) openAnyLocked(id pulsarwire.TxnID) (*txnRecord, error) {
	if id.Most != txnCoordinatorID {
		return nil, txnNotFound(id)
	}
	r := tc.txns[id.Least]
	if r == nil {
		return nil, txnNotFound(id)
	}
	if r.Status != txnOpen {
		return nil, &errTxn{pb.ServerError_InvalidTxnStatus, txnStatusMessage(id, txnOpen, r.Status)}
	}
	return r, nil
}

// acked records entries (or, cumulative, everything up to one) a
// transaction acknowledged on a subscription, registering it if it was
// not; the caller holds the subscription's lock, so that its end there
// comes after.
func (tc *txnCoordinator) acked(id pulsarwire.TxnID, topic, sub string, ids []uint64, cumulative bool) error {
	tc.mu.Lock()
	r, err := tc.openAnyLocked(id)
	if err != nil {
		tc.mu.Unlock()
		return err
	}
	r.addSubLocked(topic, sub)
	sa := r.Subs[subKey(topic, sub)]
	if cumulative {
		sa.Cumulative = max(sa.Cumulative, ids[0]+1)
	} else {
		sa.Acks = append(sa.Acks, ids...)
	}
	tc.mu.Unlock()
	return tc.save(r)
}

// end commits or aborts a transaction at a client's request. One whose
// end is under way (a client asking again after the first answer was
// lost, the timeout's abort) is answered as Apache Pulsar's coordinator
// answers, which keeps it until its end is done: the same end waits for
// it and succeeds, the other is refused with InvalidTxnStatus. Once done
// it is forgotten: TransactionNotFound, whatever it came to.
func (tc *txnCoordinator) end(id pulsarwire.TxnID, principal string, action pb.TxnAction) error {
	want := txnCommitting
	if action == pb.TxnAction_ABORT {
		want = txnAborting
	}
	tc.mu.Lock()
	r, err := tc.openLocked(id, principal)
	if err != nil {
		var e *errTxn
		if errors.As(err, &e) && e.code == pb.ServerError_InvalidTxnStatus {
			r = tc.txns[id.Least]
			if r.Status != want {
				err = &errTxn{pb.ServerError_InvalidTxnStatus, txnStatusMessage(id, want, r.Status)}
			} else {
				if r.ended == nil {
					r.ended = make(chan struct{})
				}
				ended := r.ended
				tc.mu.Unlock()
				select {
				case <-ended:
					tc.mu.Lock()
					_, again := tc.txns[id.Least]
					tc.mu.Unlock()
					if again {
						// Open again: storing the first end failed.
						return &errTxn{pb.ServerError_UnknownError, "ending transaction " + id.String() + " failed; it is open"}
					}
					return nil
				case <-tc.c.ctx.Done():
					return &errTxn{pb.ServerError_ServiceNotReady, "the broker is closing"}
				}
			}
		}
		tc.mu.Unlock()
		return err
	}
	r.Status = want
	tc.mu.Unlock()
	if err := tc.save(r); err != nil {
		tc.mu.Lock()
		r.Status = txnOpen
		if r.ended != nil {
			close(r.ended) // the waiters find it open again
			r.ended = nil
		}
		tc.mu.Unlock()
		return err
	}
	tc.finish(r)
	return nil
}

// finish ends r, whose status says how, on every topic and subscription
// it touched, then forgets it. It is safe to repeat after a restart: a
// second marker changes nothing, acknowledgements apply once.
func (tc *txnCoordinator) finish(r *txnRecord) {
	tc.mu.Lock()
	commit := r.Status == txnCommitting
	id := r.txnID()
	topics := make(map[string]int64, len(r.Topics))
	for t, first := range r.Topics {
		topics[t] = first
	}
	subs := make([]txnSubAcks, 0, len(r.Subs))
	for _, sa := range r.Subs {
		subs = append(subs, txnSubAcks{Topic: sa.Topic, Sub: sa.Sub, Acks: slices.Clone(sa.Acks), Cumulative: sa.Cumulative})
	}
	tc.mu.Unlock()
	for name, first := range topics {
		if first < 0 {
			continue // registered, never published to
		}
		tc.endOn(id, name, func(t *topic) { t.endTxn(id, commit) })
	}
	for _, sa := range subs {
		tc.endOn(id, sa.Topic, func(t *topic) {
			if s := t.subscription(sa.Sub); s != nil {
				s.endTxn(id, commit, sa)
			}
		})
	}
	tc.saveMu.Lock()
	tc.mu.Lock()
	delete(tc.txns, r.ID)
	if r.ended != nil {
		close(r.ended)
		r.ended = nil
	}
	tc.mu.Unlock()
	err := tc.c.store.DeleteMeta(txnKeyPrefix + strconv.FormatUint(r.ID, 10))
	tc.saveMu.Unlock()
	if err != nil {
		tc.c.log.Error("forgetting an ended transaction failed", "txn", id, "err", err)
	}
}

// endOn runs end (a transaction's end there) on topic name as it is
// loaded, and again on the copy loaded next when that one was unloaded
// meanwhile: the end would have applied to a copy nobody reads, while
// the new copy holds what restore gave it (the record is not forgotten
// yet) and would hold it for good. An unload that begins after end
// saves what end did.
func (tc *txnCoordinator) endOn(id pulsarwire.TxnID, name string, end func(*topic)) {
	for {
		t, err := tc.c.loadedTopic(name)
		if err != nil {
			tc.c.log.Error("ending a transaction on a topic failed", "txn", id, "topic", name, "err", err)
			return
		}
		if t == nil {
			return
		}
		if f := tc.endingOn.Load(); f != nil {
			(*f)(name)
		}
		end(t)
		if !t.isUnloaded() {
			return
		}
	}
}

// restore gives a topic being loaded (not yet published, its
// subscriptions not started) what the transactions not yet ended left in
// it: the first entry each published there (the topic's transaction
// buffer), the entries each acknowledged on its subscriptions. Those
// whose end had begun are held too, until finish ends them there.
func (tc *txnCoordinator) restore(t *topic, subs map[string]*subscription) {
	type acks struct {
		id pulsarwire.TxnID
		sa txnSubAcks
	}
	var held []acks
	tc.mu.Lock()
	for _, r := range tc.txns {
		if first, ok := r.Topics[t.name]; ok && first >= 0 {
			t.txns.ongoing[r.txnID()] = uint64(first)
		}
		for _, sa := range r.Subs {
			if sa.Topic == t.name {
				held = append(held, acks{r.txnID(), txnSubAcks{Topic: sa.Topic, Sub: sa.Sub, Acks: slices.Clone(sa.Acks), Cumulative: sa.Cumulative}})
			}
		}
	}
	tc.mu.Unlock()
	t.txns.limitChanged()
	for _, h := range held {
		if s := subs[h.sa.Sub]; s != nil {
			s.restoreTxnAcks(h.id, &h.sa)
		}
	}
}

// stats is the coordinator's part of the admin API's coordinator stats.
func (tc *txnCoordinator) stats() (last uint64, lowWater uint64, ongoing int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.next > 0 {
		last = tc.next - 1
	}
	oldest := uint64(0)
	for id := range tc.txns {
		if ongoing == 0 || id < oldest {
			oldest = id
		}
		ongoing++
	}
	if ongoing > 0 && oldest > 0 {
		lowWater = oldest - 1
	}
	return last, lowWater, ongoing
}

// metadata is a transaction as the admin API shows it; false when the
// coordinator does not know it.
func (tc *txnCoordinator) metadata(id pulsarwire.TxnID) (txnMetadata, bool) {
	if id.Most != txnCoordinatorID {
		return txnMetadata{}, false
	}
	tc.mu.Lock()
	r := tc.txns[id.Least]
	var cp txnRecord
	if r != nil {
		cp = r.copyLocked()
	}
	tc.mu.Unlock()
	if r == nil {
		return txnMetadata{}, false
	}
	return cp.metadata(tc.c), true
}

// slow lists the transactions opened longer than d ago.
func (tc *txnCoordinator) slow(d time.Duration) map[string]txnMetadata {
	cutoff := time.Now().Add(-d).UnixMilli()
	var old []txnRecord
	tc.mu.Lock()
	for _, r := range tc.txns {
		if r.OpenedAt <= cutoff {
			old = append(old, r.copyLocked())
		}
	}
	tc.mu.Unlock()
	out := map[string]txnMetadata{}
	for _, r := range old {
		out[r.txnID().String()] = r.metadata(tc.c)
	}
	return out
}

// copyLocked is a copy of r for reading without tc.mu; tc.mu held.
func (r *txnRecord) copyLocked() txnRecord {
	cp := *r
	cp.Topics = maps.Clone(r.Topics)
	cp.Subs = make(map[string]*txnSubAcks, len(r.Subs))
	for k, sa := range r.Subs {
		c := *sa
		c.Acks = slices.Clone(sa.Acks)
		cp.Subs[k] = &c
	}
	return cp
}

// txnMetadata is Apache Pulsar's TransactionMetadata in its JSON form.
type txnMetadata struct {
	TxnID              string                                  `json:"txnId"`
	Status             string                                  `json:"status"`
	OpenTimestamp      int64                                   `json:"openTimestamp"`
	TimeoutAt          int64                                   `json:"timeoutAt"`
	ProducedPartitions map[string]txnInBuffer                  `json:"producedPartitions"`
	AckedPartitions    map[string]map[string]map[string]string `json:"ackedPartitions"`
}

// txnInBuffer is a transaction's state in one topic's buffer.
type txnInBuffer struct {
	StartPosition string `json:"startPosition"`
	Aborted       bool   `json:"aborted"`
}

func (r *txnRecord) metadata(c *Cluster) txnMetadata {
	m := txnMetadata{TxnID: r.txnID().String(), Status: r.Status.String(), OpenTimestamp: r.OpenedAt, TimeoutAt: r.Timeout,
		ProducedPartitions: map[string]txnInBuffer{}, AckedPartitions: map[string]map[string]map[string]string{}}
	for t, first := range r.Topics {
		start := "-1:-1"
		if first >= 0 {
			start = strconv.FormatUint(c.ledgerOf(t), 10) + ":" + strconv.FormatInt(first, 10)
		}
		m.ProducedPartitions[t] = txnInBuffer{StartPosition: start}
	}
	for _, sa := range r.Subs {
		if m.AckedPartitions[sa.Topic] == nil {
			m.AckedPartitions[sa.Topic] = map[string]map[string]string{}
		}
		m.AckedPartitions[sa.Topic][sa.Sub] = map[string]string{}
	}
	return m
}

// loadedTopic returns topic name, loading it when it exists; nil, nil
// when it does not (a transaction that registered a topic never made).
func (c *Cluster) loadedTopic(name string) (*topic, error) {
	t, err := pulsarwire.ParseTopic(name)
	if err != nil {
		return nil, err
	}
	tp, err := c.topicFor(t, false)
	if errors.Is(err, errTopicNotFound) {
		return nil, nil
	}
	return tp, err
}

// ledgerOf is a topic's ledger id (its store incarnation), 0 when it is
// not loaded.
func (c *Cluster) ledgerOf(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[name]; t != nil {
		return t.ledger
	}
	return 0
}
