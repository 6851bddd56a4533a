package pool

import (
	"context"
	"testing"

	"golang.org/x/sync/semaphore"
)

// BenchmarkLimiter compares the producers' limiter with
// x/sync/semaphore.Weighted on what a publish does: take one message and
// its bytes, give them back at the receipt, from one goroutine and from
// many. docs/pool.md says why the limiter stays.
func BenchmarkLimiter(b *testing.B) {
	ctx := context.Background()
	b.Run("limiter/serial", func(b *testing.B) {
		l := newLimiter(1 << 20)
		for b.Loop() {
			_ = l.acquire(ctx, 100)
			l.release(100)
		}
	})
	b.Run("semaphore/serial", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		for b.Loop() {
			_ = s.Acquire(ctx, 100)
			s.Release(100)
		}
	})
	b.Run("limiter/parallel", func(b *testing.B) {
		l := newLimiter(1 << 20)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = l.acquire(ctx, 100)
				l.release(100)
			}
		})
	})
	b.Run("semaphore/parallel", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = s.Acquire(ctx, 100)
				s.Release(100)
			}
		})
	})
}
