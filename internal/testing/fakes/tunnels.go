// Package fakes holds in-memory fakes that the unit tests of more than one
// package share: br-tun's tunnel ports as OVSDB holds them and
// neutron-server's tunnel_sync, what internal/overlay needs (its Switch and
// Server) and what internal/agent's fakes serve it through; and the feature
// seam's Host for a feature tested alone (overlay, dvr, qos).
package fakes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/ovsagent/ovsagent/internal/overlay"
)

// ErrDown is the error of a fake that is unreachable or told to fail.
var ErrDown = errors.New("fake: unreachable")

// Tunnels is br-tun's tunnel ports as OVSDB holds them (overlay.Switch). A
// port is named <type>-<remote IPv4 in hex> (vxlan-c0000207), as the
// reference agent names them; ofports are given in order from the one
// NewTunnels was told. Safe for concurrent use.
type Tunnels struct {
	mu     sync.Mutex
	ports  map[string]overlay.Port // by name
	nextOF int32
	fail   error
}

// NewTunnels returns a br-tun without tunnel ports whose first port created
// gets ofport lastOF+1.
func NewTunnels(lastOF int32) *Tunnels {
	return &Tunnels{ports: map[string]overlay.Port{}, nextOF: lastOF}
}

// EnsureTunnelPort implements overlay.Switch: the port to t.RemoteIP of
// t.Type, created unless there.
func (s *Tunnels) EnsureTunnelPort(_ context.Context, t overlay.Port) (overlay.Port, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return overlay.Port{}, s.fail
	}
	ip := netip.MustParseAddr(t.RemoteIP).As4()
	t.Name = fmt.Sprintf("%s-%02x%02x%02x%02x", t.Type, ip[0], ip[1], ip[2], ip[3])
	if old, ok := s.ports[t.Name]; ok {
		return old, nil
	}
	s.nextOF++
	t.OFPort = s.nextOF
	s.ports[t.Name] = t
	return t, nil
}

// DeleteTunnelPort implements overlay.Switch.
func (s *Tunnels) DeleteTunnelPort(_ context.Context, t overlay.Port) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ports, t.Name)
	return nil
}

// TunnelPorts implements overlay.Switch: the ports, in no set order.
func (s *Tunnels) TunnelPorts(context.Context) ([]overlay.Port, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.ports)), nil
}

// Add puts a port on br-tun as it is (one an earlier run left).
func (s *Tunnels) Add(p overlay.Port) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ports[p.Name] = p
}

// SetFail makes EnsureTunnelPort fail with err (nil: succeed again).
func (s *Tunnels) SetFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Port is the port named name.
func (s *Tunnels) Port(name string) (overlay.Port, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ports[name]
	return p, ok
}

// Names are the ports' names, sorted.
func (s *Tunnels) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.ports))
}

// TunnelServer is neutron-server's tunnel_sync (overlay.Server): the
// endpoints it knows, the caller's own first. Safe for concurrent use.
type TunnelServer struct {
	// OnCall is called when a call arrives, before anything else (set it
	// before the fake is used).
	OnCall func()

	mu        sync.Mutex
	endpoints []overlay.Endpoint
	down      bool
	failNext  int
	calls     int
}

// TunnelSync implements overlay.Server. Down, it fails without counting the
// call; otherwise the call counts and fails while FailNext's count lasts.
func (s *TunnelServer) TunnelSync(_ context.Context, ip, _ string) ([]overlay.Endpoint, error) {
	if s.OnCall != nil {
		s.OnCall()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, ErrDown
	}
	s.calls++
	if s.failNext > 0 {
		s.failNext--
		return nil, ErrDown
	}
	return append([]overlay.Endpoint{{IP: ip, Host: "me"}}, s.endpoints...), nil
}

// SetEndpoints sets the endpoints besides the caller's.
func (s *TunnelServer) SetEndpoints(eps ...overlay.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = eps
}

// SetDown makes the server unreachable (true) or reachable again.
func (s *TunnelServer) SetDown(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = v
}

// Down reports whether the server is unreachable (SetDown).
func (s *TunnelServer) Down() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// FailNext makes the next n calls fail (counted).
func (s *TunnelServer) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// Calls counts the calls that reached the server (not down).
func (s *TunnelServer) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}
