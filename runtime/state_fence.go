package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Fencing the changelog under exactly_once. A host cut off from the
// broker without knowing it yet may still commit a window fire or a
// keyed-state change after another host took the Exclusive subscription
// over: a fire is tied to no input acknowledgement, so the broker's
// acknowledgement conflict does not stop it. So when the pipeline gains
// its subscription (at start, once subscribed, and when it comes back),
// it opens its changelog producer with AccessExclusiveWithFencing before
// it reads the changelog back. The broker fences the producer of the
// host before: its next changelog record fails, and the transaction
// holding it aborts. A record it wrote before the fence lies before the
// read-back's own fence record, and the broker holds dispatch at the
// first open transaction, so the read back waits for that transaction's
// end and sees its records if it committed. A fenced pipeline holds
// every message and fire until its subscription comes back, then reads
// back (and fences in turn). Never before it holds the subscription: a
// host waiting for it must not fence the one that has it.
// (docs/pipelines.md, "Durable".)

// fencedPoll is how often a fenced pipeline looks whether its
// subscription came back.
const fencedPoll = 50 * time.Millisecond

// changelogs are the pipeline's changelog topics.
func (p *pipeline) changelogs() []string {
	var ts []string
	if p.keyed != nil {
		ts = append(ts, p.keyed.topic)
	}
	if p.win != nil {
		ts = append(ts, p.win.topic)
	}
	return ts
}

// fences says whether the pipeline fences its changelog: exactly_once
// with keyed state or windows.
func (p *pipeline) fences() bool {
	return p.eo != nil && (p.keyed != nil || p.win != nil)
}

// takeChangelog opens the changelog producers with fencing, the
// pipeline now holding its subscription; before a read back.
func (p *pipeline) takeChangelog(ctx context.Context) error {
	if !p.fences() {
		return nil
	}
	return p.fenceTopics(ctx, p.changelogs())
}

// fenceTopics opens the producers of topics, changelogs, with fencing
// and keeps them for fencedOut.
func (p *pipeline) fenceTopics(ctx context.Context, topics []string) error {
	ps := make([]*pool.Producer, 0, len(topics))
	for _, t := range topics {
		pr, err := p.client.OpenProducer(ctx, t, pool.AccessExclusiveWithFencing)
		if err != nil {
			return fmt.Errorf("open the changelog %s exclusively: %w", t, err)
		}
		ps = append(ps, pr)
	}
	p.changelogProducers.Store(&ps)
	p.takenAtRegain.Store(false)
	return nil
}

// fencedOut says whether another host fenced the changelog producers:
// it holds the subscription, or held it since.
func (p *pipeline) fencedOut() bool {
	if p.takenAtRegain.Load() {
		return true
	}
	ps := p.changelogProducers.Load()
	if ps == nil {
		return false
	}
	for _, pr := range *ps {
		if errors.Is(pr.Err(), pulsarwire.ErrProducerFenced) {
			return true
		}
	}
	return false
}
