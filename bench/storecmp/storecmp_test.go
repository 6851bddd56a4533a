package storecmp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/streamrun/streamrun/broker/store"
)

// The workloads of broker/store's BenchmarkAppend and BenchmarkReadTail:
// one topic, appends of 100 B and 1 KiB entries with a publish time, and
// reads of 100 consecutive recent entries. Both sides run here, in one
// process, so the figures compare.

const topic = "persistent://public/default/t-partition-0"

var sizes = []int{100, 1024}

// On pebble an entry is key = topic prefix + big-endian id, value = publish
// time + data: the natural way to keep a log in an ordered KV store.
var prefix = []byte("t/" + topic + "/")

func key(buf []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(buf[:0], prefix...), id)
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func openPebble(b *testing.B) *pebble.DB {
	db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quiet{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func openStore(b *testing.B, sync bool) *store.Log {
	s, err := store.Open(store.Options{Dir: b.TempDir(), Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	l, err := s.Topic(topic)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// Durability compared: store without Sync writes each entry to the OS before
// Append returns; with pebble.NoSync the entry waits in a 32 KiB WAL block in
// memory until pebble's flush goroutine writes it (weaker: kill -9 can lose
// it). store with Sync and pebble.Sync both fsync before returning.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		mode := map[bool]string{false: "nosync", true: "sync"}[sync]
		for _, size := range sizes {
			data := make([]byte, size)
			b.Run(fmt.Sprintf("store/%s/%dB", mode, size), func(b *testing.B) {
				l := openStore(b, sync)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := l.Append(int64(i), data); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("pebble/%s/%dB", mode, size), func(b *testing.B) {
				db := openPebble(b)
				wo := pebble.NoSync
				if sync {
					wo = pebble.Sync
				}
				var k, v []byte
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					k = key(k, uint64(i))
					v = append(binary.BigEndian.AppendUint64(v[:0], uint64(i)), data...)
					if err := db.Set(k, v, wo); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReadTail reads 100 entries among the newest 4000. pebble's
// iterator values are only valid until the iterator moves, so they are
// copied, which store's Read does not need (its Data may be retained).
func BenchmarkReadTail(b *testing.B) {
	const batch, held = 100, 4000
	for _, size := range sizes {
		data := make([]byte, size)
		b.Run(fmt.Sprintf("store/%dB", size), func(b *testing.B) {
			l := openStore(b, false)
			for i := range held {
				if _, err := l.Append(int64(i), data); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(batch * int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ents, err := l.Read(uint64(i*batch)%(held-batch), batch, 0)
				if err != nil || len(ents) != batch {
					b.Fatalf("Read: %d entries, %v", len(ents), err)
				}
			}
		})
		b.Run(fmt.Sprintf("pebble/%dB", size), func(b *testing.B) {
			db := openPebble(b)
			var k, v []byte
			for i := range held {
				k = key(k, uint64(i))
				v = append(binary.BigEndian.AppendUint64(v[:0], uint64(i)), data...)
				if err := db.Set(k, v, pebble.NoSync); err != nil {
					b.Fatal(err)
				}
			}
			type entry struct {
				id   uint64
				pt   int64
				data []byte
			}
			var lo, hi []byte
			b.SetBytes(batch * int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				from := uint64(i*batch) % (held - batch)
				lo, hi = key(lo, from), key(hi, from+batch)
				it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
				if err != nil {
					b.Fatal(err)
				}
				ents := make([]entry, 0, batch)
				for ok := it.First(); ok; ok = it.Next() {
					val := it.Value()
					ents = append(ents, entry{
						id:   binary.BigEndian.Uint64(it.Key()[len(prefix):]),
						pt:   int64(binary.BigEndian.Uint64(val)),
						data: append([]byte(nil), val[8:]...),
					})
				}
				if err := it.Close(); err != nil || len(ents) != batch {
					b.Fatalf("iter: %d entries, %v", len(ents), err)
				}
			}
		})
	}
}
