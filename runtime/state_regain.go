package runtime

import (
	"errors"
	"fmt"

	"github.com/streamrun/streamrun/pulsarwire"
)

// Keyed state when the subscription comes back. The consumer subscribes
// again by itself after its connection was lost (a host paused past the
// broker's keep-alive, a network cut, a topic unloaded). Meanwhile
// another host may have held the Exclusive subscription and committed
// changes to the changelog: the values in memory are those of before,
// and counting on from them would lose the other host's changes. So the
// receive loop, seeing the consumer's Resubscribed count move, hands
// nothing more to the handler until the state is read back: what it just
// received and what waits in the lanes is handed back (all of it will be
// delivered again), the messages in the workers' hands settle, under
// exactly_once the open transaction aborts (its acknowledgements may
// have been lost with the connection), the changelog is read back as at
// start, and then the consumer asks for every unacknowledged message
// again (docs/runtime.md, "Keyed state"). Windows are read back from
// their changelog the same way (window_regain.go).

// regained says whether the consumer subscribed again since the keyed
// state or the windows were last read back, or a commit's outcome was
// unknown since (unknown.go). Fenced (state_fence.go), only the
// subscription coming back counts: reading back takes the changelog.
func (p *pipeline) regained() bool {
	if p.keyed == nil && p.win == nil {
		return false
	}
	if p.cons.Resubscribed() != p.readAt {
		return true
	}
	return p.eo != nil && p.eo.stale() && !p.fencedOut()
}

// regain reads the keyed state or the windows back after the consumer
// subscribed again, as the package comment above says; it runs on the
// receive loop, which holds no message then. It fails only when the
// changelog cannot be read, or with the receive loop's context.
func (p *pipeline) regain() error {
	at := p.cons.Resubscribed()
	why := "the subscription was lost and made again"
	if at == p.readAt {
		why = "a commit's outcome is unknown"
	}
	var changelog string
	if p.keyed != nil {
		changelog = p.keyed.topic
	} else {
		changelog = p.win.topic
	}
	p.log.Warn(why+": the state is read back from the changelog before the next message", "changelog", changelog)
	for i := range p.lanes {
		ln := &p.lanes[i]
		for _, it := range ln.items {
			if it.win == nil { // a window's fire or add is made again from what is read back
				p.handBack(it) // received before: it comes again
			}
		}
		clear(ln.items)
		ln.items = ln.items[:0]
	}
	if p.win != nil {
		p.win.letGo(at)
	}
	if err := p.credits.waitAll(p.recvCtx); err != nil {
		return err
	}
	var unknownAt uint64
	if p.eo != nil {
		p.eo.abortNow(p.recvCtx, errors.New(why+": the state is read back"))
		var err error
		if unknownAt, err = p.eo.settle(p.recvCtx); err != nil {
			return err
		}
	}
	if err := p.takeChangelog(p.recvCtx); err != nil {
		return p.takenMeanwhile(at, err)
	}
	if p.keyed != nil {
		if err := p.keyed.restore(p.recvCtx, p.client, p.cfg.Source.Subscription); err != nil {
			return p.takenMeanwhile(at, fmt.Errorf("read the keyed state back after subscribing again: %w", err))
		}
	}
	if p.win != nil {
		if err := p.win.restore(p.recvCtx); err != nil {
			return p.takenMeanwhile(at, fmt.Errorf("read the windows back after subscribing again: %w", err))
		}
	}
	p.readAt = at
	if p.eo != nil {
		p.eo.readBack.Store(unknownAt)
	}
	// What was received since the subscription came back was handed
	// back unacknowledged: it comes again, now on the state read back.
	if err := p.cons.RedeliverUnacknowledged(); err != nil {
		return fmt.Errorf("ask for the unacknowledged messages again: %w", err)
	}
	return nil
}

// takenMeanwhile is regain's answer to err, a read back that failed at
// subscription count at. ProducerFenced means another host took the
// changelog after this one did: that host held the subscription since,
// so this one lost it and its consumer subscribes again. Nothing more
// is received, placed or fired until then, as for a fenced pipeline
// (state_fence.go), and the read back is made again then. Not a failure
// of the pipeline: the campaign's eo-window on Apache Pulsar stopped a
// host so (two hosts took the subscription in turn while one read
// back). Any other error fails it.
func (p *pipeline) takenMeanwhile(at uint64, err error) error {
	if !errors.Is(err, pulsarwire.ErrProducerFenced) {
		return err
	}
	p.log.Warn("another host took the changelog during the read back: nothing more until the subscription comes back", "err", err)
	p.takenAtRegain.Store(true)
	p.readAt = at
	return nil
}
