package subscribe

import (
	"fmt"
	"testing"

	"github.com/streamrun/streamrun/pulsarwire"
)

// BenchmarkDecodeSingle: the messages of a batch of 100 (key, one
// property, event time, 100-byte payload) read one by one, as every
// received message is.
func BenchmarkDecodeSingle(b *testing.B) {
	var batch []byte
	payload := make([]byte, 100)
	for i := 0; i < 100; i++ {
		batch = pulsarwire.AppendSingleMessage(batch, &pulsarwire.MessageFields{Key: fmt.Sprint("k", i%7),
			Properties: map[string]string{"i": "x"}, EventTime: 1700000000000, SequenceID: uint64(i)}, payload)
	}
	b.ReportAllocs()
	var m Message
	for b.Loop() {
		rest := batch
		for len(rest) > 0 {
			m = Message{}
			var err error
			if rest, _, err = decodeSingle(rest, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
}
