package broker_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Entries from 16 KiB up go to the socket from the buffer they were read
// into (one writev with what was queued before them), and only what the
// socket does not take is copied into the connection's buffer. With a
// client that does not read until everything has been dispatched, the
// socket fills part-way through a frame, small and big entries take
// turns, and every entry must still arrive whole, unchanged and in order.
func TestEntriesWrittenWhereTheyWereReadArriveWholeAndInOrder(t *testing.T) {
	c := brokertest.Start(t)
	topic := "direct-write"
	var sizes []int
	for range 4 {
		sizes = append(sizes, 100, 16<<10, 1<<10, 300<<10, 17<<10, 50, 1<<20, 40<<10, 16<<10-1, 2<<20, 64<<10)
	}
	payload := func(i int) string {
		b := bytes.Repeat([]byte(fmt.Sprintf("%03d-", i)), sizes[i]/4+1)
		return string(b[:sizes[i]])
	}
	p := dial(t, c.ServiceURL())
	pid := p.producer(topic)
	for i := range sizes {
		p.publish(pid, uint64(i), msg{payload: payload(i)})
	}
	u := dialUnread(t, c.ServiceURL(), topic, pb.CommandSubscribe_Earliest)
	u.send(&pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(uint32(len(sizes)))})
	// Until dispatch stops: all sent, or held off by a full connection.
	last := int64(-1)
	brokertest.Eventually(t, waitFor, "dispatch to stop", func() bool {
		time.Sleep(100 * time.Millisecond)
		ci := c.Consumers(topic, "s")
		if len(ci) != 1 || ci[0].Dispatched == 0 || ci[0].Dispatched != last {
			if len(ci) == 1 {
				last = ci[0].Dispatched
			}
			return false
		}
		return true
	})
	for i := range sizes {
		f, err := u.r.Next()
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if f.Cmd.GetType() != pb.BaseCommand_MESSAGE {
			t.Fatalf("entry %d: got %v, want a MESSAGE", i, f.Cmd.GetType())
		}
		r := decode(f)
		if got := r.id.GetEntryId(); got != uint64(i) {
			t.Fatalf("got entry %d, want %d", got, i)
		}
		if r.payload != payload(i) {
			t.Fatalf("entry %d: %d bytes arrived, %d sent, or they differ", i, len(r.payload), sizes[i])
		}
	}
}
