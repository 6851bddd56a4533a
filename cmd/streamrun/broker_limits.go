package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
)

// connLimits are `streamrun broker`'s connection limit flags
// (broker.Options.MaxConnections, MaxConnectionsPerIP, HandshakeTimeout).
type connLimits struct {
	maxConns, maxPerIP int
	handshake          time.Duration
}

func registerConnLimits(fs *pflag.FlagSet) *connLimits {
	l := &connLimits{}
	fs.IntVar(&l.maxConns, "max-connections", 0, "most connections each broker serves at once; more are refused with an error (0: no limit)")
	fs.IntVar(&l.maxPerIP, "max-connections-per-ip", 0, "most connections each broker serves from one remote IP address (0: no limit)")
	fs.DurationVar(&l.handshake, "handshake-timeout", 10*time.Second, "close a connection that has not sent CONNECT by then (0: no limit)")
	return l
}

func (l *connLimits) check() error {
	if l.maxConns < 0 || l.maxPerIP < 0 || l.handshake < 0 {
		return usagef("--max-connections, --max-connections-per-ip and --handshake-timeout must not be negative")
	}
	return nil
}

func (l *connLimits) apply(o *broker.Options) {
	o.MaxConnections, o.MaxConnectionsPerIP, o.HandshakeTimeout = l.maxConns, l.maxPerIP, l.handshake
	if l.handshake == 0 {
		o.HandshakeTimeout = -1 // the flag's 0 is "none"; the option's 0 is its default
	}
}
