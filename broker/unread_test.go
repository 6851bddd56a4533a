package broker_test

import (
	"net"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// unreadConn is an Exclusive consumer (id 1) on a raw connection that
// reads only when the test says so, unlike peer, which always reads: for
// tests of a client that stops reading.
type unreadConn struct {
	t  testing.TB
	nc net.Conn
	r  *pulsarwire.Reader
}

func dialUnread(t testing.TB, url, topic string, pos pb.CommandSubscribe_InitialPosition) *unreadConn {
	t.Helper()
	nc, err := net.Dial("tcp", serviceAddr(url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	u := &unreadConn{t: t, nc: nc, r: pulsarwire.NewReader(nc, pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))}
	u.send(&pb.CommandConnect{ClientVersion: proto.String("unread"), ProtocolVersion: proto.Int32(20)})
	u.r.Next()
	u.send(&pb.CommandSubscribe{Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), InitialPosition: pos.Enum()})
	u.r.Next()
	return u
}

// send writes one command; the test goroutine only.
func (u *unreadConn) send(m proto.Message) {
	b, _ := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(m))
	if _, err := u.nc.Write(b); err != nil {
		u.t.Fatal(err)
	}
}

// readMessages reads until n MESSAGE frames have arrived.
func (u *unreadConn) readMessages(n int) {
	for got := 0; got < n; {
		f, err := u.r.Next()
		if err != nil {
			u.t.Fatalf("after %d messages: %v", got, err)
		}
		if f.Cmd.GetType() == pb.BaseCommand_MESSAGE {
			got++
		}
	}
}
