package store

import (
	"fmt"
	"testing"
)

// The same workloads run on pebble in bench/storecmp; figures are in doc.go.

var benchSizes = []int{100, 1024}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []string{"memory", "disk", "disk-sync"} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
				opts := Options{}
				if mode != "memory" {
					opts = Options{Dir: b.TempDir(), Sync: mode == "disk-sync"}
				}
				s, err := Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				l, err := s.Topic(tname)
				if err != nil {
					b.Fatal(err)
				}
				data := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := l.Append(int64(i), data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReadTail reads batches of 100 recent entries, as a dispatcher
// following the tail does: "cache" with Read, "cache-reuse" with ReadAppend
// into one slice; "disk" is Read with no tail cache, reading back through
// the page cache.
func BenchmarkReadTail(b *testing.B) {
	const batch, held = 100, 4000
	for _, mode := range []string{"cache", "cache-reuse", "disk"} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
				opts := Options{Dir: b.TempDir()}
				if mode == "disk" {
					opts.CacheBytes = -1
				}
				s, err := Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				l, err := s.Topic(tname)
				if err != nil {
					b.Fatal(err)
				}
				data := make([]byte, size)
				for i := range held {
					if _, err := l.Append(int64(i), data); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(batch * int64(size))
				b.ReportAllocs()
				var ents []Entry
				for i := 0; b.Loop(); i++ {
					from := uint64(i*batch) % (held - batch)
					if mode == "cache-reuse" {
						ents, err = l.ReadAppend(ents[:0], from, batch, 0)
					} else {
						ents, err = l.Read(from, batch, 0)
					}
					if err != nil || len(ents) != batch {
						b.Fatalf("Read: %d entries, %v", len(ents), err)
					}
				}
			})
		}
	}
}
