package runtime

import (
	"fmt"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/subscribe"
)

// This file is the one place where a pipeline's source, as package
// pipelines reads and checks it, becomes the consumer's options.

// subscribeOptions are the consumer options of the pipeline's source.
func (p *pipeline) subscribeOptions() (subscribe.Options, error) {
	o, err := sourceOptions(p.cfg.Source)
	o.Logger = p.log
	return o, err
}

// sourceOptions converts a source to consumer options; its fields have
// passed pipelines' checks, so an error here means a rule of one package
// is missing from the other.
func sourceOptions(src pipelines.Source) (subscribe.Options, error) {
	typ, err := pipelines.ParseSubscriptionType(string(src.Type))
	if err != nil {
		return subscribe.Options{}, err
	}
	rewind, err := position(src.Rewind)
	if err != nil {
		return subscribe.Options{}, fmt.Errorf("rewind: %w", err)
	}
	o := subscribe.Options{
		Topics:        src.Topics,
		Pattern:       src.Pattern,
		Subscription:  src.Subscription,
		Type:          typ,
		ReceiverQueue: src.ReceiverQueue,
		Rewind:        rewind,
		// Retries are handed back with NackAfter and a delay of their
		// own; Nack's uniform delay is not used.
		NackDelay: time.Nanosecond,
	}
	if ip, _ := pipelines.ParseInitialPosition(string(src.InitialPosition)); ip == pipelines.Earliest {
		o.InitialPosition = subscribe.Earliest
	}
	return o, nil
}

func position(s string) (subscribe.Position, error) {
	pos, err := pipelines.ParsePosition(s)
	if err != nil {
		return subscribe.Position{}, err
	}
	switch pos.Kind {
	case pipelines.AtEarliest:
		return subscribe.AtEarliest(), nil
	case pipelines.AtLatest:
		return subscribe.AtLatest(), nil
	case pipelines.AtMessageID:
		return subscribe.AtMessage(pos.ID), nil
	case pipelines.AtTime:
		return subscribe.AtTime(pos.Time), nil
	}
	return subscribe.Position{}, nil
}
