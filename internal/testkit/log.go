package testkit

import (
	"bytes"
	"io"
	"os"
	"sync"
	"testing"
)

// LogWriter is where a test's component (a broker, a client) logs: kept,
// and printed with the test's output only when the test fails. With
// STREAMRUN_TEST_LOG=1 it is the process's stderr, at once.
func LogWriter(t testing.TB, name string) io.Writer {
	if os.Getenv("STREAMRUN_TEST_LOG") == "1" {
		return os.Stderr
	}
	buf := &SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- %s log ----\n%s---- end of %s log ----", name, buf.String(), name)
		}
	})
	return buf
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a log or an
// output a test reads while something writes it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
