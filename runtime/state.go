package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// keyedState is a pipeline's keyed state (pipelines.State): the value of
// every key, held in memory up to a bound and spilled to disk past it
// (state_store.go), read back from the changelog topic when the
// pipeline opens, sent with each batch for the batch's keys, changed by
// the handler's answers and written to the changelog with the message
// that changed it (settle), before that message is acknowledged.
//
// A change is applied here when the answer comes, before it is settled,
// so that the next batch of its key (which the ordered subscription the
// state needs sends to the same worker, after this one's answer) sees
// it. Should its settling fail (the changelog or another output not
// published), the memory would be ahead of the changelog while the
// message comes again: the pipeline fails instead (changeLost), and a
// restart reads the changelog back.
type keyedState struct {
	topic string
	ttl   time.Duration
	log   *slog.Logger

	mu   sync.Mutex
	vals *stateStore // in memory up to a bound, the rest spilled (state_store.go)
	// seen is entries' set of the keys of a batch when a stamp does not
	// tell (see entries), kept from call to call (under mu) rather than
	// made for each.
	seen map[string]struct{}
	// stamp numbers entries' calls: a value sent in this call has it
	// (cachedValue.stamp), so that a key twice in a batch is sent once.
	stamp uint64
	// spare are arrays entries made that their calls are done with
	// (recycle), for entries to fill again.
	spare [][]plugin.StateEntry
	// eo: the pipeline commits in transactions (guarantee exactly_once),
	// and pending holds, by key and in the order they were made, the
	// changes applied here whose transaction has not committed yet, each
	// with the value it replaced, so that they can be taken back
	// (state_exactly.go). Nil otherwise.
	eo      bool
	pending map[string][]*pendingChange
	// txnWritten: the changelog is written in transactions (exactly_once;
	// a window pipeline's too): read connects to the transaction
	// coordinators first (connectCoordinators).
	txnWritten bool
	// lost is told that the memory holds a change the changelog will
	// not have and that cannot be taken back (broken); the pipeline
	// fails then, and a restart reads the changelog back. Nil: logged
	// only.
	lost func(error)

	// held are the messages in the host's hands, and those acknowledged
	// in the last heldAfterAck, by id (see admit; state_held.go).
	heldMu sync.Mutex
	held   *stateHeld
	swept  time.Time
	// redeliverUntil is until when (Unix nanoseconds) a redelivery asked
	// for by a retry may still bring copies: acknowledged ids are only
	// remembered until then, so that a pipeline without retries keeps
	// only the messages in hand.
	redeliverUntil atomic.Int64
}

