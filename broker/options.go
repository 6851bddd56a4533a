package broker

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// Options configures an embedded broker cluster. Every field has a
// working default except where the data goes: set DataDir, or Memory for
// a cluster that keeps nothing (Start refuses to guess; `streamrun broker`
// picks a directory under the user's cache directory).
type Options struct {
	// Listen is the address of broker 0's Pulsar port. Default
	// "127.0.0.1:6650". Here and in HTTP, HTTPS and TLSListen an address
	// without a host (":6650") is loopback too: only "0.0.0.0:6650" or a
	// host's address listens beyond the machine.
	// Broker i listens on its port + i; with port 0 every broker takes a
	// free port of its own. "-" turns the plain-text port off (TLS only:
	// needs a certificate).
	Listen string
	// AdvertisedHost is the host put in service URLs and lookup answers.
	// Default: Listen's host, or 127.0.0.1 when that is empty, 0.0.0.0
	// or ::.
	AdvertisedHost string
	// HTTP is the address of the admin REST API. Default "127.0.0.1:8080";
	// "-" turns it off. Port 0 takes a free port.
	HTTP string
	// HTTPS is the address of the admin REST API over TLS, with the TLS
	// certificate (TLSConfig or the files). Default "": off. Port 0 takes a
	// free port. The same authentication and authorization apply.
	HTTPS string
	// DataDir holds the topics and cursors, made with its parents if
	// missing. Required unless Memory is set.
	DataDir string
	// Memory keeps everything in memory (for tests): nothing survives
	// Close. It wins over DataDir.
	Memory bool
	// Sync fsyncs every append before its receipt is sent, so a receipted
	// message also survives a crash of the machine. Default false: a
	// receipted message survives kill -9 of the process (it was written to
	// the OS), not a power cut.
	Sync bool
	// SegmentBytes and CacheBytes tune the store (see store.Options).
	// Default: the store's (64 MiB segments, 8 MiB tail cache per topic).
	SegmentBytes int64
	CacheBytes   int64

	// Brokers is how many brokers run in this process, each owning a share
	// of the topics (by a hash of the topic name) so that lookups
	// redirect. Default 1.
	Brokers int
	// ClusterName is what the admin API and lookups call the cluster.
	// Default "standalone", as Apache Pulsar standalone.
	ClusterName string

	// MaxMessageSize is the largest message (entry) accepted, announced in
	// CONNECTED. Default 5 MiB (pulsarwire.DefaultMaxMessageSize).
	MaxMessageSize int
	// KeepAlive is how often an idle connection is pinged; a connection
	// that sent nothing for two of these is closed. Default 30 s.
	KeepAlive time.Duration
	// CursorFlush is how often changed cursors are written to the store
	// (they are also written when their consumers leave and on Close).
	// Default 1 s, Apache Pulsar's mark-delete rate.
	CursorFlush time.Duration
	// DisableTopicAutoCreation makes producers and consumers of a topic
	// that was not created through the admin API fail with TopicNotFound.
	// Default false: topics are created on first use, non-partitioned, as
	// Apache Pulsar standalone does.
	DisableTopicAutoCreation bool
	// FailoverDelay is how long a Failover subscription waits after its
	// active consumer changed (the first one subscribing included) before
	// the new one takes over: only then is it sent messages and are the
	// consumers whose state changed told by ACTIVE_CONSUMER_CHANGE, so that
	// acknowledgements still on their way from the previous one arrive
	// first (fewer duplicates). Apache Pulsar's
	// activeConsumerFailoverDelayTimeMillis. Default 1 s, as Apache Pulsar;
	// negative: no delay.
	FailoverDelay time.Duration
	// KeySharedReplicaPoints is how many points each consumer gets on the
	// Key_Shared hash ring (AUTO_SPLIT). Default 100, Apache Pulsar's.
	KeySharedReplicaPoints int

	// TLS: a second listener per broker serving pulsar+ssl://, with
	// TLSConfig or else the certificate and key files. TLSListen is broker
	// 0's address (broker i: its port + i); default "127.0.0.1:6651" when
	// a certificate is given.
	TLSConfig   *tls.Config
	TLSCertFile string
	TLSKeyFile  string
	TLSListen   string

	// TokenSecretKey turns token authentication on (CONNECT with
	// auth_method_name "token"; admin API: "Authorization: Bearer ..."):
	// a JWT signed HS256, HS384 or HS512 with this key, as Apache
	// Pulsar's tokenSecretKey (the raw bytes `pulsar tokens
	// create-secret-key` writes). Default: none.
	TokenSecretKey []byte
	// TokenPublicKey turns token authentication on for JWTs signed with
	// the private half of this RSA (RS*, PS*) or EC (ES*) key, PEM or DER,
	// as Apache Pulsar's tokenPublicKey. Excludes TokenSecretKey. Default:
	// none.
	TokenPublicKey []byte
	// TokenAuthClaim is the claim naming a token's role. Default "sub", as
	// Apache Pulsar's tokenAuthClaim.
	TokenAuthClaim string
	// Authenticate, when set, decides instead of the token key, returning
	// the role. With no key and no Authenticate, authentication is off and
	// anything connects (as role "").
	Authenticate func(ctx context.Context, method string, data []byte) (principal string, err error)

	// Authorization turns permission checks on (Apache Pulsar's
	// authorizationEnabled; needs authentication): a role produces or
	// consumes only where its namespace's permissions allow, and only
	// SuperUserRoles use the admin API. Default false.
	Authorization bool
	// SuperUserRoles may do everything. Default none.
	SuperUserRoles []string

	// Transactions turns Pulsar's transactions on, as Apache Pulsar's
	// transactionCoordinatorEnabled=true does: one transaction coordinator
	// (the one partition of persistent://pulsar/system/transaction_coordinator_assign,
	// as Apache Pulsar standalone makes it), transactional SEND and ACK,
	// the abort of a transaction past its timeout (broker/README.md
	// "Transactions"). Default false, as Apache Pulsar's: coordinator
	// commands and transactional SENDs and ACKs are refused.
	Transactions bool

	// Retention is how long entries are kept once no subscription needs
	// them: acknowledged by every subscription or, on a topic without
	// subscriptions, published (a topic nobody subscribes to keeps no
	// backlog, as in Apache Pulsar without a retention policy). It lets a
	// seek or reset-cursor to a recent time find them. Trimming runs every
	// CursorFlush; disk space returns a segment at a time, memory (with
	// Memory) at once, and after 64 MiB trimmed or deleted the broker
	// asks the Go runtime to give the pages back to the OS
	// (debug.FreeOSMemory: within 5 s after a drop of half the live
	// heap, else at most once a minute). Default 1 minute (`streamrun
	// broker --retention`); negative: keep everything.
	Retention time.Duration

	// CompactionThreshold compacts a topic (topic_compaction.go) once
	// more than this many bytes were published since its last
	// compaction, checked every CompactionCheck, as Apache Pulsar's
	// brokerServiceCompactionThresholdInBytes; a namespace's
	// compactionThreshold policy (the admin API) wins over it. Default 0:
	// no automatic compaction (Apache Pulsar's default).
	CompactionThreshold int64
	// CompactionCheck is how often the threshold is checked. Default 1
	// minute (Apache Pulsar's brokerServiceCompactionMonitorIntervalInSeconds).
	CompactionCheck time.Duration

	// Connection limits, per broker (docs/admin.md "Limits"). A
	// connection over MaxConnections, or over MaxConnectionsPerIP from one
	// remote IP address, is answered with an ERROR (NotAllowedError,
	// "Reached the maximum number of connections") and closed at once, as
	// Apache Pulsar's brokerMaxConnections and maxConnectionsPerIp do.
	// Default 0 for both: no limit, as Apache Pulsar.
	MaxConnections      int
	MaxConnectionsPerIP int
	// HandshakeTimeout is how long a new connection may take to send
	// CONNECT (and finish its TLS handshake); one that does not is
	// closed, so connections that never speak cannot pile up. Default
	// 10 s; negative: no limit (the keep-alive still closes them after two
	// KeepAlive intervals).
	HandshakeTimeout time.Duration

	// Intercept sees each command a client sends before it is handled
	// and may delay, refuse or drop it (fault injection for tests:
	// package broker/faults). Default nil: commands go straight to their
	// handlers.
	Intercept Interceptor

	// AdminRoutes adds routes to the admin API (the fault API of package
	// broker/faults): called once as the admin API starts, with the
	// cluster and a function registering a handler for a pattern in
	// http.ServeMux's syntax; the routes are behind the admin API's
	// authentication. Default nil.
	AdminRoutes func(c *Cluster, handle func(pattern string, h http.Handler))

	// Pprof is the address to serve Go's profiler on (net/http/pprof
	// under /debug/pprof/, on a listener of its own: never on the admin
	// API), e.g. "127.0.0.1:6060"; an address without a host is loopback.
	// Close stops it. Default "": off.
	Pprof string

	// Logger receives the broker's logs. Default: slog.Default().
	Logger *slog.Logger
}

