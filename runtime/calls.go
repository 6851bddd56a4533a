package runtime

import (
	"context"
	"time"
)

// The pipeline's side of a worker's calls to its instances: what hooks,
// metrics and traces hear of each call, in one place.

// calling is the context of a call of b's messages to instance.
func (p *pipeline) calling(ctx context.Context, _ *batch, _ int) context.Context { return ctx }

// called is told how a call of size messages of b went (err nil: the
// handler answered; a hang is an errHung).
func (p *pipeline) called(_ *batch, instance, size int, took time.Duration, err error) {
	if f := p.h.opts.Hooks.Handled; f != nil {
		f(p.name, instance, size, took, err)
	}
}
