package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrClosed is returned by calls on a session that has ended.
var ErrClosed = errors.New("ovsdb session closed")

// Notify receives the server's notifications ("update" of a monitor), in the
// order they arrive, on the session's reader goroutine: the next message is
// read only after it returns, so a reply that follows a notification is
// delivered after that notification was handled. It must not block on the
// session's own calls.
type Notify func(method string, params json.RawMessage)

// Session is one JSON-RPC 1.0 connection to ovsdb-server. Calls may be made
// from any goroutine; the server's echo requests are answered by the reader.
type Session struct {
	conn   net.Conn
	notify Notify

	wmu sync.Mutex // one message at a time on the wire

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan reply
	err     error // why the session ended
	done    chan struct{}
}

type reply struct {
	result json.RawMessage
	err    error
}

// message is any JSON-RPC 1.0 message: a request or notification (method
// set; id null for a notification) or a reply (result or error set).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// Dial connects to endpoint, "unix:PATH" or "tcp:HOST:PORT" as in
// ovs-vsctl's --db.
func Dial(ctx context.Context, endpoint string, notify Notify) (*Session, error) {
	network, addr, ok := strings.Cut(endpoint, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return nil, fmt.Errorf("ovsdb endpoint %q: want unix:PATH or tcp:HOST:PORT", endpoint)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return NewSession(conn, notify), nil
}

// NewSession runs the protocol over an established connection.
func NewSession(conn net.Conn, notify Notify) *Session {
	s := &Session{conn: conn, notify: notify, pending: map[uint64]chan reply{}, done: make(chan struct{})}
	go s.read()
	return s
}

// Done is closed when the session has ended (connection lost or Close).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended (nil while it runs).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session; calls in flight fail with ErrClosed.
func (s *Session) Close() error {
	s.fail(ErrClosed)
	return nil
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	close(s.done)
	s.mu.Unlock()
	s.conn.Close()
	for _, ch := range pending {
		ch <- reply{err: err}
	}
}

// Call sends a request and waits for its reply; result (if not nil) receives
// the reply's result. A reply with an error is returned as an error.
func (s *Session) Call(ctx context.Context, method string, params any, result any) error {
	ch := make(chan reply, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.pending != nil {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}
	if err := s.write(ctx, map[string]any{"method": method, "params": params, "id": id}); err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if result != nil {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("%s: reply: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (s *Session) write(ctx context.Context, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Time{}
	}
	_ = s.conn.SetWriteDeadline(deadline)
	if _, err := s.conn.Write(b); err != nil {
		s.fail(fmt.Errorf("write: %w", err))
		return err
	}
	return nil
}

func (s *Session) read() {
	dec := json.NewDecoder(bufio.NewReaderSize(s.conn, 64<<10))
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			s.fail(fmt.Errorf("read: %w", err))
			return
		}
		if m.Method != "" {
			s.request(&m)
			continue
		}
		id, err := strconv.ParseUint(string(m.ID), 10, 64)
		if err != nil {
			continue // not a reply to us; ovsdb-server never sends one
		}
		s.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if ch == nil {
			continue // its caller gave up
		}
		r := reply{result: m.Result}
		if e := string(m.Error); e != "" && e != "null" {
			r.err = fmt.Errorf("server error: %s", short(m.Error))
		}
		ch <- r
	}
}

// request handles a message with a method: the server's notifications go to
// notify; of its requests only echo (its liveness probe) exists.
func (s *Session) request(m *message) {
	if len(m.ID) == 0 || string(m.ID) == "null" {
		if s.notify != nil {
			s.notify(m.Method, m.Params)
		}
		return
	}
	resp := map[string]any{"id": m.ID, "result": nil, "error": nil}
	if m.Method == "echo" {
		params := m.Params
		if len(params) == 0 {
			params = json.RawMessage("[]")
		}
		resp["result"] = params
	} else {
		resp["error"] = "unknown method " + m.Method
	}
	// The reader must not stall on a slow write for long: a server that
	// does not read its socket is a dead server.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.write(ctx, resp)
}
