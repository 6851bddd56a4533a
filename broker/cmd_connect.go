package broker

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// serverVersion is what CONNECTED says the broker is.
const serverVersion = "streamrun-broker"

// handleConnect authenticates the client and answers CONNECTED with the
// lower of the two protocol versions and our max_message_size.
func (cn *conn) handleConnect(m *pb.CommandConnect) bool {
	if cn.connected.Load() {
		cn.log.Warn("closing connection: second CONNECT")
		cn.finish()
		return false
	}
	if cn.c.authRequired() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		principal, err := cn.c.authenticate(ctx, m.GetAuthMethodName(), m.GetAuthData())
		cancel()
		if err != nil {
			cn.log.Warn("closing connection: authentication failed", "method", m.GetAuthMethodName(), "err", err)
			cn.sendError(noRequest, pb.ServerError_AuthenticationError, "Unable to authenticate: "+err.Error())
			cn.finish()
			return false
		}
		cn.principal = principal
	}
	cn.client = m.GetClientVersion()
	cn.protocol = min(m.GetProtocolVersion(), pulsarwire.ProtocolVersion)
	cn.send(&pb.CommandConnected{
		ServerVersion:   proto.String(serverVersion),
		ProtocolVersion: proto.Int32(cn.protocol),
		MaxMessageSize:  proto.Int32(int32(cn.c.opts.MaxMessageSize)),
		FeatureFlags:    &pb.FeatureFlags{},
	})
	cn.connected.Store(true)
	cn.log.Debug("client connected", "client", cn.client, "protocol", cn.protocol, "principal", cn.principal)
	return true
}
