package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // never returns
	}
	goleak.VerifyTestMain(m)
}

// payload is entry i's data: its size varies (0 to ~330 bytes) so records
// straddle read blocks and segment ends in every way.
func payload(i uint64) []byte {
	p := fmt.Appendf(nil, "entry-%d|", i)
	return append(p, bytes.Repeat([]byte{byte(i)}, int(i*37%320))...)
}

func open(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func topic(t *testing.T, s *Store, name string) *Log {
	t.Helper()
	l, err := s.Topic(name)
	if err != nil {
		t.Fatalf("Topic(%q): %v", name, err)
	}
	return l
}

func appendN(t *testing.T, l *Log, from, to uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		id, err := l.Append(int64(1000+i), payload(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if id != i {
			t.Fatalf("Append gave id %d, want %d", id, i)
		}
	}
}

// readAll reads [from, Next()) in calls of at most max entries and checks
// every entry against payload.
func checkEntries(t *testing.T, l *Log, from, to uint64, max int) {
	t.Helper()
	next := from
	for next < to {
		ents, err := l.Read(next, max, 0)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		if len(ents) == 0 {
			t.Fatalf("Read(%d) returned nothing, want entries up to %d", next, to)
		}
		for _, e := range ents {
			if e.ID != next {
				t.Fatalf("Read gave id %d, want %d", e.ID, next)
			}
			if e.PublishTime != int64(1000+e.ID) || !bytes.Equal(e.Data, payload(e.ID)) {
				t.Fatalf("entry %d: time %d data %q, want %d %q", e.ID, e.PublishTime, e.Data, 1000+e.ID, payload(e.ID))
			}
			next++
		}
	}
	if got := l.Next(); got != to {
		t.Fatalf("Next() = %d, want %d", got, to)
	}
}

// modes runs a test body against memory and disk stores. The disk store uses
// small segments and a small cache so reads cross files and miss the cache.
func modes(t *testing.T, body func(t *testing.T, opts Options)) {
	t.Run("memory", func(t *testing.T) { body(t, Options{}) })
	t.Run("disk", func(t *testing.T) {
		body(t, Options{Dir: t.TempDir(), SegmentBytes: 4 << 10, CacheBytes: 2 << 10})
	})
}

func segFiles(t *testing.T, dir, topicName string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "topics", escape(topicName), "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
