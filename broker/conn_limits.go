package broker

import (
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// refuseTimeout bounds writing the refusal to a connection over a limit.
const refuseTimeout = 5 * time.Second

// remoteIP is the address a connection comes from, without its port: the
// key of the per-IP limit.
func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// overLimit says why a new connection from ip may not be served, "" when
// it may; s.mu held.
func (s *server) overLimit(ip string) string {
	o := s.c.opts
	if o.MaxConnections > 0 && len(s.conns) >= o.MaxConnections {
		return fmt.Sprintf("Reached the maximum number of connections (%d)", o.MaxConnections)
	}
	if o.MaxConnectionsPerIP > 0 && s.perIP[ip] >= o.MaxConnectionsPerIP {
		return fmt.Sprintf("Reached the maximum number of connections from %s (%d per IP)", ip, o.MaxConnectionsPerIP)
	}
	return ""
}

// refuse answers a connection over a limit with an ERROR, as Apache Pulsar
// does, and closes it. It runs on its own goroutine (counted in s.wg) so a
// client that does not read cannot hold up the accept loop.
func (s *server) refuse(nc net.Conn, why string) {
	defer s.wg.Done()
	defer nc.Close()
	s.c.log.Warn("connection refused", "broker", s.index, "peer", nc.RemoteAddr().String(), "reason", why)
	b, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(&pb.CommandError{
		RequestId: proto.Uint64(noRequest), Error: pb.ServerError_NotAllowedError.Enum(), Message: proto.String(why)}))
	if err != nil {
		return
	}
	nc.SetWriteDeadline(time.Now().Add(refuseTimeout))
	nc.Write(b)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
