package broker_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Bad input closes (or is answered on) that one connection, with a logged
// reason naming the peer; a bystander's connection keeps working.
func TestBadInputAffectsOnlyItsConnection(t *testing.T) {
	logs := &brokertest.SyncBuffer{}
	c := brokertest.Start(t, func(o *broker.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	bystander := dial(t, c.ServiceURL())
	bcid := bystander.subscribe("calm", "s", pb.CommandSubscribe_Exclusive)
	bystander.flow(bcid, 1000)
	bpid := bystander.producer("calm")
	seq := uint64(0)
	stillWorks := func(after string) {
		t.Helper()
		bystander.publish(bpid, seq, msg{payload: after})
		seq++
		if m := bystander.receive(bcid); m.payload != after {
			t.Fatalf("bystander after %s got %q", after, m.payload)
		}
	}
	frame := func(cmd []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(cmd)+4))
		b = binary.BigEndian.AppendUint32(b, uint32(len(cmd)))
		return append(b, cmd...)
	}

	cases := []struct {
		name   string
		bytes  func(p *peer) []byte
		closes bool   // the broker closes the connection
		answer string // else: the answer expected
		log    string // what the log says
	}{
		{name: "garbage", closes: true, log: "bad input", bytes: func(*peer) []byte {
			return append([]byte{0, 0, 0, 40, 0, 0, 0, 36}, bytes.Repeat([]byte{0xff}, 36)...)
		}},
		{name: "truncated frame", closes: true, log: "bad input", bytes: func(p *peer) []byte {
			b, _ := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(&pb.CommandPing{}))
			b = binary.BigEndian.AppendUint32(b[:0:0], 100) // says 100 bytes, sends 4
			return append(b, 0, 0, 0, 2)
		}},
		{name: "oversized frame", closes: true, log: "frame too large", bytes: func(*peer) []byte {
			return binary.BigEndian.AppendUint32(nil, 64<<20)
		}},
		{name: "command size beyond the frame", closes: true, log: "bad input", bytes: func(*peer) []byte {
			return []byte{0, 0, 0, 8, 0, 0, 1, 0, 8, 18, 0, 0}
		}},
		{name: "bad checksum", answer: "SEND_ERROR", log: "checksum", bytes: func(p *peer) []byte {
			pid := p.producer("victim")
			b := sendFrame(pid, 1, msg{payload: "hello"})
			b[len(b)-1] ^= 0xff
			return b
		}},
		{name: "transaction command, transactions off", answer: "ERROR", log: "transactions are off", bytes: func(*peer) []byte {
			// NEW_TXN (50) with request_id 77 in its field 1.
			body := protowire.AppendTag(nil, 1, protowire.VarintType)
			body = protowire.AppendVarint(body, 77)
			cmd := protowire.AppendTag(nil, 1, protowire.VarintType)
			cmd = protowire.AppendVarint(cmd, 50)
			cmd = protowire.AppendTag(cmd, 50, protowire.BytesType)
			cmd = protowire.AppendBytes(cmd, body)
			return frame(cmd)
		}},
		{name: "unknown command type", closes: true, log: "unsupported command", bytes: func(*peer) []byte {
			cmd := protowire.AppendTag(nil, 1, protowire.VarintType)
			cmd = protowire.AppendVarint(cmd, 999)
			return frame(cmd)
		}},
		{name: "command without its body", closes: true, log: "without its body", bytes: func(*peer) []byte {
			cmd := protowire.AppendTag(nil, 1, protowire.VarintType)
			cmd = protowire.AppendVarint(cmd, uint64(pb.BaseCommand_SUBSCRIBE))
			return frame(cmd)
		}},
		{name: "send for an unknown producer", closes: true, log: "unknown producer", bytes: func(*peer) []byte {
			return sendFrame(12345, 1, msg{payload: "x"})
		}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := dial(t, c.ServiceURL())
			b := tc.bytes(p)
			p.write(b)
			if tc.name == "truncated frame" {
				// A frame is known to be cut short when the stream ends.
				p.nc.(*net.TCPConn).CloseWrite()
			}
			if tc.closes {
				if !p.closedByBroker() {
					t.Fatalf("connection not closed")
				}
			} else {
				f := p.expect(tc.answer, func(c *pb.BaseCommand) bool { return c.GetType().String() == tc.answer })
				if tc.answer == "ERROR" && f.Cmd.GetError().GetRequestId() != 77 {
					t.Errorf("error for request %d", f.Cmd.GetError().GetRequestId())
				}
				p.lookup("still-open") // the connection goes on
			}
			peerAddr := p.nc.LocalAddr().String()
			brokertest.Eventually(t, waitFor, "a log line with the reason and the peer", func() bool {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, tc.log) && strings.Contains(l, peerAddr) {
						return true
					}
				}
				return false
			})
			stillWorks(tc.name)
		})
	}
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("a panic was logged:\n%s", logs.String())
	}
}

