package runtime

import (
	"context"
	"time"
)

// The pipeline's side of a worker's calls to its instances: what hooks,
// metrics and traces hear of each call, in one place.

// calling is the context of a call of b's messages to instance: the
// batch's "process" span starts here and the call runs under it.
func (p *pipeline) calling(ctx context.Context, b *batch, instance int) context.Context {
	p.tr.startProcess(b, instance)
	return p.tr.processCtx(ctx, b)
}

// called is told how a call of size messages of b went (err nil: the
// handler answered; a hang is an errHung).
func (p *pipeline) called(b *batch, instance, size int, took time.Duration, err error) {
	if f := p.h.opts.Hooks.Handled; f != nil {
		f(p.name, instance, size, took, err)
	}
	p.met.handled(size, took, err)
	if err != nil && p.hard.Err() == nil {
		p.tr.handlerFailed(b, instance, err)
	}
}
