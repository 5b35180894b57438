package pipeline

import (
	"strings"
	"testing"
)

// A segmentation id that does not fit its wire field gives the network no
// flows and its ports the dead port's drop: VLAN 4196 must not become
// VLAN 100, VNI 2^24+100 not VNI 100 (issue 18 item 2).
func TestOutOfRangeSegmentHasNoFlows(t *testing.T) {
	for _, c := range []struct {
		typ NetworkType
		seg uint32
	}{{TypeVLAN, 4196}, {TypeVLAN, 4095}, {TypeVLAN, 0}, {TypeVXLAN, 1<<24 + 100}, {TypeGeneve, 1 << 24}, {TypeVXLAN, 0}, {TypeGRE, 0}} {
		for _, cfg := range []Config{
			{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true},
			{FirewallDriver: FirewallNoop},
		} {
			s, p := portState(cfg)
			s.Config.TunnelTypes = []NetworkType{TypeVXLAN, TypeGRE, TypeGeneve}
			k := Seg("net-bad", c.seg)
			s.Networks[k] = &Network{Key: k, Type: c.typ, PhysicalNetwork: "physnet1", LocalVLAN: 3}
			p.Net = k
			bf, err := FlowsFor(s, OwnerNetwork(k))
			if err != nil {
				t.Fatal(err)
			}
			for br, fs := range bf {
				for _, l := range lines(fs) {
					t.Errorf("%s %d: network flow on %s: %s", c.typ, c.seg, br, l)
				}
			}
			got := ownerFlows(t, s, OwnerPort(p.ID), "br-int")
			if strings.Join(got, "\n") != "priority=2,in_port=5 actions=drop" {
				t.Errorf("%s %d %s: port flows %v, want the dead port's drop", c.typ, c.seg, cfg.FirewallDriver, got)
			}
		}
	}
	for _, c := range []struct {
		typ NetworkType
		seg uint32
	}{{TypeVLAN, 1}, {TypeVLAN, 4094}, {TypeVXLAN, 1<<24 - 1}, {TypeGRE, 1<<32 - 1}, {TypeFlat, 0}} {
		if !c.typ.ValidSegment(c.seg) {
			t.Errorf("%s %d refused", c.typ, c.seg)
		}
	}
}

// An IPv4-mapped allowed address pair is IPv6 (as for the reference): it
// must not let the port answer ARP for the IPv4 address.
func TestAntiSpoofMappedPairIsIPv6(t *testing.T) {
	s, p := portState(Config{FirewallDriver: FirewallNoop})
	p.AllowedAddressPairs = []AddressPair{{IP: pfx("::ffff:10.9.9.9")}}
	ls := ownerFlows(t, s, OwnerPort(p.ID), "br-int")
	for _, l := range ls {
		if strings.Contains(l, "arp_spa=10.9.9.9") {
			t.Errorf("ARP allowed for the mapped address: %s", l)
		}
	}
	if !strings.Contains(strings.Join(ls, "\n"), "nd_target=::ffff:10.9.9.9") {
		t.Errorf("mapped pair not an IPv6 neighbour target:\n%s", strings.Join(ls, "\n"))
	}
}
