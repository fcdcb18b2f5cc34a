package stack

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarder is a TCP listener on loopback that hands each connection to
// the next backend in turn, skipping backends that refuse it, as
// kube-proxy spreads connections over a Service's ready endpoints. It
// does not terminate TLS: clients verify the backend's certificate. Cut
// makes it a network partition for a while.
type Forwarder struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	open     map[net.Conn]struct{}
	cutUntil time.Time
}

// NewForwarder listens on a free loopback port.
func NewForwarder(backends ...string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{ln: ln, backends: backends, open: map[net.Conn]struct{}{}}
	go f.serve()
	return f, nil
}

// Addr is the address clients dial.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// SetBackends replaces the backends.
func (f *Forwarder) SetBackends(addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append([]string(nil), addrs...)
}

// Cut breaks every open connection and refuses new ones for d, as a
// network partition or a restarting server does to its clients.
func (f *Forwarder) Cut(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutUntil = time.Now().Add(d)
	for c := range f.open {
		_ = c.Close()
	}
}

// DialAs returns a dial function that reaches the Forwarder in place of
// the address service returns (a Service's DNS name and port as a pod dials
// it; "" while there is none yet), and any other address as it is.
func (f *Forwarder) DialAs(service func() string) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if host := service(); host != "" && address == host {
			address = f.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
}

// Close stops listening; open connections end with their peers.
func (f *Forwarder) Close() { _ = f.ln.Close() }

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.forward(c)
	}
}

// forward connects c to the first backend, in round-robin order, that
// accepts a connection; with none, or while cut, it closes c (a refused
// connection, as from a Service without endpoints).
func (f *Forwarder) forward(c net.Conn) {
	f.mu.Lock()
	cut := time.Now().Before(f.cutUntil)
	order := make([]string, 0, len(f.backends))
	for i := range f.backends {
		order = append(order, f.backends[(f.next+i)%len(f.backends)])
	}
	f.next++
	f.mu.Unlock()
	var b net.Conn
	for _, addr := range order {
		if cut {
			break
		}
		var err error
		if b, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			break
		}
	}
	if b == nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.open[c], f.open[b] = struct{}{}, struct{}{}
	f.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(b, c)
	go pipe(c, b)
	wg.Wait()
	f.mu.Lock()
	delete(f.open, c)
	delete(f.open, b)
	f.mu.Unlock()
	_ = b.Close()
	_ = c.Close()
}
