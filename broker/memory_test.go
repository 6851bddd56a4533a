package broker_test

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// A memory broker gives back what a topic held once its entries are
// trimmed: messages to a topic with no subscription are dropped after
// Retention, and the live heap returns near where it started (it held the
// whole topic before: the entries and the array indexing them). A
// subscription holds the messages while the heap is measured; deleting it
// leaves a topic with no subscription.
func TestMemoryReturnsAfterTrim(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Retention = 200 * time.Millisecond
		o.CursorFlush = 50 * time.Millisecond
		o.Logger = discard()
	})
	const n, size = 200_000, 100
	topicURL := c.AdminURL() + "/admin/v2/persistent/public/default/no-subscription"
	adminDo(t, "PUT", topicURL, "", 204)
	adminDo(t, "PUT", topicURL+"/subscription/hold", "", 204)
	heap0 := heapInUse()
	publishMany(t, serviceAddr(c.ServiceURL()), "persistent://public/default/no-subscription", n, size)
	held := heapInUse()
	adminDo(t, "DELETE", topicURL+"/subscription/hold", "", 204)
	stats := func() (storage, in int64) {
		var st struct {
			StorageSize  int64 `json:"storageSize"`
			MsgInCounter int64 `json:"msgInCounter"`
		}
		if err := json.Unmarshal([]byte(adminDo(t, "GET", topicURL+"/stats", "", 200)), &st); err != nil {
			t.Fatal(err)
		}
		return st.StorageSize, st.MsgInCounter
	}
	if _, in := stats(); in != n {
		t.Fatalf("msgInCounter %d, want %d", in, n)
	}
	brokertest.Eventually(t, time.Minute, "the topic trimmed to nothing", func() bool {
		s, _ := stats()
		return s == 0
	})
	after := heapInUse()
	t.Logf("%d messages of %d bytes to a topic with no subscription: live heap %d MiB at start, %d MiB holding them, %d MiB after trim",
		n, size, heap0>>20, held>>20, after>>20)
	if held < heap0+n*size {
		t.Fatalf("the heap grew by %d bytes for %d bytes of messages: not measuring what the broker holds", held-heap0, n*size)
	}
	// What may stay: the arena chunk being filled, small indexes, the
	// client and test state; 10% of what the messages took is plenty.
	if grew := int64(after) - int64(heap0); grew > int64(held-heap0)/10 {
		t.Fatalf("live heap after trim %d MiB, start %d MiB, holding %d MiB: %d bytes not given back", after>>20, heap0>>20, held>>20, grew)
	}
}

// publishMany sends n messages of size bytes on one producer, 1000 SENDs
// per write, and waits for every receipt.
func publishMany(t *testing.T, addr, topic string, n, size int) {
	nc, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := &rawPeer{nc: nc, r: pulsarwire.NewReader(bufio.NewReader(nc), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))}
	if err := p.roundTrip(fuzzConnect, pb.BaseCommand_CONNECTED); err != nil {
		t.Fatal(err)
	}
	if err := p.roundTrip(&pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}, pb.BaseCommand_PRODUCER_SUCCESS); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, size)
	var buf []byte
	for seq := 0; seq < n; {
		buf = buf[:0]
		for end := min(seq+1000, n); seq < end; seq++ {
			buf = append(buf, sendFrame(1, uint64(seq), msg{payload: string(payload)})...)
		}
		nc.SetDeadline(time.Now().Add(waitFor))
		if _, err := nc.Write(buf); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := p.r.Next()
			if err != nil {
				t.Fatalf("waiting for receipt %d: %v", seq-1, err)
			}
			if e := f.Cmd.GetSendError(); e != nil {
				t.Fatalf("send %d: %v %s", e.GetSequenceId(), e.GetError(), e.GetMessage())
			}
			if r := f.Cmd.GetSendReceipt(); r != nil && r.GetSequenceId() == uint64(seq-1) {
				break
			}
		}
	}
}
