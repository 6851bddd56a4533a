package pool

import (
	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Key-based batching (BatchingOptions.ByKey).
//
// A KeyShared dispatcher routes a whole entry by the key in its
// MessageMetadata, which a batch takes from its first message; a batch
// that mixes keys sends the others' messages along, so one key can reach
// two consumers and lose its order. With ByKey a producer keeps one open
// batch per key instead, as the Java client's BatchMessageKeyBasedContainer
// (BatcherBuilder.KEY_BASED) and the Go client's keyBasedBatchContainer
// do:
//
//   - the key is the ordering key when a message has one, else its key;
//     messages with neither share one batch;
//   - MaxMessages, MaxBytes and MaxDelay apply to the open batches
//     together, and when one is reached all of them are sent;
//   - they are sent in order of their first message's sequence id (the
//     Java client sorts by it; the Go client sorts by key, which would
//     let sequence ids go back between entries), so the broker's receipts
//     come in the order of the pending queue and a deduplicating broker
//     sees sequence ids only grow.
//
// Batches open in the order of their first messages, so keeping them in
// that order needs no sorting.

// batchKey is what a KeyShared dispatcher routes a message by. An
// ordering key and a partition key that are equal strings are different
// keys.
// Messages of different transactions (or of one and of none) never share
// a batch either: the transaction is part of the key.
type batchKey struct {
	ordering bool
	key      string
	txn      *txn.Txn
}

func keyOf(f *pulsarwire.MessageFields, tx *txn.Txn) batchKey {
	if f.OrderingKey != "" {
		return batchKey{ordering: true, key: f.OrderingKey, txn: tx}
	}
	return batchKey{key: f.Key, txn: tx}
}

// keyedBatches are a ByKey producer's open batches.
type keyedBatches struct {
	byKey map[batchKey]*batch
	order []*batch // by first sequence id, which is the order they opened in
	n     int      // messages in all of them
	bytes int      // encoded messages in all of them
}

// takeAll empties k and returns its batches in order.
func (k *keyedBatches) takeAll() []*batch {
	if len(k.order) == 0 {
		return nil
	}
	out := append([]*batch(nil), k.order...)
	k.reset()
	return out
}

func (k *keyedBatches) reset() {
	clear(k.byKey)
	clear(k.order)
	k.order = k.order[:0]
	k.n, k.bytes = 0, 0
}

// addKeyedLocked puts one message (f, numbered already) into its key's
// open batch, first sending every open batch when the message would take
// them past MaxBytes or its key's batch past the broker's largest
// message, and after it when MaxMessages or MaxBytes is reached. It
// returns the refusal of a message that can never fit an entry, taking
// nothing.
func (pp *partProducer) addKeyedLocked(f *pulsarwire.MessageFields, payload []byte, need int, size int64, tx *txn.Txn, done completer) error {
	opts := &pp.p.opts.Batching
	k := &pp.keyed
	key := keyOf(f, tx)
	b := k.byKey[key]
	if k.n > 0 && (k.bytes+need > opts.MaxBytes || b != nil && !fitsEntry(pp.maxMessageSize, b.room, len(b.buf)-b.room+need)) {
		pp.flushKeyedLocked()
		b = nil
	}
	if b == nil {
		b = pp.newBatchLocked(f, tx)
		if !fitsEntry(pp.maxMessageSize, b.room, need) {
			b.recycle()
			return pp.sendAloneLocked(f, payload, size, tx, done)
		}
		// Most keys' batches stay small: start with what this message
		// needs (a pooled buffer if there is one) and let it grow.
		b.buf = pp.getBuf(b.room + max(need, 4096))[:b.room]
		if len(k.order) == 0 {
			// Only the oldest open batch sets the clock.
			pp.timer.Reset(opts.MaxDelay)
		}
		k.byKey[key] = b
		k.order = append(k.order, b)
	}
	before := len(b.buf)
	pp.appendLocked(b, f, payload, size, done)
	k.n++
	k.bytes += len(b.buf) - before
	if k.n >= opts.MaxMessages || k.bytes >= opts.MaxBytes {
		pp.flushKeyedLocked()
	}
	return nil
}

// flushKeyedLocked sends every open batch, oldest first.
func (pp *partProducer) flushKeyedLocked() {
	k := &pp.keyed
	if len(k.order) == 0 {
		return
	}
	for _, b := range k.order {
		pp.sendLocked(b)
	}
	k.reset()
}
