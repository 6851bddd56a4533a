package broker_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Consumers come and go while messages flow, and ask for redelivery of
// everything unacked now and then: every message is delivered, an
// acknowledged one never comes back (copies sent before a REDELIVER carry
// the older consumer epoch and are dropped, as the clients do), and the
// backlog drains to zero.
func TestConsumersComingAndGoingLoseNothing(t *testing.T) {
	for _, typ := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared, pb.CommandSubscribe_Failover} {
		t.Run(typ.String(), func(t *testing.T) {
			c := brokertest.Start(t)
			topic := "churn-" + typ.String()
			prod := dial(t, c.ServiceURL())
			pid := prod.producer(topic)
			const n = 600
			rng := rand.New(rand.NewPCG(1, uint64(typ)))
			type member struct {
				p     *peer
				cid   uint64
				epoch uint64
			}
			join := func(i int) *member {
				p := dial(t, c.ServiceURL())
				cid := p.subscribe(topic, "s", typ, named(fmt.Sprint("m", i)), earliest, func(m *pb.CommandSubscribe) { m.ConsumerEpoch = proto.Uint64(0) })
				p.flow(cid, uint32(5+rng.IntN(50)))
				return &member{p: p, cid: cid}
			}
			members := []*member{join(0), join(1), join(2)}
			got := map[string]int{}
			acked := map[string]bool{}
			sent, joined := 0, 3
			for round := 0; len(acked) < n; round++ {
				if round > 5000 {
					t.Fatalf("stuck: %d of %d acknowledged", len(acked), n)
				}
				for k := 0; k < 20 && sent < n; k++ {
					prod.write(sendFrame(pid, uint64(sent), msg{key: fmt.Sprint("k", sent%13), payload: fmt.Sprint(sent)}))
					sent++
				}
				for _, m := range members {
					for {
						f, ok := m.p.wait(5e6, isMessageFor(m.cid))
						if !ok {
							break
						}
						m.p.flow(m.cid, 1)
						if f.Cmd.GetMessage().GetConsumerEpoch() < m.epoch {
							continue // sent before our REDELIVER: stale
						}
						r := decode(f)
						got[r.payload]++
						if acked[r.payload] && typ != pb.CommandSubscribe_Failover {
							t.Fatalf("%s came back after its ack", r.payload)
						}
						if rng.IntN(10) > 0 {
							m.p.ack(m.cid, r.id)
							acked[r.payload] = true
						}
					}
				}
				if rng.IntN(4) == 0 {
					i := rng.IntN(len(members))
					// Its acks must land first: a request answered on the
					// same connection comes after them.
					m := members[i]
					rid := m.p.rid()
					m.p.request(&pb.CommandConsumerStats{RequestId: proto.Uint64(rid), ConsumerId: proto.Uint64(m.cid)}, rid)
					m.p.close()
					members[i] = join(joined)
					joined++
				}
				if sent == n && rng.IntN(3) == 0 {
					for _, m := range members {
						m.epoch++
						m.p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(m.cid), ConsumerEpoch: proto.Uint64(m.epoch)})
					}
				}
			}
			for i := 0; i < n; i++ {
				if got[fmt.Sprint(i)] == 0 {
					t.Fatalf("message %d never delivered", i)
				}
			}
			brokertest.Eventually(t, waitFor, "backlog 0", func() bool { return c.Backlog(topic, "s") == 0 })
		})
	}
}
