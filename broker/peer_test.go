package broker_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// peer is a minimal protocol-level client for tests: it speaks the wire
// through pulsarwire and lets a test send commands and wait for answers.
type peer struct {
	t      testing.TB
	nc     net.Conn
	frames chan pulsarwire.Frame
	done   chan struct{}
	mu     sync.Mutex
	held   []pulsarwire.Frame // frames read while waiting for another
	wmu    sync.Mutex
	ids    atomic.Uint64
	closed atomic.Bool
	pings  atomic.Int64
	silent atomic.Bool // do not answer PING
}

const waitFor = 10 * time.Second

func serviceAddr(url string) string {
	return strings.TrimPrefix(strings.TrimPrefix(url, "pulsar://"), "pulsar+ssl://")
}

// dialRaw connects without CONNECT.
func dialRaw(t testing.TB, url string) *peer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", serviceAddr(url), waitFor)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	p := &peer{t: t, nc: nc, frames: make(chan pulsarwire.Frame, 100000), done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(p.close)
	return p
}

// dial connects and completes CONNECT/CONNECTED.
func dial(t testing.TB, url string, auth ...string) *peer {
	t.Helper()
	p := dialRaw(t, url)
	c := &pb.CommandConnect{ClientVersion: proto.String("streamrun-test"), ProtocolVersion: proto.Int32(20)}
	if len(auth) == 1 {
		c.AuthMethodName = proto.String("token")
		c.AuthData = []byte(auth[0])
	}
	p.send(c)
	f := p.expect("CONNECTED", func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_CONNECTED || c.GetType() == pb.BaseCommand_ERROR
	})
	if f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("connect: %v", f.Cmd)
	}
	return p
}

func (p *peer) readLoop() {
	defer close(p.done)
	r := pulsarwire.NewReader(bufio.NewReader(p.nc), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
	for {
		f, err := r.Next()
		if err != nil {
			return
		}
		if f.Cmd.GetType() == pb.BaseCommand_PING {
			p.pings.Add(1)
			if !p.silent.Load() {
				p.send(&pb.CommandPong{})
			}
			continue
		}
		p.frames <- f
	}
}

func (p *peer) close() {
	if p.closed.Swap(true) {
		return
	}
	p.nc.Close()
	<-p.done
}

func (p *peer) rid() uint64 { return p.ids.Add(1) }

func (p *peer) send(m proto.Message) {
	p.t.Helper()
	b, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(m))
	if err != nil {
		p.t.Fatalf("encode: %v", err)
	}
	p.write(b)
}

func (p *peer) write(b []byte) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.nc.SetWriteDeadline(time.Now().Add(waitFor))
	p.nc.Write(b)
}

// expect waits for a frame matching f, keeping the others for later.
func (p *peer) expect(what string, match func(*pb.BaseCommand) bool) pulsarwire.Frame {
	p.t.Helper()
	f, ok := p.wait(waitFor, match)
	if !ok {
		p.t.Fatalf("no %s within %v", what, waitFor)
	}
	return f
}

// wait is expect that reports a timeout instead of failing.
func (p *peer) wait(d time.Duration, match func(*pb.BaseCommand) bool) (pulsarwire.Frame, bool) {
	p.mu.Lock()
	for i, f := range p.held {
		if match(f.Cmd) {
			p.held = append(p.held[:i:i], p.held[i+1:]...)
			p.mu.Unlock()
			return f, true
		}
	}
	p.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case f := <-p.frames:
			if match(f.Cmd) {
				return f, true
			}
			p.mu.Lock()
			p.held = append(p.held, f)
			p.mu.Unlock()
		case <-p.done:
			// Drain what was read before the end.
			for {
				select {
				case f := <-p.frames:
					if match(f.Cmd) {
						return f, true
					}
					p.mu.Lock()
					p.held = append(p.held, f)
					p.mu.Unlock()
				default:
					return pulsarwire.Frame{}, false
				}
			}
		case <-timer.C:
			return pulsarwire.Frame{}, false
		}
	}
}

