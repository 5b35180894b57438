package pipeline

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// Owner keys. Every flow the pipeline computes belongs to exactly one owner;
// when something changes the agent recomputes only the affected owners and the
// reconciler diffs each owner's flows against what it installed for it.
//
//	"base"                 bridge defaults on br-int, br-tun and every physical bridge
//	"physnet:<physnet>"    the patch pair of one bridge_mappings entry (drops, direct goto)
//	"net:<net-id>/<seg>"   one local VLAN mapping; seg is the segmentation id or "None"
//	"port:<port-id>"       one VIF on br-int
//	"tun:<remote-ip>"      the tunnel ports to one remote IP on br-tun (one per type)
//
// What dirties what (for the agent): a port change dirties its port owner; a
// port that appears in or leaves a network also dirties nothing else (network
// flows do not list ports). A network's FDB change dirties that network. A
// tunnel port added, removed or renumbered dirties its tunnel owner and every
// network of that tunnel type (flood and unicast flows name tunnel ofports).
// A config, bridge or patch-port ofport change dirties everything.
const OwnerBase = "base"

func OwnerPhysnet(physnet string) string { return "physnet:" + physnet }
func OwnerNetwork(k NetKey) string       { return "net:" + k.String() }
func OwnerPort(portID string) string     { return "port:" + portID }
func OwnerTunnel(ip netip.Addr) string   { return "tun:" + ip.String() }

// BridgeFlows is flows by bridge name.
type BridgeFlows map[string][]openflow.Flow

// add appends fs to bridge, stamping the bridge's cookie on flows that have none.
func (b BridgeFlows) add(bridge string, cookie uint64, fs ...openflow.Flow) {
	if len(fs) == 0 {
		return
	}
	for i := range fs {
		if fs[i].Cookie == 0 {
			fs[i].Cookie = cookie
		}
	}
	if b[bridge] == nil {
		b[bridge] = fs // the feature functions return fresh slices: no copy
		return
	}
	b[bridge] = append(b[bridge], fs...)
}

// Desired is the complete desired dataplane: bridge name -> owner -> flows.
type Desired map[string]map[string][]openflow.Flow

// Owners lists every owner key the state currently has, sorted.
func Owners(s *State) []string {
	out := []string{OwnerBase}
	for name := range s.Phys {
		out = append(out, OwnerPhysnet(name))
	}
	for k := range s.Networks {
		out = append(out, OwnerNetwork(k))
	}
	for id := range s.Ports {
		out = append(out, OwnerPort(id))
	}
	ips := map[netip.Addr]bool{}
	for k := range s.Tunnels {
		if !ips[k.IP] {
			ips[k.IP] = true
			out = append(out, OwnerTunnel(k.IP))
		}
	}
	sort.Strings(out[1:])
	return out
}

// Compute returns every flow of every owner.
func Compute(s *State) Desired {
	d := Desired{}
	for _, o := range Owners(s) {
		bf, err := FlowsFor(s, o)
		if err != nil {
			continue // unreachable: Owners only yields valid keys
		}
		for br, fs := range bf {
			m := d[br]
			if m == nil {
				m = map[string][]openflow.Flow{}
				d[br] = m
			}
			m[o] = fs
		}
	}
	return d
}

// Dependents returns the other owners whose flows depend on the object named
// by owner, so that the agent recomputes them too when it changes:
//
//	tun:<ip>       every tunnelled network (flood and unicast flows name tunnel ofports;
//	               the tunnel's type may be gone from the state already)
//	physnet:<p>    every VLAN/flat network on p (translation flows name the patch ofports)
//	net:<k>        for VLAN/flat, the other networks on the same physnet (provider
//	               segment conflicts, see ownsProviderSegment); nothing for tunnels
//	port:<id>      the other ports of its network sharing one of its allowed MACs
//	               (see winsAAPMAC); call it before removing the port from the state
//	               as well as after changing it
//	base           nothing
//
// The result is sorted and excludes owner itself.
func Dependents(s *State, owner string) []string {
	kind, arg, _ := strings.Cut(owner, ":")
	var out []string
	switch kind {
	case "tun":
		for k, n := range s.Networks {
			if n.Type.IsTunnel() {
				out = append(out, OwnerNetwork(k))
			}
		}
	case "physnet":
		for k, n := range s.Networks {
			if (n.Type == TypeVLAN || n.Type == TypeFlat) && n.PhysicalNetwork == arg {
				out = append(out, OwnerNetwork(k))
			}
		}
	case "port":
		p := s.Ports[arg]
		if p == nil {
			return nil
		}
		for id, o := range s.Ports {
			if id != arg && o.Net == p.Net && sharesAAPMAC(p, o) {
				out = append(out, OwnerPort(id))
			}
		}
	case "net":
		key, err := parseNetKey(arg)
		if err != nil {
			return nil
		}
		self := s.Networks[key]
		if self == nil || (self.Type != TypeVLAN && self.Type != TypeFlat) {
			return nil
		}
		for k, n := range s.Networks {
			if k != key && (n.Type == TypeVLAN || n.Type == TypeFlat) && n.PhysicalNetwork == self.PhysicalNetwork {
				out = append(out, OwnerNetwork(k))
			}
		}
	}
	sort.Strings(out)
	return out
}