// retried is told that a message is handed back for a redelivery after
// delay: on Exclusive that redelivers every unacknowledged message.
func (s *keyedState) retried(delay time.Duration) {
	until := time.Now().Add(delay + heldAfterAck).UnixNano()
	for {
		cur := s.redeliverUntil.Load()
		if cur >= until || s.redeliverUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// heldAfterAck is how long an acknowledged message's id is remembered:
// well past the time a redelivery asked for before its acknowledgement
// reached the broker takes to arrive.
const heldAfterAck = time.Minute

// admit says, for each message of ms, whether it may be handled
// (ok[i]): not when it is a copy of a message the host holds, or
// acknowledged a moment ago while a retry's redelivery may still bring
// copies. On Exclusive, a
// retry asks the broker for every unacknowledged message again, in order
// (subscribe's Nack), and that includes messages the host has answered
// and changed the state for, whose acknowledgements wait for the
// changelog's receipts: handled again, their changes would be applied
// twice. acked[i] says the original was acknowledged (the copy can be
// acknowledged too: the same id). A received batch is taken under one
// lock and one reading of the clock: taken message by message, the lock
// (contended by the receipts' leave) and the clock were the largest part
// of keyed state's cost in BenchmarkKeyedStateCounter
// (docs/benchmarks/keyed-state.md).
func (s *keyedState) admit(ms []*subscribe.Message, ok, acked []bool) {
	now := time.Now()
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if now.Sub(s.swept) > heldAfterAck {
		s.held.sweep(func(h *heldMessage) bool { return !h.at.IsZero() && now.Sub(h.at) > heldAfterAck })
		s.swept = now
	}
	for i, m := range ms {
		ok[i], acked[i] = s.admitLocked(m)
	}
}

// admitLocked is admit for one message; the caller holds heldMu.
func (s *keyedState) admitLocked(m *subscribe.Message) (ok, acked bool) {
	k := retryKeyOf(m)
	if h := s.held.find(k); h != nil {
		// Under exactly_once, a held message delivered again after its
		// consumer asked for everything again (an abort, a lost
		// connection) is handed back untouched (committer.join) unless
		// it already went into a transaction: its copy is the one to
		// handle.
		if !s.eo || !h.at.IsZero() || h.joined || !h.m.Superseded() {
			return false, !h.at.IsZero()
		}
		*h = heldMessage{m: m}
		return true, false
	}
	s.held.put(k, heldMessage{m: m})
	return true, false
}

// heldMessage is a message in the host's hands (at zero), or one
// acknowledged at at.
type heldMessage struct {
	m  *subscribe.Message
	at time.Time
	// joined: it went into a transaction (exactly_once), whose end
	// decides its fate; a copy of it is left out meanwhile.
	joined bool
}

// leave is told that m was settled: acknowledged (acked), or not (a
// retry or a hand-back, after which it comes again and is handled).
func (s *keyedState) leave(m *subscribe.Message, acked bool) {
	k := retryKeyOf(m)
	var now time.Time
	if acked {
		if until := s.redeliverUntil.Load(); until != 0 {
			if now = time.Now(); now.UnixNano() >= until {
				now = time.Time{}
			}
		}
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	h := s.held.find(k)
	if h == nil || h.m != m {
		return // its copy took its place (admit)
	}
	if !now.IsZero() {
		h.at = now
		return
	}
	s.held.remove(k, h)
}

// stateValue is a key's value and when it was last changed. key is the
// map's key, held in memory of its own: the keys a change names point
// into the plugin's answer frame, and a map assignment replaces an
// equal string key with the new one, so a value stored under that
// string would keep the whole frame alive for as long as the key lives.
type stateValue struct {
	key string
	v   []byte
	at  time.Time
}

// PropertyStateFence marks the message a pipeline writes to its changelog
// when it reads it back at start: reading stops at it, having read every
// change written before. It has no key, so compaction drops it.
const PropertyStateFence = "streamrun-state-fence"

// newKeyedState makes a pipeline's keyed state; eo: the pipeline commits
// in transactions. Its values are held in memory up to cache bytes (0:
// no bound), the rest spilled to a file in dir.
func newKeyedState(topic string, ttl time.Duration, eo bool, cache int64, dir string, log *slog.Logger) *keyedState {
	s := &keyedState{topic: topic, ttl: ttl, log: log, vals: newStateStore(cache, dir, log), seen: map[string]struct{}{}, held: newStateHeld(), eo: eo, txnWritten: eo}
	if eo {
		s.pending = map[string][]*pendingChange{}
	}
	return s
}

// keyOf is the key the handler is given for it.
func keyOf(it *item) string {
	if it.sm != nil {
		return it.sm.Key
	}
	return it.m.Key
}

// entries are the values of the distinct keys of items that have one. It
// fails when a value cannot be read from the spill: the batch then
// fails (stateFailed), its handler not called.
func (s *keyedState) entries(items []*item) ([]plugin.StateEntry, error) {
	s.mu.Lock()
	defer s.unlock()
	var out []plugin.StateEntry
	if n := len(s.spare); n > 0 {
		out, s.spare = s.spare[n-1], s.spare[:n-1]
	}
	if cap(out) < len(items) {
		out = make([]plugin.StateEntry, 0, len(items))
	}
	seen := s.seen
	clear(seen)
	s.stamp++
	var now time.Time
	if s.ttl > 0 {
		now = time.Now()
	}
	// A key twice in the batch is sent once: told by its entry's stamp,
	// or by seen under exactly_once (taking back what was superseded
	// changes the entry) and once something was evicted during the call
	// (a key met before may be read back from the spill as a new entry,
	// without the stamp).
	gen, useSeen := s.vals.gen, s.eo
	for _, it := range items {
		it.entry = nil
		k := keyOf(it)
		if k == "" {
			continue
		}
		if !useSeen && s.vals.gen != gen {
			for _, e := range out {
				seen[e.Key] = struct{}{}
			}
			useSeen = true
		}
		if useSeen {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		}
		if s.eo {
			s.dropSuperseded(k)
		}
		// The entry stays with the item for apply, which finds it there
		// rather than looking the key up again: keys come back seldom
		// (10 000 in turn in BenchmarkKeyedStateCounter), so a lookup
		// is a miss in the CPU's cache, the largest part of keyed
		// state's host cost (docs/benchmarks/keyed-state.md).
		c, mem, err := s.vals.entry(k)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		if mem {
			it.entry, it.entryGen = c, s.vals.gen
		}
		if c.stamp == s.stamp || c.gone || s.expired(c.stateValue, now) {
			continue
		}
		c.stamp = s.stamp
		out = append(out, plugin.StateEntry{Key: k, Value: c.v})
	}
	if len(out) == 0 {
		s.keepSpare(out)
		return nil, nil
	}
	return out, nil
}

// maxSpareEntries bounds keyedState.spare: as many as a worker has
// batches out at once, and a few more.
const maxSpareEntries = 8

// recycle takes back es, from entries, once the call it went with has
// its answer (the handler is done with it): a new array for every
// batch's values was a sixth of entries' time in
// BenchmarkKeyedStateCounter (docs/benchmarks/keyed-state.md). Not after
// a call that failed: a handler in the host's process that did not
// answer in time may still be reading it.
func (s *keyedState) recycle(es []plugin.StateEntry) {
	if cap(es) == 0 {
		return
	}
	clear(es) // no value kept alive by it
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepSpare(es)
}

// keepSpare keeps es for entries, up to maxSpareEntries (the caller
// holds mu).
func (s *keyedState) keepSpare(es []plugin.StateEntry) {
	if len(s.spare) < maxSpareEntries {
		s.spare = append(s.spare, es[:0])
	}
}

// stateFailed is the answer to items whose keys' values could not be
// read (err): every message is retried, with err as the reason, and the
// handler is not called. The failure is the host's, not the handler's:
// its instance is not counted as crashed.
func stateFailed(items []*item, err error) []plugin.Result {
	res := make([]plugin.Result, len(items))
	for i := range res {
		res[i] = plugin.Result{Outcome: plugin.OutcomeRetry, Reason: err.Error()}
	}
	return res
}

func (s *keyedState) expired(sv stateValue, now time.Time) bool {
	return s.ttl > 0 && now.Sub(sv.at) > s.ttl
}

// apply keeps the changes of the acknowledged answers in res (those of
// items), copied: the answer's bytes are the plugin's frame. An answer
// whose change cannot be kept (the spill cannot be read) is turned into
// a retry with the reason, and so are the later answers of its key in
// the batch, made on that change.
func (s *keyedState) apply(items []*item, res []plugin.Result) {
	s.mu.Lock()
	defer s.unlock()
	now := time.Now()
	// refused are the keys of this batch with a change not applied (its
	// message was superseded, or the spill could not be read), with why:
	// the handler saw that change when it answered the key's later
	// messages, so they are retried rather than acknowledged on a value
	// that does not exist.
	var refused map[string]string
	refuse := func(k, why string) {
		if refused == nil {
			refused = map[string]string{}
		}
		refused[k] = why
	}
	for i := range res {
		r := &res[i]
		if r.Outcome == plugin.OutcomeAck && refused != nil {
			if why, ok := refused[keyOf(items[i])]; ok {
				if !items[i].m.Superseded() {
					*r = plugin.Result{Outcome: plugin.OutcomeRetry, Reason: fmt.Sprintf("state: an earlier message of key %q in the batch "+
						"%s", keyOf(items[i]), why)}
				}
				continue
			}
		}
		if r.Outcome != plugin.OutcomeAck || r.State == nil {
			continue
		}
		k := r.State.Key
		if s.eo {
			ok, err := s.track(items[i], k)
			if err != nil {
				*r = plugin.Result{Outcome: plugin.OutcomeRetry, Reason: err.Error()}
				refuse(k, "could not have its change kept ("+err.Error()+")")
				continue
			}
			if !ok {
				refuse(k, "was delivered again, so its change was not kept")
				continue
			}
		}
		if c := items[i].entry; c != nil && items[i].entryGen == s.vals.gen && !r.State.Delete && len(r.State.Value) > 0 && c.key == k {
			// Still memory's entry for the key (entries): no lookup.
			s.vals.update(c, r.State.Value, now, !s.eo)
			continue
		}
		if err := s.set(k, r.State.Value, r.State.Delete, now); err != nil {
			if s.eo {
				s.untrack(items[i])
			}
			*r = plugin.Result{Outcome: plugin.OutcomeRetry, Reason: err.Error()}
			refuse(k, "could not have its change kept ("+err.Error()+")")
		}
	}
}

// set changes key k's value (the caller holds mu); v is copied. It fails,
// changing nothing, when the key's value on disk cannot be read.
func (s *keyedState) set(k string, v []byte, del bool, at time.Time) error {
	if del || len(v) == 0 {
		return s.vals.del(k)
	}
	// Into the old value's array, but for exactly_once: nothing else
	// holds it once the batch that read it has its answer (a handler
	// keeps no value past its call), and a new one for every change was
	// the host's largest allocation in BenchmarkKeyedStateCounter. Under
	// exactly_once the old value is what a rollback puts back
	// (pendingChange), so it stays as it is.
	return s.vals.put(k, v, at, !s.eo)
}

// broken says that the values in memory are no longer those of the
// changelog, for err (the caller holds mu).
func (s *keyedState) broken(err error) {
	s.log.Error("state: the values in memory differ from the changelog's", "changelog", s.topic, "err", err)
	if s.lost != nil {
		s.lost(err)
	}
}

// unlock releases mu, and the spill's read transaction with it.
func (s *keyedState) unlock() {
	s.vals.release()
	s.mu.Unlock()
}

// close removes the spill: the pipeline stops.
func (s *keyedState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals.close()
}

// Len is how many keys have a value.
func (s *keyedState) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals.n
}

// changelogMessage is the changelog's record of change c: the key, and
// the new value as payload (empty: removed).
func changelogMessage(c *plugin.StateChange) pool.Message {
	if c.Delete {
		return pool.Message{Key: c.Key}
	}
	return pool.Message{Key: c.Key, Payload: c.Value}
}

// stateBatch is a call's batch with its keys' values (host.StateBatch).
type stateBatch struct {
	callBatch
	state []plugin.StateEntry
}

func (b stateBatch) State() []plugin.StateEntry { return b.state }

// restore reads the changelog into memory: every change from its start
// (its compacted view first, once the broker has compacted it),
// through a subscription of its own (sub, Exclusive, rewound to the
// earliest message at each start and never acknowledged, so that it
// also keeps the changelog from being trimmed), up to a fence this
// restore writes first, so that every change written before is read.
func (s *keyedState) restore(ctx context.Context, client *pool.Client, sub string) error {
	return s.read(ctx, client, sub, false)
}

// read is restore; with drop, the subscription is removed at the end
// (one made only to look).
func (s *keyedState) read(ctx context.Context, client *pool.Client, sub string, drop bool) error {
	t0 := time.Now()
	fence := make([]byte, 8)
	_, _ = rand.Read(fence)
	id := hex.EncodeToString(fence)
	cons, err := subscribe.New(ctx, client, subscribe.Options{
		Topics: []string{s.topic}, Subscription: sub, Type: subscribe.Exclusive,
		InitialPosition: subscribe.Earliest, Rewind: subscribe.AtEarliest(),
		// Once compacted, the last value of each key and what came after.
		ReadCompacted: true,
	})
	if err != nil {
		return fmt.Errorf("state: read changelog %s: %w", s.topic, err)
	}
	defer func() {
		if drop {
			_ = cons.Unsubscribe(context.WithoutCancel(ctx))
		}
		_ = cons.Close(context.WithoutCancel(ctx))
	}()
	// A look (drop) writes nothing: under exactly_once the host holds
	// the changelog exclusively (state_fence.go). It reads up to the last
	// message a consumer can be given now, committed changes only.
	var last pulsarwire.MessageID
	if drop {
		var any bool
		if last, any, err = cons.LastMessageID(ctx); err != nil {
			return fmt.Errorf("state: read changelog %s: %w", s.topic, err)
		}
		s.mu.Lock()
		s.vals.reset()
		s.mu.Unlock()
		if !any {
			return nil
		}
	} else if err := s.connectCoordinators(ctx, client); err != nil {
		return err
	} else if _, err := client.Publish(ctx, s.topic, pool.Message{Properties: map[string]string{PropertyStateFence: id}}); err != nil {
		return fmt.Errorf("state: write fence to changelog %s: %w", s.topic, err)
	}
	s.mu.Lock()
	s.vals.reset()
	// Changes not committed are nothing once the changelog is read back
	// (state_regain.go): taken back later, they would put the values of
	// before the read back in place of those read.
	clear(s.pending)
	s.mu.Unlock()
	buf := make([]*subscribe.Message, 1000)
	n := 0
	for {
		k, err := cons.ReceiveBatch(ctx, buf)
		if err != nil {
			return fmt.Errorf("state: read changelog %s: %w", s.topic, err)
		}
		s.mu.Lock()
		for _, m := range buf[:k] {
			if m.Properties[PropertyStateFence] == id {
				s.unlock()
				s.log.Info("state read back from the changelog", "changelog", s.topic, "changes", n, "keys", s.Len(),
					"took", time.Since(t0).Round(time.Millisecond))
				return nil
			}
			if m.Key != "" { // else another restore's fence
				if err := s.set(m.Key, m.Payload, false, m.PublishTime); err != nil {
					s.unlock()
					return fmt.Errorf("state: read changelog %s: %w", s.topic, err)
				}
				n++
			}
			if drop && m.ID.Compare(last) >= 0 {
				s.unlock()
				return nil
			}
		}
		s.unlock()
		clear(buf[:k])
	}
}

// connectCoordinators, for a changelog written in transactions
// (txnWritten), connects to the broker's transaction coordinators before
// the fence is written. The fence can be read only once every
// transaction with an entry before it has ended, and after a restart
// Apache Pulsar aborts a transaction that timed out (one of a host that
// died with the broker, or whose abort failed while the broker was down)
// only once a client connects to its coordinator: a read back before any
// commit would otherwise wait for it for ever (docs/reliability.md,
// "Broker kill on Apache Pulsar").
func (s *keyedState) connectCoordinators(ctx context.Context, client *pool.Client) error {
	if !s.txnWritten {
		return nil
	}
	if err := client.ConnectTransactionCoordinators(ctx); err != nil {
		return fmt.Errorf("state: read changelog %s: %w", s.topic, err)
	}
	return nil
}

// errChangeLost fails a pipeline whose state in memory is ahead of its
// changelog.
var errChangeLost = errors.New("state: a change could not be written to the changelog")

// ReadState reads the keyed state of a pipeline from its changelog topic
// as a host does at start (docs/pipelines.md, "Keyed state") and returns
// every key's value: for looking inside (streamrun state). It reads,
// through a subscription of its own that it removes at the end, up to
// the last message the broker can hand out when it starts (committed
// changes only); it writes nothing, so it also reads a changelog that
// an exactly_once host holds exclusively.
func ReadState(ctx context.Context, client *pool.Client, changelog string) (map[string][]byte, error) {
	s := newKeyedState(changelog, 0, false, 0, "", slog.New(slog.DiscardHandler))
	var id [6]byte
	_, _ = rand.Read(id[:])
	if err := s.read(ctx, client, "streamrun-state-"+hex.EncodeToString(id[:]), true); err != nil {
		return nil, err
	}
	out := make(map[string][]byte, s.vals.n)
	for k, v := range s.vals.all() {
		out[k] = v.v
	}
	return out, nil
}