func TestCommandBeforeConnectClosesTheConnection(t *testing.T) {
	c := brokertest.Start(t)
	p := dialRaw(t, c.ServiceURL())
	p.send(&pb.CommandLookupTopic{Topic: proto.String("x"), RequestId: proto.Uint64(1)})
	if !p.closedByBroker() {
		t.Fatal("not closed")
	}
}

func TestTokenAuthentication(t *testing.T) {
	key := brokertest.SecretKey(t)
	c := brokertest.Start(t, brokertest.WithTokenKey(key))
	good := brokertest.Token(t, key, "alice", time.Time{})
	dial(t, c.ServiceURL(), good).producer("authed")

	// Not a JWT, expired, signed with another key: AuthenticationError,
	// then the connection closes.
	bad := map[string]string{
		"not a JWT":   "wrong",
		"expired":     brokertest.Token(t, key, "alice", time.Now().Add(-time.Minute)),
		"another key": brokertest.Token(t, brokertest.SecretKey(t), "alice", time.Time{}),
		"no subject":  brokertest.Token(t, key, "", time.Time{}),
	}
	for why, tok := range bad {
		p := dialRaw(t, c.ServiceURL())
		p.send(&pb.CommandConnect{ClientVersion: proto.String("x"), ProtocolVersion: proto.Int32(20), AuthMethodName: proto.String("token"), AuthData: []byte(tok)})
		f := p.expect("ERROR", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_ERROR })
		if f.Cmd.GetError().GetError() != pb.ServerError_AuthenticationError {
			t.Fatalf("%s: %v", why, f.Cmd)
		}
		if strings.Contains(f.Cmd.GetError().GetMessage(), tok) {
			t.Fatalf("%s: the error quotes the token: %q", why, f.Cmd.GetError().GetMessage())
		}
		if !p.closedByBroker() {
			t.Fatalf("%s: connection stays open", why)
		}
		adminDo(t, "GET", c.AdminURL()+"/admin/v2/tenants", "", 401, "Authorization", "Bearer "+tok)
	}
	adminDo(t, "GET", c.AdminURL()+"/admin/v2/tenants", "", 401)
	adminDo(t, "GET", c.AdminURL()+"/admin/v2/tenants", "", 200, "Authorization", "Bearer "+good)
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLSListener(t *testing.T) {
	cert := selfSigned(t)
	c := brokertest.Start(t, func(o *broker.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		o.TLSListen = "127.0.0.1:0"
	})
	u := c.ServiceURLTLS()
	if !strings.HasPrefix(u, "pulsar+ssl://127.0.0.1:") {
		t.Fatalf("TLS URL %q", u)
	}
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)
	nc, err := tls.Dial("tcp", serviceAddr(u), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, nc: nc, frames: make(chan pulsarwire.Frame, 100), done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(p.close)
	p.send(&pb.CommandConnect{ClientVersion: proto.String("tls"), ProtocolVersion: proto.Int32(20)})
	p.expect("CONNECTED", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_CONNECTED })
	r := p.lookup("secure")
	if r.GetBrokerServiceUrlTls() != u {
		t.Fatalf("lookup over TLS: %v", r)
	}
	if cs := c.Connections(0); len(cs) != 1 || !cs[0].TLS {
		t.Fatalf("connections %+v", cs)
	}
}
