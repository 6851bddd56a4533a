package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// server is one broker: its listeners and connections. Topics and their
// state belong to the Cluster; a server only accepts and serves.
type server struct {
	c       *Cluster
	index   int
	advHost string

	mu       sync.Mutex
	addr     string // fixed to the bound port after the first start
	tlsAddr  string
	ln, tln  net.Listener
	conns    map[*conn]struct{}
	perIP    map[string]int // open connections by remote IP
	running  bool
	accepted atomic.Int64
	wg       sync.WaitGroup // accept loops and connections
}

// url is the broker's pulsar:// address, "" when the plain port is off.
func (s *server) url() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == "" {
		return ""
	}
	_, p, _ := net.SplitHostPort(s.addr)
	return "pulsar://" + net.JoinHostPort(s.advHost, p)
}

func (s *server) tlsURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsAddr == "" {
		return ""
	}
	_, p, _ := net.SplitHostPort(s.tlsAddr)
	return "pulsar+ssl://" + net.JoinHostPort(s.advHost, p)
}

func (s *server) start(ctx context.Context) error {
	var lc net.ListenConfig
	s.mu.Lock()
	defer s.mu.Unlock()
	var ln, tln net.Listener
	if s.addr != "" {
		var err error
		if ln, err = lc.Listen(ctx, "tcp", s.addr); err != nil {
			return fmt.Errorf("broker %d: listen on %s: %w", s.index, s.addr, err)
		}
		s.addr = fixPort(s.addr, ln.Addr())
	}
	if s.tlsAddr != "" {
		raw, err := lc.Listen(ctx, "tcp", s.tlsAddr)
		if err != nil {
			if ln != nil {
				ln.Close()
			}
			return fmt.Errorf("broker %d: listen (TLS) on %s: %w", s.index, s.tlsAddr, err)
		}
		s.tlsAddr = fixPort(s.tlsAddr, raw.Addr())
		tln = tls.NewListener(raw, s.c.tlsCfg)
	}
	s.ln, s.tln, s.running = ln, tln, true
	if ln != nil {
		s.wg.Add(1)
		go s.acceptLoop(ln, false)
	}
	if tln != nil {
		s.wg.Add(1)
		go s.acceptLoop(tln, true)
	}
	s.c.log.Info("broker listening", "broker", s.index, "addr", s.addr, "tls_addr", s.tlsAddr)
	return nil
}

func fixPort(addr string, bound net.Addr) string {
	h, _, _ := net.SplitHostPort(addr)
	if ta, ok := bound.(*net.TCPAddr); ok {
		return net.JoinHostPort(h, strconv.Itoa(ta.Port))
	}
	return addr
}

func (s *server) acceptLoop(ln net.Listener, isTLS bool) {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.c.log.Warn("broker accept failed", "broker", s.index, "err", err)
			time.Sleep(backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.accepted.Add(1)
		ip := remoteIP(nc.RemoteAddr())
		s.mu.Lock()
		if !s.running {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		if why := s.overLimit(ip); why != "" {
			s.wg.Add(1)
			s.mu.Unlock()
			go s.refuse(nc, why)
			continue
		}
		cn := newConn(s, nc, isTLS)
		s.conns[cn] = struct{}{}
		s.perIP[cn.ip]++
		s.wg.Add(2)
		s.mu.Unlock()
		go cn.readLoop()
		go cn.writeLoop()
	}
}

func (s *server) removeConn(cn *conn) {
	s.mu.Lock()
	if _, ok := s.conns[cn]; ok {
		delete(s.conns, cn)
		if s.perIP[cn.ip]--; s.perIP[cn.ip] <= 0 {
			delete(s.perIP, cn.ip)
		}
	}
	s.mu.Unlock()
}

func (s *server) liveConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for cn := range s.conns {
		out = append(out, cn)
	}
	return out
}

func (s *server) dropConns() {
	for _, cn := range s.liveConns() {
		cn.abort("connections dropped")
	}
}

// stop closes the listeners and every connection, and waits for them.
func (s *server) stop() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	if s.ln != nil {
		s.ln.Close()
	}
	if s.tln != nil {
		s.tln.Close()
	}
	s.mu.Unlock()
	s.dropConns()
	s.wg.Wait()
}
