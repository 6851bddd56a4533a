package runtime

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// Properties of a dead-lettered message, beside its own. The first two
// are the Java client's names.
const (
	// PropertyRealTopic is the topic (or partition) the message came from.
	PropertyRealTopic = subscribe.PropertyRealTopic
	// PropertyOriginMessageID is its id there.
	PropertyOriginMessageID = subscribe.PropertyOriginMessageID
	// PropertyDeadLetterReason says why it was dead-lettered: the
	// handler's reason, or the runtime's (retries or crashes exhausted).
	PropertyDeadLetterReason = "DEAD_LETTER_REASON"
)

// settle acts on the handler's answer for each message of a batch. It
// runs on the worker, which may block here while producers are at their
// pending limits: that too is backpressure.
func (p *pipeline) settle(items []*item, res []plugin.Result) {
	p.stats.processed.Add(int64(len(items)))
	if c := p.eo; c != nil {
		c.gate.RLock()
		defer c.gate.RUnlock()
		if !c.join(items) {
			return
		}
	}
	for i, it := range items {
		r := &res[i]
		if p.eo != nil && it.ep == nil {
			continue // handed back by join
		}
		switch r.Outcome {
		case plugin.OutcomeAck:
			if f := it.win; f != nil && f.add != nil && f.fire > 0 {
				// An add and fire in one: its outputs go as a fire's;
				// the accumulator its add made is written once they
				// have (addFireSettled).
				f.acked = true
				if r.State != nil && !r.State.Delete {
					f.newAcc = append([]byte(nil), r.State.Value...)
				}
			} else if it.win != nil && it.win.add != nil {
				if len(r.Outputs) > 0 {
					p.log.Warn("windows: an add step's outputs are not published; a window's outputs come when it fires", "window", it.m.Key, "outputs", len(r.Outputs))
				}
				p.win.addAnswered(it, r.State)
				continue
			}
			n := len(r.Outputs)
			if r.State != nil && p.keyed != nil {
				n++
				it.changed = true
			}
			if n == 0 {
				p.ack(it, Acked, "")
				continue
			}
			if it.ep != nil {
				p.publishTxn(it, r)
				continue
			}
			it.pending.Store(int32(n))
			p.awaiting.Add(1)
			done := func(_ pulsarwire.MessageID, err error) { p.receipt(it, err) }
			if it.changed {
				// The changelog first: the message is acknowledged only once
				// this and every output have their receipts.
				parent, traced := p.tr.batchContext(it)
				p.publish(parent, traced, p.keyed.topic, changelogMessage(r.State), done)
			}
			for j := range r.Outputs {
				o := &r.Outputs[j]
				cb := done
				if f := p.h.opts.Hooks.Output; f != nil {
					topic := o.Topic
					cb = func(_ pulsarwire.MessageID, err error) {
						f(p.name, topic, err)
						p.receipt(it, err)
					}
				}
				parent, traced := p.tr.parentOf(it, o)
				m := p.outputMessage(it, o)
				if ts := p.taps.Load(); ts != nil {
					p.tapOutput(ts, it, o.Topic, &m)
				}
				p.publish(parent, traced, o.Topic, m, cb)
			}
		case plugin.OutcomeRetry:
			if e := it.ep; e != nil && p.keyed != nil {
				// On Exclusive a retry asks for every unacknowledged
				// message again; with keyed state the transaction aborts
				// with it, and every change not committed is taken back
				// at once (keyedState.rollback). Its copy goes into the
				// next transaction.
				e.fail(fmt.Errorf("message %s retried (%s): the changes of keyed state not committed are taken back", it.id(), r.Reason))
				p.eo.leave(it)
			}
			p.retry(it, r.RetryDelay, r.Reason)
		case plugin.OutcomeDeadLetter:
			p.deadLetter(it, r.Reason)
		case plugin.OutcomeDrop:
			p.ack(it, Dropped, r.Reason)
		default: // Instance.Process checks outcomes; be safe anyway
			p.retry(it, 0, fmt.Sprintf("unknown outcome %v", r.Outcome))
		}
	}
}

// outputMessage is the message to publish for output o of it. The input's
// trace context goes along unless the handler set its own.
func (p *pipeline) outputMessage(it *item, o *plugin.Output) pool.Message {
	props := o.Properties
	// Traced, the output's "send" span gives it a trace context instead.
	if tp, ts := traceContext(it.m); p.tr == nil && tp != "" && props[msgtrace.PropertyTraceParent] == "" {
		props = maps.Clone(props)
		if props == nil {
			props = make(map[string]string, 2)
		}
		props[msgtrace.PropertyTraceParent] = tp
		if ts != "" {
			props[msgtrace.PropertyTraceState] = ts
		}
	}
	return pool.Message{
		Payload:     o.Payload,
		Key:         o.Key,
		OrderingKey: string(o.OrderingKey),
		Properties:  props,
		EventTime:   o.EventTime,
	}
}

