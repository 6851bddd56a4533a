package pool

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy is a real TCP relay between the client and a broker that a
// test can freeze (bytes stop flowing both ways, the sockets stay open:
// a dead peer as the client sees it) and cut (every relayed connection
// closed: a network failure). It works the same in front of the embedded
// broker and Apache Pulsar. With a TLS config it terminates TLS and
// relays plain bytes.
type tcpProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu      sync.Mutex
	frozen  bool
	thaw    chan struct{}
	conns   map[net.Conn]bool
	accepts int
	wg      sync.WaitGroup
}

func newTCPProxy(t testing.TB, target string, conf *tls.Config) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if conf != nil {
		ln = tls.NewListener(ln, conf)
	}
	p := &tcpProxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}, thaw: make(chan struct{})}
	close(p.thaw)
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.accepts++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thaw := p.thaw
			p.mu.Unlock()
			<-thaw
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// Freeze stops relaying bytes (both ways) until Thaw.
func (p *tcpProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen = true
		p.thaw = make(chan struct{})
	}
}

// Thaw lets bytes flow again.
func (p *tcpProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
	}
}

// Cut closes every relayed connection.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Accepts is how many connections the proxy has taken.
func (p *tcpProxy) Accepts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.Thaw()
	p.Cut()
	p.wg.Wait()
}

// proxies relays every connection a client opens through a tcpProxy of
// its own per broker address; set it as Options.Dial.
type proxies struct {
	t  testing.TB
	mu sync.Mutex
	by map[string]*tcpProxy
}

func newProxies(t testing.TB) *proxies { return &proxies{t: t, by: map[string]*tcpProxy{}} }

func (ps *proxies) get(addr string) *tcpProxy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.by[addr]
	if p == nil {
		p = newTCPProxy(ps.t, addr, nil)
		ps.by[addr] = p
	}
	return p
}

func (ps *proxies) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, ps.get(addr).Addr())
}

func (ps *proxies) each(f func(*tcpProxy)) {
	ps.mu.Lock()
	all := make([]*tcpProxy, 0, len(ps.by))
	for _, p := range ps.by {
		all = append(all, p)
	}
	ps.mu.Unlock()
	for _, p := range all {
		f(p)
	}
}

func (ps *proxies) Freeze() { ps.each((*tcpProxy).Freeze) }
func (ps *proxies) Thaw()   { ps.each((*tcpProxy).Thaw) }
func (ps *proxies) Cut()    { ps.each((*tcpProxy).Cut) }
