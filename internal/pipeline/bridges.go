package pipeline

import "github.com/ovsagent/ovsagent/internal/feature"

// SetBridges records the bridges as set up (names, patch ofports) in the
// state, each with the cookie its flows carry (cookie nil: 0, no OpenFlow;
// learned flows carry the cookie the learn action embeds).
func (s *State) SetBridges(l feature.BridgeLayout, cookie func(bridge string) uint64) {
	if cookie == nil {
		cookie = func(string) uint64 { return 0 }
	}
	s.Int.Name = l.Integration
	s.Int.PatchTunOfport = l.PatchTun
	s.Int.Cookie = cookie(l.Integration)
	s.Tun = nil
	if l.Tunnel != "" {
		s.Tun = &TunBridge{Name: l.Tunnel, PatchIntOfport: l.PatchInt, Cookie: cookie(l.Tunnel)}
	}
	s.Phys = map[string]*PhysBridge{}
	for physnet, pb := range l.Physical {
		s.Phys[physnet] = &PhysBridge{Bridge: pb.Bridge, IntOfport: pb.IntOFPort, PhysOfport: pb.PhyOFPort, Cookie: cookie(pb.Bridge)}
	}
}

// BridgeCookie is the cookie of the bridge's flows (0 for a bridge the
// state does not have).
func (s *State) BridgeCookie(bridge string) uint64 {
	switch {
	case bridge == "":
		return 0
	case bridge == s.Int.Name:
		return s.Int.Cookie
	case s.Tun != nil && bridge == s.Tun.Name:
		return s.Tun.Cookie
	}
	for _, pb := range s.Phys {
		if pb.Bridge == bridge {
			return pb.Cookie
		}
	}
	return 0
}
