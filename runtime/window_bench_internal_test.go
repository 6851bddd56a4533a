package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// BenchmarkWindowHeldMemory is the host's heap for 1 000 000 messages of
// 100 bytes (ids, topics and keys as a host receives them) held in open
// tumbling windows over 10 000 keys, as they are between their
// changelog receipt and their window's close: what a million messages
// in open windows cost a host with windows of messages
// (BenchmarkWindowIncrementalHeldMemory is the incremental mode's).
//
//	go test ./runtime -run '^$' -bench WindowHeldMemory -benchtime 1x
func BenchmarkWindowHeldMemory(b *testing.B) {
	const n = 1_000_000
	payload := strings.Repeat("x", 100)
	for range b.N {
		p := &pipeline{cfg: pipelines.Pipeline{Source: pipelines.Source{Topics: []string{"in"}, Subscription: "s"},
			Window: pipelines.Window{Type: pipelines.Tumbling, Size: time.Hour, Time: pipelines.TimeEvent, IdleTimeout: time.Minute}},
			log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		w := newWindower(p)
		for i := range n {
			m := &winMsg{ID: fmt.Sprintf("%d:%d:-1:-1", 10+i/1000, i%1000), Topic: "persistent://public/default/in",
				Key: fmt.Sprintf("key-%05d", i%10_000), Time: int64(i), Payload: []byte(payload)}
			w.insert(m)
			m.durable = true
			w.held.hold(m)
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heapMiB")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/msg")
		goruntime.KeepAlive(w)
	}
}

// BenchmarkWindowIncrementalHeldMemory is BenchmarkWindowHeldMemory for
// window.mode: incremental: the same 1 000 000 messages over 10 000 keys
// in open tumbling windows, each added to its window's accumulator (a
// count and a sum as JSON, as the test handler keeps them) as the host
// holds them once their adds have their changelog receipts: one
// accumulator a key and window, whatever the number of messages.
//
//	go test ./runtime -run '^$' -bench 'Window(Incremental)?HeldMemory' -benchtime 1x
func BenchmarkWindowIncrementalHeldMemory(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		p := &pipeline{cfg: pipelines.Pipeline{Source: pipelines.Source{Topics: []string{"in"}, Subscription: "s"},
			Window: pipelines.Window{Type: pipelines.Tumbling, Size: time.Hour, Time: pipelines.TimeEvent, IdleTimeout: time.Minute,
				Mode: pipelines.ModeIncremental}},
			log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		w := newWindower(p)
		const topic = "persistent://public/default/in"
		for i := range n {
			k := w.key(fmt.Sprintf("key-%05d", i%10_000))
			a := k.accOf(0, w)
			var acc struct {
				Count int    `json:"count"`
				Sum   uint64 `json:"sum"`
			}
			if a.acc != nil {
				_ = json.Unmarshal(a.acc, &acc)
			}
			acc.Count++
			acc.Sum += uint64(i)
			a.acc, _ = json.Marshal(acc)
			a.n++
			if a.hw == nil {
				a.hw = map[string]msgPos{}
			}
			a.hw[topic] = msgPos{int64(10 + i/1000), int64(i % 1000), -1}
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heapMiB")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/msg")
		goruntime.KeepAlive(w)
	}
}