// closedByBroker waits until the broker closes the connection.
func (p *peer) closedByBroker() bool {
	select {
	case <-p.done:
		return true
	case <-time.After(waitFor):
		return false
	}
}

// response returns the answer to request rid: any command carrying it.
func (p *peer) response(rid uint64) *pb.BaseCommand {
	p.t.Helper()
	return p.expect(fmt.Sprintf("answer to request %d", rid), func(c *pb.BaseCommand) bool {
		id, ok := responseID(c)
		return ok && id == rid
	}).Cmd
}

// responseID is the request id an answer carries (the command table
// knows which kinds answer and where their id is).
func responseID(c *pb.BaseCommand) (uint64, bool) {
	if !pulsarwire.Describe(c.GetType()).IsAnswer {
		return 0, false
	}
	return pulsarwire.RequestID(c)
}

// errOf returns the server error in a response, nil for success.
func errOf(c *pb.BaseCommand) error { return pulsarwire.Refused(c) }

// ---------------------------------------------------------------- helpers

func (p *peer) lookup(topic string) *pb.CommandLookupTopicResponse {
	p.t.Helper()
	rid := p.rid()
	p.send(&pb.CommandLookupTopic{Topic: proto.String(topic), RequestId: proto.Uint64(rid)})
	return p.response(rid).GetLookupTopicResponse()
}

// createProducer opens a producer and returns its id, or the error.
func (p *peer) createProducer(topic, name string) (uint64, error) {
	p.t.Helper()
	rid := p.rid()
	pid := p.rid()
	m := &pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(pid), RequestId: proto.Uint64(rid)}
	if name != "" {
		m.ProducerName = proto.String(name)
	}
	p.send(m)
	if err := errOf(p.response(rid)); err != nil {
		return 0, err
	}
	return pid, nil
}

func (p *peer) producer(topic string) uint64 {
	p.t.Helper()
	id, err := p.createProducer(topic, "")
	if err != nil {
		p.t.Fatalf("producer on %s: %v", topic, err)
	}
	return id
}

type msg struct {
	deliverAt int64 // unix ms; 0: at once
	key       string
	payload   string
	batch     []string // when set: a batch of these payloads
}

// sendFrame encodes a SEND.
func sendFrame(pid, seq uint64, m msg) []byte {
	md := &pb.MessageMetadata{ProducerName: proto.String("test"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}
	if m.key != "" {
		md.PartitionKey = proto.String(m.key)
	}
	if m.deliverAt != 0 {
		md.DeliverAtTime = proto.Int64(m.deliverAt)
	}
	payload := []byte(m.payload)
	n := int32(1)
	if m.batch != nil {
		payload = nil
		for _, b := range m.batch {
			payload, _ = pulsarwire.AppendBatchMessage(payload, &pb.SingleMessageMetadata{}, []byte(b))
		}
		n = int32(len(m.batch))
		md.NumMessagesInBatch = proto.Int32(n)
	}
	b, err := pulsarwire.AppendPayloadCommand(nil, pulsarwire.Wrap(&pb.CommandSend{ProducerId: proto.Uint64(pid), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(n)}), md, payload)
	if err != nil {
		panic(err)
	}
	return b
}

// publish sends one message and waits for its receipt.
func (p *peer) publish(pid, seq uint64, m msg) *pb.CommandSendReceipt {
	p.t.Helper()
	p.write(sendFrame(pid, seq, m))
	f := p.expect(fmt.Sprintf("receipt %d", seq), func(c *pb.BaseCommand) bool {
		return (c.GetType() == pb.BaseCommand_SEND_RECEIPT && c.GetSendReceipt().GetSequenceId() == seq && c.GetSendReceipt().GetProducerId() == pid) ||
			(c.GetType() == pb.BaseCommand_SEND_ERROR && c.GetSendError().GetSequenceId() == seq)
	})
	if err := errOf(f.Cmd); err != nil {
		p.t.Fatalf("publish %d: %v", seq, err)
	}
	return f.Cmd.GetSendReceipt()
}

type subOpt func(*pb.CommandSubscribe)

func earliest(m *pb.CommandSubscribe) { m.InitialPosition = pb.CommandSubscribe_Earliest.Enum() }
func named(name string) subOpt {
	return func(m *pb.CommandSubscribe) { m.ConsumerName = proto.String(name) }
}

func (p *peer) trySubscribe(topic, sub string, typ pb.CommandSubscribe_SubType, opts ...subOpt) (uint64, error) {
	p.t.Helper()
	rid := p.rid()
	cid := p.rid()
	m := &pb.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String(sub), SubType: typ.Enum(),
		ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid), ConsumerName: proto.String(fmt.Sprintf("c%d", cid)),
	}
	for _, o := range opts {
		o(m)
	}
	p.send(m)
	if err := errOf(p.response(rid)); err != nil {
		return 0, err
	}
	return cid, nil
}