const (
	defaultListen      = "127.0.0.1:6650"
	defaultHTTP        = "127.0.0.1:8080"
	defaultTLSListen   = "127.0.0.1:6651"
	defaultKeepAlive   = 30 * time.Second
	defaultCursorFlush = time.Second
	defaultFailover    = time.Second
	defaultCluster     = "standalone"
	defaultHandshake   = 10 * time.Second
	defaultRetention   = time.Minute
	defaultCompaction  = time.Minute
)

func (o Options) withDefaults() Options {
	if o.Listen == "" {
		o.Listen = defaultListen
	}
	if o.HTTP == "" {
		o.HTTP = defaultHTTP
	}
	if o.Brokers <= 0 {
		o.Brokers = 1
	}
	if o.ClusterName == "" {
		o.ClusterName = defaultCluster
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = pulsarwire.DefaultMaxMessageSize
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = defaultKeepAlive
	}
	if o.CompactionCheck <= 0 {
		o.CompactionCheck = defaultCompaction
	}
	if o.CursorFlush <= 0 {
		o.CursorFlush = defaultCursorFlush
	}
	if o.FailoverDelay == 0 {
		o.FailoverDelay = defaultFailover
	}
	if o.KeySharedReplicaPoints <= 0 {
		o.KeySharedReplicaPoints = 100
	}
	if o.TLSListen == "" && (o.TLSConfig != nil || o.TLSCertFile != "" || o.Listen == "-") {
		o.TLSListen = defaultTLSListen
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = defaultHandshake
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Listen, o.HTTP, o.TLSListen, o.HTTPS = loopbackHost(o.Listen), loopbackHost(o.HTTP), loopbackHost(o.TLSListen), loopbackHost(o.HTTPS)
	o.Pprof = loopbackHost(o.Pprof)
	return o
}

// loopbackHost gives an address without a host (":6650") the loopback
// one, so that nothing listens beyond the machine unless its address says
// so ("0.0.0.0:6650"). "" and "-" are left as they are.
func loopbackHost(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}
