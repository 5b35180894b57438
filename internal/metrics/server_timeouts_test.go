package metrics

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServerTimeouts: a client that sends half a request, or keeps its
// connection open idle after an answer, is disconnected by the server; it
// cannot hold a connection for ever.
func TestServerTimeouts(t *testing.T) {
	saved := serverTimeouts
	serverTimeouts.readHeader, serverTimeouts.read, serverTimeouts.write, serverTimeouts.idle =
		100*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	s, err := Listen("127.0.0.1:0", New())
	serverTimeouts = saved
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, nil) }()
	defer func() { cancel(); <-done }()

	// closedByServer reads until the server closes c; the deadline only
	// ends a test whose server never does.
	closedByServer := func(c net.Conn, r *bufio.Reader) bool {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	slow, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(slow, bufio.NewReader(slow)) {
		t.Error("a connection with half a request header stayed open")
	}

	idle, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(idle)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the keep-alive connection itself; the test needs it open")
	}
	if !closedByServer(idle, r) {
		t.Error("an idle keep-alive connection stayed open")
	}
}

// TestServerTimeoutsSet: the listener as the agent runs it has every
// timeout, and the write timeout lets a 30 s CPU profile through.
func TestServerTimeoutsSet(t *testing.T) {
	s, err := Listen("127.0.0.1:0", New())
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	h := s.srv
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.IdleTimeout <= 0 || h.WriteTimeout <= 30*time.Second || h.MaxHeaderBytes <= 0 {
		t.Errorf("timeouts: header %v read %v write %v idle %v, max header %d", h.ReadHeaderTimeout, h.ReadTimeout,
			h.WriteTimeout, h.IdleTimeout, h.MaxHeaderBytes)
	}
}
