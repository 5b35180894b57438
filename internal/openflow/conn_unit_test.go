package openflow

import (
	"context"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeSwitch answers the handshake on a unix socket and hands the
// connection to the test; it checks our side of the protocol, byte for byte.
func fakeSwitch(t *testing.T, helloVersion uint8, serve func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "br.mgmt")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if m, err := readMsg(c, nil); err != nil || m[1] != TypeHello || m[0] != Version13 {
			t.Errorf("want hello 1.3, got %x %v", m, err)
			return
		}
		h := AppendHello(nil, 1)
		h[0] = helloVersion
		if helloVersion != Version13 {
			h = AppendSimple(nil, TypeHello, 1, nil)
			h[0] = helloVersion
		}
		c.Write(h)
		m, err := readMsg(c, nil)
		if err != nil {
			return
		}
		if m[1] != TypeFeaturesRequest {
			t.Errorf("want features request, got type %d", m[1])
			return
		}
		reply := AppendSimple(nil, TypeFeaturesReply, binary.BigEndian.Uint32(m[4:]), make([]byte, 24))
		binary.BigEndian.PutUint64(reply[8:], 0xdeadbeef)
		c.Write(reply)
		serve(c)
	}()
	return path
}

func TestHandshakeEchoAndDPID(t *testing.T) {
	got := make(chan []byte, 1)
	path := fakeSwitch(t, Version13, func(c net.Conn) {
		c.Write(AppendSimple(nil, TypeEchoRequest, 77, []byte("ping")))
		m, err := readMsg(c, nil)
		if err == nil {
			got <- m
		}
		time.Sleep(100 * time.Millisecond)
	})
	c, err := Dial(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.DPID() != 0xdeadbeef {
		t.Errorf("dpid %x", c.DPID())
	}
	select {
	case m := <-got:
		if m[1] != TypeEchoReply || binary.BigEndian.Uint32(m[4:]) != 77 || string(m[8:]) != "ping" {
			t.Fatalf("bad echo reply %x", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no echo reply")
	}
}

func TestHandshakeRefusesOldSwitch(t *testing.T) {
	path := fakeSwitch(t, 0x01, func(net.Conn) {})
	_, err := Dial(context.Background(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "1.3") {
		t.Fatalf("want version error, got %v", err)
	}
}

func TestCallsFailWhenSwitchGoesAway(t *testing.T) {
	path := fakeSwitch(t, Version13, func(c net.Conn) {
		readMsg(c, nil) // the barrier request; then hang up without replying
	})
	c, err := Dial(context.Background(), path, Options{MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Barrier(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("want ErrNotConnected, got %v (ctx %v)", err, ctx.Err())
	}
}

func TestDialWaitsForSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, filepath.Join(t.TempDir(), "missing.mgmt"), Options{})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("want a dial error after ctx ended, got %v", err)
	}
}

// TestBundleWriteInterruptedByCancel: a switch that stops reading (busy
// ovs-vswitchd) must not hold a cancelled Bundle in its writes: the agent
// stops within its SIGTERM budget.
func TestBundleWriteInterruptedByCancel(t *testing.T) {
	release := make(chan struct{})
	path := fakeSwitch(t, Version13, func(net.Conn) { <-release }) // never reads again
	defer close(release)
	c, err := Dial(context.Background(), path, Options{MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mods := make([]FlowMod, 50000) // ~5 MB: far more than the socket buffers
	for i := range mods {
		mods[i] = FlowMod{Command: CmdAdd, Flow: Flow{Table: 60, Priority: uint16(i), Match: Match{InPort(uint32(i + 1))},
			Actions: []Action{SetReg(5, uint32(i)), ResubmitTable(71)}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Bundle(ctx, mods) }()
	time.Sleep(200 * time.Millisecond) // blocked in a write by now
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a bundle the switch never read succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Bundle still writing 5 s after its ctx was cancelled")
	}
}