// receipt is told the fate of one output of it; it runs on a connection
// goroutine, so it acknowledges (which does not block) but leaves a retry
// to the settler.
func (p *pipeline) receipt(it *item, err error) {
	if err != nil {
		// A copy of its own: taking err's address would put every
		// receipt's err on the heap, failed or not.
		e := err
		it.outErr.CompareAndSwap(nil, &e)
	}
	if it.pending.Add(-1) != 0 {
		return
	}
	p.awaiting.Add(-1)
	if it.outErr.Load() != nil {
		if it.changed && p.hard.Err() == nil {
			// The state in memory has the change; the message comes again.
			p.fail(fmt.Errorf("%w (message %s): %w; a restart reads the state back from the changelog", errChangeLost, it.id(), *it.outErr.Load()))
		}
		p.redo.push(it)
		return
	}
	p.ack(it, Acked, "")
}

// ack acknowledges it, which came to outcome o for reason ("" for none);
// in an exactly_once pipeline, in the open transaction.
func (p *pipeline) ack(it *item, o Outcome, reason string) {
	if c := p.eo; c != nil {
		if it.ep == nil {
			c.gate.RLock()
			defer c.gate.RUnlock()
			if !c.join([]*item{it}) {
				return
			}
		}
		c.ackIn(it, o, reason)
		return
	}
	if it.win != nil {
		p.win.answered(it.win, true, 0)
		p.settled(it, o, reason)
		return
	}
	if err := p.cons.Ack(context.Background(), it.m); err != nil {
		// Only a closed consumer refuses: the message comes again.
		p.log.Debug("ack", "id", it.id(), "err", err)
	}
	p.settled(it, o, reason)
}

// retry hands it back to the broker to be delivered again after delay,
// or after the error policy's backoff when delay is 0, unless it has been
// retried MaxRetries times already: then it is dead-lettered.
func (p *pipeline) retry(it *item, delay time.Duration, reason string) {
	if f := it.win; f != nil && f.unsent {
		// Never handed to the handler (windowsFor): made again, and not
		// one of the handler's retries, which max_retries counts.
		// Counted, a roll between contract versions dead-lettered
		// windows' messages.
		p.nackAfter(it, delay)
		p.settled(it, Retried, reason)
		return
	}
	k := retryKeyOf(it.m)
	n := max(int(it.m.RedeliveryCount), int(p.retries.get(k)))
	ep := &p.cfg.ErrorPolicy
	if ep.MaxRetries > 0 && n >= ep.MaxRetries {
		p.deadLetter(it, fmt.Sprintf("retried %d times; last reason: %s", n, reason))
		return
	}
	if delay <= 0 {
		delay = ep.Backoff.Delay(n + 1)
	}
	p.retries.set(k, uint32(n+1))
	if p.keyed != nil {
		p.keyed.retried(delay)
	}
	p.tr.retried(it, reason, delay.Milliseconds())
	p.log.Debug("retry", "id", it.id(), "topic", it.m.Topic, "delay", delay, "reason", reason)
	p.nackAfter(it, delay)
	p.settled(it, Retried, reason)
}

// nackAfter has it delivered again after delay: by the broker, or, for a
// window, by the windows.
func (p *pipeline) nackAfter(it *item, delay time.Duration) {
	if it.win != nil {
		p.win.answered(it.win, false, delay)
		return
	}
	if err := p.cons.NackAfter(it.m, delay); err != nil {
		p.log.Debug("nack", "id", it.id(), "err", err)
	}
}

