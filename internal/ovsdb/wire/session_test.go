package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is the other end of a pipe, scripted by the test.
type fakeServer struct {
	t   *testing.T
	c   net.Conn
	dec *json.Decoder
}

func newPair(t *testing.T, notify Notify) (*Session, *fakeServer) {
	a, b := net.Pipe()
	s := NewSession(a, notify)
	t.Cleanup(func() { s.Close(); b.Close() })
	return s, &fakeServer{t: t, c: b, dec: json.NewDecoder(bufio.NewReader(b))}
}

func (f *fakeServer) recv() map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := f.dec.Decode(&m); err != nil {
		f.t.Errorf("server read: %v", err)
	}
	return m
}

func (f *fakeServer) send(s string) {
	if _, err := f.c.Write([]byte(s)); err != nil {
		f.t.Errorf("server write: %v", err)
	}
}

func TestSessionCallAndNotifyOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s, srv := newPair(t, func(method string, params json.RawMessage) {
		mu.Lock()
		seen = append(seen, method+" "+string(params))
		mu.Unlock()
	})
	done := make(chan error, 1)
	var res []Result
	go func() { done <- s.Call(context.Background(), "transact", []any{"Open_vSwitch"}, &res) }()
	req := srv.recv()
	if string(req["method"]) != `"transact"` || string(req["params"]) != `["Open_vSwitch"]` {
		t.Fatalf("request %v", req)
	}
	// An update sent before the reply is handled before the call returns.
	srv.send(`{"id":null,"method":"update","params":["ovsagent",{"Port":{}}]}`)
	srv.send(`{"id":` + string(req["id"]) + `,"result":[{"count":1}],"error":null}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != `update ["ovsagent",{"Port":{}}]` {
		t.Errorf("notifications before the reply: %q", seen)
	}
	if len(res) != 1 || res[0].Count != 1 {
		t.Errorf("result %+v", res)
	}
}

func TestSessionAnswersEcho(t *testing.T) {
	_, srv := newPair(t, nil)
	srv.send(`{"id":"echo","method":"echo","params":["x"]}`)
	r := srv.recv()
	if string(r["id"]) != `"echo"` || string(r["result"]) != `["x"]` || string(r["error"]) != "null" {
		t.Errorf("echo reply %v", r)
	}
	srv.send(`{"id":5,"method":"lock","params":[]}`)
	r = srv.recv()
	if string(r["result"]) != "null" || !strings.Contains(string(r["error"]), "unknown method") {
		t.Errorf("unknown request reply %v", r)
	}
}

func TestSessionErrors(t *testing.T) {
	s, srv := newPair(t, nil)
	done := make(chan error, 1)
	go func() { done <- s.Call(context.Background(), "monitor", []any{}, nil) }()
	req := srv.recv()
	srv.send(`{"id":` + string(req["id"]) + `,"result":null,"error":"unknown database"}`)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "unknown database") {
		t.Errorf("error reply: %v", err)
	}
	// Garbage from the server ends the session; calls in flight fail.
	go func() { done <- s.Call(context.Background(), "echo", []any{}, nil) }()
	srv.recv()
	srv.send(`{"id":`)
	srv.c.Close()
	if err := <-done; err == nil {
		t.Error("call survived a broken connection")
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session not done")
	}
	if err := s.Call(context.Background(), "echo", []any{}, nil); err == nil {
		t.Error("call on an ended session")
	}
}

func TestSessionCallTimeout(t *testing.T) {
	s, srv := newPair(t, nil)
	go srv.recv() // read the request, never answer
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Call(ctx, "echo", []any{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v", err)
	}
}

func TestDialRejectsEndpoint(t *testing.T) {
	for _, e := range []string{"ssl:1.2.3.4:6640", "unix:", "/run/openvswitch/db.sock"} {
		if _, err := Dial(context.Background(), e, nil); err == nil {
			t.Errorf("%s: no error", e)
		}
	}
}
