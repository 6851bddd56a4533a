package runtime_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// answerEater is a client's dialer whose connections drop the next
// successful END_TXN answers it is armed for, leaving the connection up:
// the broker ended the transaction, the client waits in vain, and its
// commit asked again after the try's timeout is TransactionNotFound. It
// needs no fault injection, so it works on Apache Pulsar too.
type answerEater struct {
	armed atomic.Int32 // answers to drop
	eaten atomic.Int32
}

func (d *answerEater) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &eatingConn{Conn: nc, d: d}, nil
}

// eatingConn passes the broker's frames on whole, but those it eats.
type eatingConn struct {
	net.Conn
	d       *answerEater
	in, out []byte // read, not yet framed; framed, not yet passed on
}

func (c *eatingConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		for len(c.in) >= 4 {
			size := int(binary.BigEndian.Uint32(c.in))
			if len(c.in) < 4+size {
				break
			}
			frame := c.in[:4+size]
			c.in = c.in[4+size:]
			if c.d.armed.Load() > 0 {
				f, err := pulsarwire.ParseFrame(frame[4:])
				if err == nil && f.Cmd.GetType() == pb.BaseCommand_END_TXN_RESPONSE && f.Cmd.GetEndTxnResponse().Error == nil &&
					c.d.armed.Add(-1) >= 0 {
					c.d.eaten.Add(1)
					continue
				}
			}
			c.out = append(c.out, frame...)
		}
		if len(c.out) > 0 {
			break
		}
		buf := make([]byte, 64<<10)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		if err != nil && n == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}
