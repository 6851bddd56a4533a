package campaign_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// The chaos handler is the campaign's plugin: it copies each message to
// its output (same key, same payload: the ledger's id; the input's message
// id in the property propInputID), and misbehaves
// when the campaign drops an order file into its control directory. The
// one-shot orders are claimed by removing the file, so exactly one batch
// of one instance obeys:
//
//	panic.<pipeline>    panic while handling the batch
//	hang.<pipeline>     never answer (the host's batch timeout kills it)
//	garbage.<pipeline>  answer with outputs that name no topic
//
// and a standing one holds while its file exists:
//
//	slow.<pipeline>     sleep slowSleep per message: a slow consumer
//
// With count set (a pipeline with keyed state), it also counts the
// messages of each key in the key's state and appends the new count to
// the output's payload: "<pipeline>:<seq>|<key>=<count>". With window set
// (a pipeline with incremental windows), it counts each window's messages
// instead and puts out the count when the window fires (windows_test.go).
type chaosConfig struct {
	Output   string `json:"output"`
	Control  string `json:"control"`
	Pipeline string `json:"pipeline"`
	Count    bool   `json:"count"`
	Window   bool   `json:"window"`
}

// slowSleep is the slow consumer's pause per message: an instance then
// handles about 16 messages a second (a batch of 50 takes 3 s, within the
// batch timeout), four instances well below the campaign's publish rate,
// so a backlog builds.
const slowSleep = 60 * time.Millisecond

// propInputID names the input message an output came from, so that the
// ledger tells a second output of one input (a duplicate) from the
// outputs of two copies of one publish the broker stored (ledger_test.go).
const propInputID = "campaign-input-id"

type chaos struct{ cfg chaosConfig }

func newChaos(_ context.Context, cfg chaosConfig) (plugin.Handler, error) {
	if cfg.Output == "" || cfg.Control == "" || cfg.Pipeline == "" {
		return nil, errors.New("chaos: config needs output, control and pipeline")
	}
	return &chaos{cfg: cfg}, nil
}

// claim takes a one-shot order: true for the one caller whose remove won.
func (c *chaos) claim(order string) bool {
	return os.Remove(filepath.Join(c.cfg.Control, order+"."+c.cfg.Pipeline)) == nil
}

func (c *chaos) Process(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
	switch {
	case c.claim("panic"):
		panic("chaos: told to panic")
	case c.claim("hang"):
		<-ctx.Done() // the host kills the process at its batch timeout
		return ctx.Err()
	case c.claim("garbage"):
		for _, m := range batch {
			w.Output(m, plugin.Output{Key: m.Key, Payload: m.Payload}) // no topic: the host must refuse it
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.cfg.Control, "slow."+c.cfg.Pipeline)); err == nil {
		select {
		case <-time.After(time.Duration(len(batch)) * slowSleep):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.cfg.Window {
		return c.windowHandler().Process(ctx, w, batch)
	}
	for _, m := range batch {
		if !c.cfg.Count {
			w.Output(m, plugin.Output{Topic: c.cfg.Output, Key: m.Key, Payload: m.Payload, Properties: map[string]string{propInputID: m.ID}})
			continue
		}
		var n int
		if _, err := m.State().GetJSON(&n); err != nil {
			return fmt.Errorf("chaos: the count of key %q: %w", m.Key, err)
		}
		n++
		if err := m.State().PutJSON(n); err != nil {
			return fmt.Errorf("chaos: the count of key %q: %w", m.Key, err)
		}
		// The id without the burst's padding, then the count.
		id, _, _ := bytes.Cut(m.Payload, []byte("|"))
		w.Output(m, plugin.Output{Topic: c.cfg.Output, Key: m.Key, Payload: fmt.Appendf(nil, "%s|%s=%d", id, m.Key, n), Properties: map[string]string{propInputID: m.ID}})
	}
	return nil
}
