package plugin

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The SDK's tests run handlers in this process; plugin/host's tests run
// them in plugin processes, over the contract.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// msgs makes a batch with the given payloads.
func msgs(payloads ...string) []*Message {
	out := make([]*Message, len(payloads))
	for i, p := range payloads {
		out[i] = &Message{
			ID:          fmt.Sprintf("7:%d:-1:-1", i),
			Topic:       "persistent://public/default/in",
			Key:         fmt.Sprintf("k%d", i),
			Payload:     []byte(p),
			PublishTime: time.UnixMilli(1_700_000_000_000 + int64(i)),
		}
	}
	return out
}