// deadLetter publishes it to the dead-letter topic with reason, then
// acknowledges it. If the publish fails, it is handed back for a retry
// after the backoff.
func (p *pipeline) deadLetter(it *item, reason string) {
	if c := p.eo; c != nil && it.ep == nil {
		c.gate.RLock()
		defer c.gate.RUnlock()
		if !c.join([]*item{it}) {
			return
		}
	}
	windowJSON(it) // a window's message goes to the dead-letter topic as JSON
	m := it.m
	topic := p.deadLetterTopic(m)
	p.log.Warn("dead-lettering a message", "id", it.id(), "topic", m.Topic, "dead_letter_topic", topic, "reason", reason)
	p.tr.deadLettered(it, reason)
	parent, traced := p.tr.batchContext(it)
	if it.ep != nil {
		// In the transaction, with its acknowledgement: the commit
		// waits for the receipt, and a failure aborts both.
		dl := subscribe.DeadLetter(m, map[string]string{PropertyDeadLetterReason: reason})
		e := it.ep
		dl.Txn = e.txn
		p.publish(parent, traced, topic, dl, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				e.fail(err)
				p.log.Warn("publishing to the dead-letter topic failed; the transaction aborts", "id", it.id(), "topic", topic, "err", err)
			}
		})
		p.ack(it, DeadLettered, reason)
		return
	}
	p.publish(parent, traced, topic, subscribe.DeadLetter(m, map[string]string{PropertyDeadLetterReason: reason}), func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			p.log.Warn("publishing to the dead-letter topic failed; the message comes back", "id", it.id(), "topic", topic, "err", err)
			if p.keyed != nil {
				p.keyed.retried(p.cfg.ErrorPolicy.Backoff.Delay(1))
			}
			p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
			p.settled(it, Retried, "publishing to the dead-letter topic failed: "+err.Error())
			return
		}
		p.ack(it, DeadLettered, reason)
	})
}

func (p *pipeline) deadLetterTopic(m *subscribe.Message) string {
	if t := p.cfg.ErrorPolicy.DeadLetterTopic; t != "" {
		return t
	}
	return subscribe.DeadLetterTopic(m.Topic, p.cfg.Source.Subscription)
}

// handBack gives up on it without a word to the broker: unacknowledged,
// it is delivered again once the consumer closes. Only at shutdown.
func (p *pipeline) handBack(it *item) {
	if it.win == nil { // a window's call is no input (counted)
		p.stats.handedBack.Add(1)
	}
	if p.keyed != nil {
		if p.keyed.eo {
			p.keyed.discard(it)
		}
		p.keyed.leave(it.m, false)
	}
	p.tr.event(it, msgtrace.EventHandedBack)
	p.release(it)
}

// caughtUp sends the open output batches at once when every credit is
// held by a message waiting only for its outputs' receipts: nothing more
// is received until some are acknowledged, so waiting out the producer's
// batching delay would only stall the pipeline, a delay per round (a
// MaxInFlight below the batch's message limit, outputs spread over
// partitions or topics). While any message is still on its way to the
// publisher, its outputs may yet fill the batch: sending it early would
// only split it. A message awaiting receipts holds its credit, so
// awaiting reaching the total means every credit is held.
func (p *pipeline) caughtUp() {
	if p.awaiting.Load() >= int64(p.credits.total) {
		p.client.SendOpenBatches()
	}
}

// settled counts it under o (for reason, "" when there is none) and
// gives its credit back.
func (p *pipeline) settled(it *item, o Outcome, reason string) {
	p.counted(it, o, reason)
	p.release(it)
}

// counted counts it under o, for reason, and tells the hooks. A
// window's call (it.win: a fire, an add) is the host's, not an input:
// the windows count its inputs as they settle them, so it counts under
// no outcome of Stats, only in Processed and, dead-lettered, in the
// reasons (docs/runtime.md).
func (p *pipeline) counted(it *item, o Outcome, reason string) {
	if it.win == nil {
		switch o {
		case Acked:
			p.stats.acked.Add(1)
		case Retried:
			p.stats.retried.Add(1)
		case DeadLettered:
			p.stats.deadLettered.Add(1)
		case Dropped:
			p.stats.dropped.Add(1)
		case Filtered:
			p.stats.filtered.Add(1)
		}
	}
	if o != Retried {
		p.retries.forget(retryKeyOf(it.m))
	}
	if p.keyed != nil {
		p.keyed.leave(it.m, o != Retried)
	}
	if f := p.h.opts.Hooks.Settled; f != nil {
		f(p.name, o)
	}
	if f := p.h.opts.Hooks.Message; f != nil {
		f(p.name, it.m, o, reason)
	}
	if ts := p.taps.Load(); ts != nil {
		p.tapInput(ts, it, o, reason)
	}
	if o == DeadLettered {
		p.deadLetters.add(reason)
	}
}

func (p *pipeline) release(it *item) {
	if b := it.b; b != nil && b.left.Add(-1) == 0 {
		p.tr.endBatch(b)
		p.met.batchDone(b)
		if f := p.h.opts.Hooks.BatchDone; f != nil {
			f(p.name, b.size, time.Since(b.formed))
		}
	}
	if it.win != nil {
		return // a window holds no credit: its messages did
	}
	p.credits.release(1)
}
