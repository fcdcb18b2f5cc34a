package install

import (
	"io"
	"net"
	"sync"
	"time"
)

// forwarder stands in for the payload server Service: a TCP listener on
// loopback that hands each connection to the next backend (a payload server
// replica's HTTPS port) in turn, skipping backends that refuse it, as
// kube-proxy spreads connections over a Service's ready endpoints. It does
// not terminate TLS: machines verify the replica's certificate for the
// Service's DNS name, as in a cluster.
type forwarder struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
}

func newForwarder() (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln}
	go f.serve()
	return f, nil
}

// Addr is the address machines reach the Service at.
func (f *forwarder) Addr() string { return f.ln.Addr().String() }

// SetBackends replaces the Service's endpoints.
func (f *forwarder) SetBackends(addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append([]string(nil), addrs...)
}

// Close stops listening; open connections end with their peers.
func (f *forwarder) Close() { _ = f.ln.Close() }

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.forward(c)
	}
}

// forward connects c to the first backend, in round-robin order, that
// accepts a connection; with none, it closes c (a refused connection, as
// from a Service without endpoints).
func (f *forwarder) forward(c net.Conn) {
	f.mu.Lock()
	order := make([]string, 0, len(f.backends))
	for i := range f.backends {
		order = append(order, f.backends[(f.next+i)%len(f.backends)])
	}
	f.next++
	f.mu.Unlock()
	var b net.Conn
	for _, addr := range order {
		var err error
		if b, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			break
		}
	}
	if b == nil {
		_ = c.Close()
		return
	}
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
	_ = b.Close()
	_ = c.Close()
}