// FlowsFor returns the flows of one owner by bridge. An owner that no longer
// exists in the state returns no flows (the reconciler then deletes what it
// had installed for it); a malformed key is an error.
func FlowsFor(s *State, owner string) (BridgeFlows, error) {
	kind, arg, _ := strings.Cut(owner, ":")
	out := BridgeFlows{}
	switch kind {
	case OwnerBase:
		baseFlows(s, out)
	case "physnet":
		if pb := s.Phys[arg]; pb != nil {
			physnetFlows(s, arg, pb, out)
		}
	case "net":
		k, err := parseNetKey(arg)
		if err != nil {
			return nil, fmt.Errorf("pipeline: owner %q: %w", owner, err)
		}
		if n := s.Networks[k]; n != nil {
			networkFlows(s, n, out)
		}
	case "port":
		if p := s.Ports[arg]; p != nil {
			portFlows(s, p, out)
		}
	case "tun":
		ip, err := netip.ParseAddr(arg)
		if err != nil {
			return nil, fmt.Errorf("pipeline: owner %q: %w", owner, err)
		}
		// one owner per remote IP: the ports of every type to it
		for _, typ := range []NetworkType{TypeVXLAN, TypeGRE, TypeGeneve} {
			if t := s.Tunnels[TunnelKey{ip, typ}]; t != nil {
				tunnelFlows(s, t, out)
			}
		}
	default:
		return nil, fmt.Errorf("pipeline: unknown owner %q", owner)
	}
	return out, nil
}

func parseNetKey(s string) (NetKey, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return NetKey{}, fmt.Errorf("network key %q has no segment", s)
	}
	id, seg := s[:i], s[i+1:]
	if seg == "None" {
		return NoSeg(id), nil
	}
	n, err := strconv.ParseUint(seg, 10, 32)
	if err != nil {
		return NetKey{}, fmt.Errorf("network key %q: segment: %w", s, err)
	}
	return Seg(id, uint32(n)), nil
}

// baseFlows are the defaults of every bridge.
func baseFlows(s *State, out BridgeFlows) {
	out.add(s.Int.Name, s.Int.Cookie, intBaseFlows(s)...)
	if s.Tun != nil {
		out.add(s.Tun.Name, s.Tun.Cookie, tunBaseFlows(s)...)
	}
	for _, pb := range s.Phys {
		out.add(pb.Bridge, pb.Cookie, physBaseFlows(pb)...)
	}
}

func physnetFlows(s *State, physnet string, pb *PhysBridge, out BridgeFlows) {
	out.add(s.Int.Name, s.Int.Cookie, intPhysnetFlows(s, pb)...)
	out.add(pb.Bridge, pb.Cookie, physPatchFlows(pb, s.Config.Distributed)...)
}

func networkFlows(s *State, n *Network, out BridgeFlows) {
	if !n.segmentOK() {
		return
	}
	switch {
	case n.Type.IsTunnel():
		if s.Tun != nil && s.Config.tunnelTypeEnabled(n.Type) {
			out.add(s.Tun.Name, s.Tun.Cookie, tunNetworkFlows(s, n)...)
		}
	case n.Type == TypeVLAN || n.Type == TypeFlat:
		pb := s.Phys[n.PhysicalNetwork]
		if pb == nil {
			return // physnet not mapped on this host: the reference logs and installs nothing
		}
		if !ownsProviderSegment(s, n) {
			return
		}
		out.add(s.Int.Name, s.Int.Cookie, intTranslationFlow(s, pb, n))
		out.add(pb.Bridge, pb.Cookie, physTranslationFlow(pb, n, s.Config.Distributed))
	}
}

func portFlows(s *State, p *Port, out BridgeFlows) {
	out.add(s.Int.Name, s.Int.Cookie, intPortFlows(s, p)...)
}

func tunnelFlows(s *State, t *Tunnel, out BridgeFlows) {
	if s.Tun == nil || !s.Config.tunnelTypeEnabled(t.Type) {
		return
	}
	out.add(s.Tun.Name, s.Tun.Cookie, tunPortFlow(s, t)...)
}

// ownsProviderSegment: two mappings claiming the same provider segment of a
// physnet (a second flat network, which Neutron refuses, or stale state)
// would install the same br-int flow with different actions. The reference
// lets the last one win; we let the lowest local VLAN win so the result does
// not depend on event order, and the other gets no translation flows.
func ownsProviderSegment(s *State, n *Network) bool {
	for _, o := range s.Networks {
		if o == n || o.PhysicalNetwork != n.PhysicalNetwork || (o.Type != TypeVLAN && o.Type != TypeFlat) {
			continue
		}
		if providerVID(o) != providerVID(n) {
			continue
		}
		if o.LocalVLAN < n.LocalVLAN || (o.LocalVLAN == n.LocalVLAN && o.Key.String() < n.Key.String()) {
			return false
		}
	}
	return true
}

// providerVID is the VLAN a mapping uses on the wire, -1 for untagged.
func providerVID(n *Network) int {
	if n.Type == TypeFlat || !n.Key.HasSeg {
		return -1
	}
	return int(n.Key.SegID)
}

// Conflicts lists every flow entry (bridge, table, priority, match) that two
// owners claim. The pipeline resolves the conflicts it knows of (provider
// segments, shared allowed-address-pair MACs), so this is a guard for the
// agent to log in debug builds and for tests: a per-owner reconciler would
// delete one owner's flow when the other owner changes.
func Conflicts(d Desired) []string {
	var out []string
	for br, owners := range d {
		seen := map[string]string{}
		names := make([]string, 0, len(owners))
		for o := range owners {
			names = append(names, o)
		}
		sort.Strings(names)
		for _, o := range names {
			for _, f := range owners[o] {
				k := f.Key()
				if prev, dup := seen[k]; dup {
					out = append(out, fmt.Sprintf("%s: %s claimed by %s and %s", br, k, prev, o))
					continue
				}
				seen[k] = o
			}
		}
	}
	sort.Strings(out)
	return out
}
