package broker_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The broker's fuzz targets feed bytes to a real broker: its connection
// handler through a loopback connection, its admin API through HTTP
// requests. Whatever comes in, the broker answers or closes, never panics
// (a panic it recovers from is logged as a BROKER BUG, which fails the
// target too) and keeps serving everyone else.

// bugWatch is a log sink that remembers whether the broker logged a bug.
type bugWatch struct{ seen atomic.Value }

func (b *bugWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("BROKER BUG")) && b.seen.Load() == nil {
		b.seen.Store(string(p))
	}
	return len(p), nil
}

func (b *bugWatch) check(t *testing.T, what string) {
	t.Helper()
	if s := b.seen.Load(); s != nil {
		t.Fatalf("after %s the broker logged a bug: %s", what, s)
	}
}

func fuzzBroker(f *testing.F) (*broker.Cluster, *bugWatch) {
	w := &bugWatch{}
	c := brokertest.Start(f, func(o *broker.Options) {
		o.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
		o.MaxMessageSize = 64 << 10 // big frames are refused early, not read
	})
	return c, w
}

func frameOf(tb testing.TB, m proto.Message) []byte {
	b, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(m))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var (
	fuzzConnect     = &pb.CommandConnect{ClientVersion: proto.String("fuzz"), ProtocolVersion: proto.Int32(20)}
	connectFrame, _ = pulsarwire.AppendCommand(nil, pulsarwire.Wrap(fuzzConnect))
)

// connSeeds are conversations a client really has, for the fuzzer to bend.
func connSeeds(f *testing.F) [][]byte {
	topic := "persistent://public/default/fuzz-seed"
	entry, err := pulsarwire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)}, []byte("hello"))
	if err != nil {
		f.Fatal(err)
	}
	send, err := pulsarwire.AppendEntryCommand(nil, pulsarwire.Wrap(&pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0), NumMessages: proto.Int32(1)}), entry)
	if err != nil {
		f.Fatal(err)
	}
	cat := func(ms ...any) []byte {
		var out []byte
		for _, m := range ms {
			switch m := m.(type) {
			case []byte:
				out = append(out, m...)
			case proto.Message:
				out = append(out, frameOf(f, m)...)
			}
		}
		return out
	}
	return [][]byte{
		nil,
		cat(&pb.CommandPing{}),
		cat(&pb.CommandLookupTopic{Topic: proto.String(topic), RequestId: proto.Uint64(1)}),
		cat(&pb.CommandPartitionedTopicMetadata{Topic: proto.String(topic), RequestId: proto.Uint64(1)}),
		cat(&pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}, send,
			&pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(3)}),
		cat(&pb.CommandSubscribe{Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
			ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(4), InitialPosition: pb.CommandSubscribe_Earliest.Enum()},
			&pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)},
			&pb.CommandAck{ConsumerId: proto.Uint64(1), AckType: pb.CommandAck_Cumulative.Enum(), MessageId: []*pb.MessageIdData{{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(0)}}},
			&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(1)},
			&pb.CommandSeek{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(5), MessagePublishTime: proto.Uint64(0)},
			&pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(6)},
			&pb.CommandUnsubscribe{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(7)}),
		cat(&pb.CommandGetTopicsOfNamespace{Namespace: proto.String("public/default"), RequestId: proto.Uint64(8)}),
		cat(&pb.CommandGetSchema{Topic: proto.String(topic), RequestId: proto.Uint64(9)}),
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	}
}

// FuzzConn: bytes on a real broker connection, after a CONNECT or
// instead of one. The broker answers or closes (once the client has
// finished sending, it closes within waitFor), and a bystander connection
// opened before keeps being served.
func FuzzConn(f *testing.F) {
	c, bugs := fuzzBroker(f)
	addr := serviceAddr(c.ServiceURL())
	for _, s := range connSeeds(f) {
		f.Add(true, s)
	}
	f.Add(false, frameOf(f, fuzzConnect))
	bystander, err := rawConnect(addr)
	if err != nil {
		f.Fatalf("bystander: %v", err)
	}
	f.Cleanup(func() { bystander.close() })
	var runs atomic.Int64
	f.Fuzz(func(t *testing.T, connect bool, in []byte) {
		var out []byte
		if connect {
			out = append(out, connectFrame...)
		}
		out = append(out, in...)
		if err := converse(addr, out); err != nil {
			t.Fatal(err)
		}
		bugs.check(t, "a conversation")
		// Checking the bystander costs a round trip: now and then.
		if runs.Add(1)%64 == 1 {
			if err := bystander.ping(); err != nil {
				t.Fatalf("the bystander's connection stopped being served: %v", err)
			}
		}
	})
}

