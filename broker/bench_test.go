package broker_test

import (
	"fmt"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// BenchmarkPublish: pipelined SENDs of one 100-message batch (100 B each)
// and their receipts, through the store in a data directory (no fsync).
func BenchmarkPublish(b *testing.B) {
	c := brokertest.Start(b, func(o *broker.Options) { o.Memory = false; o.DataDir = b.TempDir() })
	p := dial(b, c.ServiceURL())
	pid := p.producer("bench-publish")
	batch := make([]string, 100)
	for i := range batch {
		batch[i] = fmt.Sprintf("%0100d", i)
	}
	frame := sendFrame(pid, 0, msg{batch: batch})
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < b.N; i++ {
			p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
		}
	}()
	for i := 0; i < b.N; i++ {
		p.write(frame)
	}
	<-done
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkDispatch: a backlog of batched entries drained by one
// Exclusive consumer that granted permits for all of it and acks each.
func BenchmarkDispatch(b *testing.B) {
	c := brokertest.Start(b, func(o *broker.Options) { o.Memory = false; o.DataDir = b.TempDir() })
	p := dial(b, c.ServiceURL())
	pid := p.producer("bench-dispatch")
	batch := make([]string, 100)
	for i := range batch {
		batch[i] = fmt.Sprintf("%0100d", i)
	}
	frame := sendFrame(pid, 0, msg{batch: batch})
	for i := 0; i < b.N; i++ {
		p.write(frame)
	}
	for i := 0; i < b.N; i++ {
		p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
	}
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	cid := p.subscribe("bench-dispatch", "s", pb.CommandSubscribe_Exclusive, earliest)
	p.flow(cid, uint32(100*b.N))
	for i := 0; i < b.N; i++ {
		f := p.expect("message", isMessageFor(cid))
		p.ack(cid, f.Cmd.GetMessage().GetMessageId())
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "msg/s")
}
