package brokertest_test

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

func TestTargetIsAnEmbeddedBrokerUnlessPulsarIsNamed(t *testing.T) {
	p := brokertest.Target(t)
	if brokertest.PulsarURL() != "" {
		if !p.Pulsar() || p.URL != brokertest.PulsarURL() || p.Admin == "" {
			t.Fatalf("with %s set: %+v", brokertest.PulsarURLEnv, p)
		}
		return
	}
	if p.Pulsar() || !strings.HasPrefix(p.URL, "pulsar://127.0.0.1:") || !strings.HasPrefix(p.Admin, "http://127.0.0.1:") {
		t.Fatalf("embedded: %+v", p)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "pulsar://"))
	if err != nil {
		t.Fatalf("the embedded broker does not listen: %v", err)
	}
	conn.Close()
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(10 * time.Millisecond)
			n.Add(1)
		}
	}()
	brokertest.Eventually(t, 10*time.Second, "three ticks", func() bool { return n.Load() == 3 })
}

func TestLogWriterKeepsWhatIsWritten(t *testing.T) {
	var b brokertest.SyncBuffer
	b.Write([]byte("one "))
	b.Write([]byte("two"))
	if b.String() != "one two" {
		t.Fatalf("%q", b.String())
	}
	w := brokertest.LogWriter(t, "test")
	if _, err := w.Write([]byte("kept\n")); err != nil {
		t.Fatal(err)
	}
}