func (p *peer) subscribe(topic, sub string, typ pb.CommandSubscribe_SubType, opts ...subOpt) uint64 {
	p.t.Helper()
	cid, err := p.trySubscribe(topic, sub, typ, opts...)
	if err != nil {
		p.t.Fatalf("subscribe %s/%s: %v", topic, sub, err)
	}
	return cid
}

func (p *peer) flow(cid uint64, n uint32) {
	p.send(&pb.CommandFlow{ConsumerId: proto.Uint64(cid), MessagePermits: proto.Uint32(n)})
}

type received struct {
	id         *pb.MessageIdData
	payload    string
	key        string
	batch      []string
	redelivery uint32
}

func isMessageFor(cid uint64) func(*pb.BaseCommand) bool {
	return func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_MESSAGE && c.GetMessage().GetConsumerId() == cid
	}
}

func decode(f pulsarwire.Frame) received {
	r := received{id: f.Cmd.GetMessage().GetMessageId(), redelivery: f.Cmd.GetMessage().GetRedeliveryCount(), key: f.Metadata.GetPartitionKey()}
	if f.Metadata.NumMessagesInBatch != nil {
		ms, _ := pulsarwire.SplitBatch(f.Payload, int(f.Metadata.GetNumMessagesInBatch()))
		for _, m := range ms {
			r.batch = append(r.batch, string(m.Payload))
		}
	} else {
		r.payload = string(f.Payload)
	}
	return r
}

// receive waits for the next message to consumer cid.
func (p *peer) receive(cid uint64) received {
	p.t.Helper()
	return decode(p.expect(fmt.Sprintf("message for consumer %d", cid), isMessageFor(cid)))
}

// noMessage checks that nothing arrives for cid for a while (used only
// where the absence of a message is the behaviour under test).
func (p *peer) noMessage(cid uint64, d time.Duration) {
	p.t.Helper()
	if f, ok := p.wait(d, isMessageFor(cid)); ok {
		p.t.Fatalf("unexpected message for consumer %d: %v", cid, decode(f))
	}
}

func (p *peer) ack(cid uint64, ids ...*pb.MessageIdData) {
	p.send(&pb.CommandAck{ConsumerId: proto.Uint64(cid), AckType: pb.CommandAck_Individual.Enum(), MessageId: ids})
}

func (p *peer) request(m proto.Message, rid uint64) *pb.BaseCommand {
	p.t.Helper()
	p.send(m)
	return p.response(rid)
}

func (p *peer) closeConsumer(cid uint64) {
	p.t.Helper()
	rid := p.rid()
	if err := errOf(p.request(&pb.CommandCloseConsumer{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid)); err != nil {
		p.t.Fatalf("close consumer: %v", err)
	}
}

var _ = errors.Is
var _ = io.EOF

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
