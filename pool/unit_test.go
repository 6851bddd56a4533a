package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func TestJavaStringHashMatchesJava(t *testing.T) {
	// Values of String.hashCode() computed by a JVM.
	cases := map[string]int32{
		"":                   0,
		"a":                  97,
		"hello":              99162322,
		"Aa":                 2112,
		"BB":                 2112,
		"key-1":              101943363,
		"polygenelubricants": -2147483648, // Integer.MIN_VALUE: the classic
		"é":                  233,
	}
	// Over UTF-16 code units: "ключ" is 043A 043B 044E 0447; "😀"
	// (U+1F600) is the pair D83D DE00.
	cases["ключ"] = 33309882
	cases["😀"] = 1772899
	cases["a-very-long-key-whose-hash-has-the-sign-bit-set"] = -1665388369
	for s, want := range cases {
		if got := javaStringHash(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
	if p := KeyPartition("polygenelubricants", 7); p != 0 {
		// MIN_VALUE & MAX_VALUE is 0.
		t.Errorf("KeyPartition of a MIN_VALUE hash: %d", p)
	}
	for k := range cases {
		if p := KeyPartition(k, 5); p < 0 || p >= 5 {
			t.Errorf("KeyPartition(%q, 5) = %d", k, p)
		}
	}
}

func TestRoundRobinStaysForABatchThenMovesOn(t *testing.T) {
	r := roundRobin{opts: &BatchingOptions{MaxMessages: 3, MaxBytes: 1 << 20, MaxDelay: time.Hour}}
	var got []int
	for i := 0; i < 9; i++ {
		got = append(got, r.next(10, 4))
	}
	if got[0] != got[1] || got[1] != got[2] || got[3] == got[2] || got[3] != got[5] || got[6] == got[5] {
		t.Fatalf("partitions %v: want runs of 3", got)
	}
	r = roundRobin{opts: &BatchingOptions{MaxMessages: 1000, MaxBytes: 25, MaxDelay: time.Hour}}
	a, b, c := r.next(10, 3), r.next(10, 3), r.next(10, 3)
	if a != b || c == b {
		t.Fatalf("by bytes: %d %d %d", a, b, c)
	}
}

func TestLimiterBlocksInOrderAndHonoursContexts(t *testing.T) {
	l := newLimiter(10)
	ctx := context.Background()
	if err := l.acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.acquire(short, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("over the limit: %v", err)
	}
	done := make(chan struct{}, 2)
	go func() { l.acquire(ctx, 5); done <- struct{}{} }()
	brokertest.Eventually(t, time.Second, "first waiter", func() bool { return l.blocked() == 1 })
	// 1 would fit, but it waits its turn behind the 5.
	go func() { l.acquire(ctx, 1); done <- struct{}{} }()
	brokertest.Eventually(t, time.Second, "second waiter", func() bool { return l.blocked() == 2 })
	l.release(8)
	<-done
	<-done
	l.release(6)
	// One acquisition larger than the limit passes when nothing is held.
	if err := l.acquire(ctx, 50); err != nil {
		t.Fatal(err)
	}
	l.release(50)
	if err := newLimiter(-1).acquire(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
}

func TestRetriesStopAtTheLimitWithATypedError(t *testing.T) {
	ctx := context.Background()
	var tries atomic.Int32
	notNow := pulsarwire.NewServerError(pulsarwire.ErrServiceNotReady.Code, "loading")
	err := OperationRetries{Attempts: 3, Delay: time.Millisecond}.Do(ctx, "lookup t", func(context.Context) error {
		tries.Add(1)
		return fmt.Errorf("lookup t: %w", notNow)
	})
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 3 || tries.Load() != 3 {
		t.Fatalf("got %v after %d tries", err, tries.Load())
	}
	if !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, pulsarwire.ErrServiceNotReady) {
		t.Fatalf("%v does not match its sentinels", err)
	}
	if Retryable(err) {
		t.Fatal("an exhausted retry is retryable again")
	}

	// Unlimited by default, until it works.
	tries.Store(0)
	err = OperationRetries{Delay: time.Millisecond}.Do(ctx, "x", func(context.Context) error {
		if tries.Add(1) < 10 {
			return notNow
		}
		return nil
	})
	if err != nil || tries.Load() != 10 {
		t.Fatalf("%v after %d tries", err, tries.Load())
	}

	// A final error is not retried.
	tries.Store(0)
	err = OperationRetries{Delay: time.Millisecond}.Do(ctx, "x", func(context.Context) error {
		tries.Add(1)
		return pulsarwire.ErrAuthorizationError
	})
	if !errors.Is(err, pulsarwire.ErrAuthorizationError) || tries.Load() != 1 {
		t.Fatalf("%v after %d tries", err, tries.Load())
	}

	// A try that runs past Timeout is cut and tried again.
	tries.Store(0)
	err = OperationRetries{Attempts: 2, Delay: time.Millisecond, Timeout: 10 * time.Millisecond}.Do(ctx, "slow", func(ctx context.Context) error {
		tries.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.As(err, &re) || !errors.Is(err, pulsarwire.ErrTimeout) || tries.Load() != 2 {
		t.Fatalf("%v after %d tries", err, tries.Load())
	}

	// The caller's context ends the waiting.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err = OperationRetries{Delay: time.Hour}.Do(cctx, "x", func(context.Context) error { return notNow })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

func TestRetryableClassifiesConnectionFailures(t *testing.T) {
	if !Retryable(&ConnectError{Addr: "h:1", Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}) {
		t.Error("a refused dial is final")
	}
	if !Retryable(fmt.Errorf("x: %w", pulsarwire.ErrConnectionClosed)) {
		t.Error("a dropped connection is final")
	}
	if Retryable(&ConnectError{Addr: "h:1", Err: pulsarwire.ErrAuthenticationError}) {
		t.Error("refused authentication is retryable")
	}
	if Retryable(fmt.Errorf("x: %w", ErrClosed)) || Retryable(context.Canceled) {
		t.Error("closing or cancelling is retryable")
	}
}

func TestTokenSources(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/tok"
	if err := writeFile(path, "  from-file\n"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMRUN_TEST_TOKEN", "from-env")
	for spec, want := range map[string]string{
		"literal":                  "literal",
		"token:literal":            "literal",
		"file:" + path:             "from-file",
		"file://" + path:           "from-file",
		"env:STREAMRUN_TEST_TOKEN": "from-env",
	} {
		f, err := tokenSource(spec)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if got, _ := f(); got != want {
			t.Errorf("%q gave %q", spec, got)
		}
	}
	for _, bad := range []string{"file:" + dir + "/missing", "env:STREAMRUN_TEST_TOKEN_UNSET", "file:"} {
		if _, err := tokenSource(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if f, err := tokenSource(""); f != nil || err != nil {
		t.Error("an empty token is not 'none'")
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func TestLimiterUnderConcurrencyLosesNoWakeUp(t *testing.T) {
	l := newLimiter(10)
	ctx := context.Background()
	var wg sync.WaitGroup
	var over atomic.Int32
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				n := int64(1 + (g+i)%4)
				if err := l.acquire(ctx, n); err != nil {
					t.Error(err)
					return
				}
				if l.used.Load() > 10 {
					over.Add(1)
				}
				l.release(n)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("stuck: %d blocked, %d used", l.blocked(), l.used.Load())
	}
	if l.used.Load() != 0 || l.blocked() != 0 || l.waiting.Load() != 0 || over.Load() != 0 {
		t.Fatalf("after: used %d, blocked %d, waiting %d, over the limit %d times", l.used.Load(), l.blocked(), l.waiting.Load(), over.Load())
	}
}

func TestCompressionNamesRoundTripAndBadOnesAreRefused(t *testing.T) {
	for _, c := range []Compression{NoCompression, LZ4, ZLIB, ZSTD, Snappy} {
		got, err := ParseCompression(strings.ToUpper(c.String()))
		if err != nil || got != c {
			t.Errorf("%s: parsed as %s, %v", c, got, err)
		}
		if _, err := c.wire(); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	if _, err := ParseCompression("brotli"); err == nil || !strings.Contains(err.Error(), "brotli") {
		t.Errorf("brotli: %v", err)
	}
	_, err := New(context.Background(), Options{ServiceURL: "pulsar://127.0.0.1:1", Producer: ProducerOptions{Compression: 9}})
	if err == nil || !strings.Contains(err.Error(), "Compression 9") {
		t.Errorf("New with compression 9: %v", err)
	}
}

func TestTopicModesAreTheProtocols(t *testing.T) {
	for m, want := range map[TopicMode]pb.CommandGetTopicsOfNamespace_Mode{
		PersistentTopics:    pb.CommandGetTopicsOfNamespace_PERSISTENT,
		NonPersistentTopics: pb.CommandGetTopicsOfNamespace_NON_PERSISTENT,
		AllTopics:           pb.CommandGetTopicsOfNamespace_ALL,
	} {
		if got, err := m.wire(); err != nil || got != want {
			t.Errorf("mode %d: %s, %v", m, got, err)
		}
	}
	if _, err := TopicMode(7).wire(); err == nil || !strings.Contains(err.Error(), "topic mode 7") {
		t.Errorf("mode 7: %v", err)
	}
}
