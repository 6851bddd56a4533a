package msglines

import (
	"context"
	"strconv"
	"strings"

	"github.com/streamrun/streamrun/pool"
)

// Generated is what `streamrun produce` publishes without --input: Count
// messages shaped like Template, each with the payload Text, "{n}" in
// it replaced by the message's number from 0, or, when Size > 0 or Text
// is "", Size bytes of a-z.
type Generated struct {
	Template pool.Message
	Text     string
	Size     int
	Count    int
}

// Fixed is the payload every message shares, or nil when "{n}" in Text
// makes each message's its own.
func (g Generated) Fixed() []byte {
	switch {
	case g.Size > 0 || g.Text == "":
		fixed := make([]byte, g.Size)
		for i := range fixed {
			fixed[i] = byte('a' + i%26)
		}
		return fixed
	case !strings.Contains(g.Text, "{n}"):
		return []byte(g.Text)
	}
	return nil
}

// Messages hands out the messages one a call, then false: the shape of
// pool.Producer.Publish's source. The fixed payload is made once and
// shared.
func (g Generated) Messages() func(context.Context) (pool.Message, bool, error) {
	fixed := g.Fixed()
	i := 0
	return func(context.Context) (pool.Message, bool, error) {
		if i >= g.Count {
			return pool.Message{}, false, nil
		}
		m := g.Template
		m.Payload = fixed
		if fixed == nil {
			m.Payload = []byte(strings.ReplaceAll(g.Text, "{n}", strconv.Itoa(i)))
		}
		i++
		return m, true, nil
	}
}
