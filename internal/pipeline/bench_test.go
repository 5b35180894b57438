package pipeline

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
)

// benchState: 1,000 VM ports over 100 networks (80 vxlan, 19 vlan, 1 flat),
// 50 vxlan tunnels, l2pop with a flooding entry and 10 unicast entries per
// remote agent and network (2 remote agents per network), ARP responder on.
func benchState(nPorts int, cfg Config) *State {
	s := NewState(cfg)
	s.Int.PatchTunOfport = 2
	s.Tun = &TunBridge{Name: "br-tun", PatchIntOfport: 1}
	s.Phys["physnet1"] = &PhysBridge{Bridge: "br-phys", IntOfport: 1, PhysOfport: 1}
	vm := NewVLANManager()
	var tunIPs []netip.Addr
	for i := 0; i < 50; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})
		tunIPs = append(tunIPs, ip)
		s.Tunnels[TunnelKey{ip, TypeVXLAN}] = &Tunnel{RemoteIP: ip, Type: TypeVXLAN, Ofport: uint32(100 + i)}
	}
	var keys []NetKey
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("net-%03d", i)
		var n *Network
		switch {
		case i < 80:
			n = &Network{Key: Seg(id, uint32(1000+i)), Type: TypeVXLAN, FDB: map[netip.Addr]*RemoteFDB{}}
			for j := 0; j < 2; j++ {
				r := &RemoteFDB{Flood: true}
				for e := 0; e < 10; e++ {
					r.Entries = append(r.Entries, FDBEntry{
						MAC: net.HardwareAddr{0xfa, 0x16, 0x3e, byte(i), byte(j), byte(e)},
						IP:  netip.AddrFrom4([4]byte{192, 168, byte(i), byte(j*10 + e + 1)}),
					})
				}
				n.FDB[tunIPs[(i+j)%len(tunIPs)]] = r
			}
		case i < 99:
			n = &Network{Key: Seg(id, uint32(100+i)), Type: TypeVLAN, PhysicalNetwork: "physnet1"}
		default:
			n = &Network{Key: NoSeg(id), Type: TypeFlat, PhysicalNetwork: "physnet1"}
		}
		v, err := vm.Allocate(n.Key)
		if err != nil {
			panic(err)
		}
		n.LocalVLAN = v
		s.Networks[n.Key] = n
		keys = append(keys, n.Key)
	}
	for i := 0; i < nPorts; i++ {
		id := fmt.Sprintf("port-%05d", i)
		p := &Port{ID: id, Name: "tap" + id, Ofport: uint32(10 + i),
			MAC: net.HardwareAddr{0xfa, 0x16, 0x3f, byte(i >> 16), byte(i >> 8), byte(i)}, Net: keys[i%len(keys)],
			AdminUp: true, DeviceOwner: "compute:nova", PortSecurity: true,
			FixedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)}}
		s.Ports[id] = p
	}
	return s
}

func countFlows(d Desired) int {
	n := 0
	for _, owners := range d {
		for _, fs := range owners {
			n += len(fs)
		}
	}
	return n
}

func benchCompute(b *testing.B, cfg Config) {
	s := benchState(1000, cfg)
	b.ReportAllocs()
	b.ResetTimer()
	var d Desired
	for i := 0; i < b.N; i++ {
		d = Compute(s)
	}
	b.ReportMetric(float64(countFlows(d)), "flows")
}

// BenchmarkCompute1000Ports: the whole dataplane from scratch (restart, resync).
func BenchmarkCompute1000PortsOVSFirewall(b *testing.B) {
	benchCompute(b, Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true,
		L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
}

func BenchmarkCompute1000PortsNoop(b *testing.B) {
	benchCompute(b, Config{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true,
		L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
}

// BenchmarkOnePortOwner: the incremental path when one port changes.
func BenchmarkOnePortOwner(b *testing.B) {
	s := benchState(1000, Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true,
		L2Population: true, TunnelTypes: []NetworkType{TypeVXLAN}})
	o := OwnerPort("port-00500")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FlowsFor(s, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOneNetworkOwner: an l2pop FDB change on one network.
func BenchmarkOneNetworkOwner(b *testing.B) {
	s := benchState(1000, Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true,
		L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
	o := OwnerNetwork(Seg("net-007", 1007))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FlowsFor(s, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchStateSane guards the benchmark's fixture: every owner computes,
// and no flow entry is claimed by two owners.
func TestBenchStateSane(t *testing.T) {
	for _, cfg := range []Config{
		{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true, L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}},
		{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true, L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}},
	} {
		d := Compute(benchState(1000, cfg))
		for br, owners := range d {
			seen := map[string]string{}
			for o, fs := range owners {
				for _, f := range fs {
					k := f.Key()
					if prev, dup := seen[k]; dup {
						t.Fatalf("%s: %s claimed by %s and %s", br, k, prev, o)
					}
					seen[k] = o
				}
			}
		}
		if countFlows(d) < 1000 {
			t.Fatalf("only %d flows", countFlows(d))
		}
	}
}