// converse writes b on a new connection, ends its sending side and reads
// until the broker closes.
func converse(addr string, b []byte) error {
	nc, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		return fmt.Errorf("dial: %w (the broker stopped accepting)", err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(waitFor))
	// The broker may close before reading everything (bad input): a
	// failed write is fine, what counts is that it then closes.
	nc.Write(b)
	nc.(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		return fmt.Errorf("the broker neither answered and closed nor closed within %v: %w", waitFor, err)
	}
	return nil
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// rawPeer is a connected client that only pings, for use inside fuzz
// functions (the peer helpers report to the testing.TB they were made with).
type rawPeer struct {
	nc net.Conn
	r  *pulsarwire.Reader
}

func rawConnect(addr string) (*rawPeer, error) {
	nc, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		return nil, err
	}
	p := &rawPeer{nc: nc, r: pulsarwire.NewReader(bufio.NewReader(nc), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))}
	if err := p.roundTrip(fuzzConnect, pb.BaseCommand_CONNECTED); err != nil {
		nc.Close()
		return nil, err
	}
	return p, nil
}

func (p *rawPeer) ping() error { return p.roundTrip(&pb.CommandPing{}, pb.BaseCommand_PONG) }

func (p *rawPeer) close() { p.nc.Close() }

// roundTrip sends m and waits for a frame of type want, answering the
// broker's own PINGs meanwhile.
func (p *rawPeer) roundTrip(m proto.Message, want pb.BaseCommand_Type) error {
	b, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(m))
	if err != nil {
		return err
	}
	p.nc.SetDeadline(time.Now().Add(waitFor))
	if _, err := p.nc.Write(b); err != nil {
		return err
	}
	for {
		f, err := p.r.Next()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", want, err)
		}
		switch f.Cmd.GetType() {
		case want:
			return nil
		case pb.BaseCommand_PING:
			pong, _ := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(&pb.CommandPong{}))
			p.nc.Write(pong)
		}
	}
}

// FuzzAdmin: requests to the admin API, any method, path and body. Each
// gets a response (never a dropped connection, which is what a handler
// panic gives), a server error is a bug, errors come as JSON with a
// reason, and the API keeps answering.
func FuzzAdmin(f *testing.F) {
	c, bugs := fuzzBroker(f)
	base := c.AdminURL()
	for _, s := range []struct{ method, path, body string }{
		{"GET", "/admin/v2/clusters", ""},
		{"PUT", "/admin/v2/tenants/acme", `{"allowedClusters":["standalone"]}`},
		{"PUT", "/admin/v2/namespaces/public/ns", ""},
		{"PUT", "/admin/v2/persistent/public/default/t", ""},
		{"PUT", "/admin/v2/persistent/public/default/p/partitions", "3"},
		{"POST", "/admin/v2/persistent/public/default/p/partitions", "4"},
		{"PUT", "/admin/v2/persistent/public/default/t/subscription/s", `{"ledgerId":-1,"entryId":-1}`},
		{"POST", "/admin/v2/persistent/public/default/t/subscription/s/resetcursor", `{"ledgerId":1,"entryId":0,"partitionIndex":-1}`},
		{"POST", "/admin/v2/persistent/public/default/t/subscription/s/resetcursor/0", ""},
		{"POST", "/admin/v2/persistent/public/default/t/subscription/s/skip_all", ""},
		{"GET", "/admin/v2/persistent/public/default/t/stats", ""},
		{"GET", "/admin/v2/persistent/public/default/p/partitioned-stats", ""},
		{"GET", "/admin/v2/persistent/public/default/t/internalStats", ""},
		{"PUT", "/admin/v2/persistent/public/default/t/unload", ""},
		{"DELETE", "/admin/v2/persistent/public/default/t", ""},
		{"GET", "/lookup/v2/topic/persistent/public/default/t", ""},
		{"GET", "/admin/v2/persistent/public/default/%2e%2e%2f%2e%2e/stats", ""},
	} {
		f.Add(s.method, s.path, []byte(s.body))
	}
	client := &http.Client{Timeout: waitFor}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		u, err := url.Parse(base + "/" + strings.TrimPrefix(path, "/"))
		if err != nil || u.Host != strings.TrimPrefix(base, "http://") {
			return
		}
		req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %q: no response: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %q: %d %s", method, path, resp.StatusCode, b)
		}
		// net/http answers a request it cannot parse itself ("400 Bad
		// Request", plain text) before any handler runs.
		byServer := resp.StatusCode == http.StatusBadRequest && string(b) == "400 Bad Request"
		if resp.StatusCode >= 400 && method != http.MethodHead && !byServer && !bytes.Contains(b, []byte(`"reason"`)) {
			t.Fatalf("%s %q: %d without a reason: %q", method, path, resp.StatusCode, b)
		}
		bugs.check(t, method+" "+path)
		resp, err = client.Get(base + "/admin/v2/clusters")
		if err != nil {
			t.Fatalf("after %s %q the admin API stopped answering: %v", method, path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("after %s %q: GET clusters: %d", method, path, resp.StatusCode)
		}
	})
}

// first reads the broker's first frame and returns its type, -1 when the
// connection ended or timed out before one came.
func (p *rawPeer) first() pb.BaseCommand_Type {
	if p.r == nil {
		p.r = pulsarwire.NewReader(bufio.NewReaderSize(p.nc, 4<<10), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
	}
	f, err := p.r.Next()
	if err != nil {
		return -1
	}
	return f.Cmd.GetType()
}
