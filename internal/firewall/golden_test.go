package firewall

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the current output")

// goldenCases are small scenarios whose complete firewall flows (every owner,
// cookies dropped, sorted) are kept in testdata/golden/<name>.txt. Each file
// was read line by line against the reference driver's code when written.
func goldenCases() map[string]*State {
	cases := map[string]*State{}

	// Ingress tcp/22 from anywhere: plain rule, prefix /0 omitted, priority 77.
	cases["tcp22_any"] = onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(22), PortRangeMax: iptr(22), RemoteIPPrefix: pfx("0.0.0.0/0")},
	}})

	// Egress udp 1000-1999 to 192.168.0.0/16: value/mask expansion.
	cases["port_range"] = onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Egress, EtherType: IPv4, Protocol: "udp", PortRangeMin: iptr(1000), PortRangeMax: iptr(1999), RemoteIPPrefix: pfx("192.168.0.0/16")},
	}})

	// Remote group and address group rules: overlapping tcp ranges split,
	// an address in both remotes carries both conjunctions, ICMP class.
	rg := onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(22), PortRangeMax: iptr(22), RemoteGroupID: sgB},
		{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(20), PortRangeMax: iptr(30), RemoteAddressGroupID: agX},
		{Direction: Ingress, EtherType: IPv4, Protocol: "icmp", RemoteGroupID: sgB},
		{Direction: Egress, EtherType: IPv6, RemoteGroupID: sgB},
	}})
	rg.Members[sgB] = []Member{
		{IP: pfx("10.0.0.9/32"), MAC: mac("fa:16:3e:00:00:09")},
		{IP: pfx("10.0.0.5/32"), MAC: mac("fa:16:3e:00:00:01")},
		{IP: pfx("2001:db8::9/128"), MAC: mac("fa:16:3e:00:00:09")},
		// A member's allowed address pair of ::/0: the address flow matches its MAC instead.
		{IP: pfx("::/0"), MAC: mac("fa:16:3e:00:00:0a")},
	}
	rg.Members[agX] = []Member{{IP: pfx("10.0.0.9/32")}, {IP: pfx("172.16.0.0/12")}}
	cases["remote_group"] = rg

	// Allowed address pairs: another MAC with an IPv4 and an IPv6, a CIDR on the port MAC.
	cases["allowed_address_pairs"] = onePort(SecurityGroup{ID: sgA}, func(p *Port) {
		p.AllowedAddressPairs = []AddressPair{
			{MAC: mac("fa:16:3e:00:00:aa"), IP: pfx("10.0.0.100/32")},
			{IP: pfx("192.168.10.0/24")},
			{MAC: mac("fa:16:3e:00:00:aa"), IP: pfx("2001:db8::100/128")},
		}
	})

	// Port security disabled: pass-through, nothing but 73 -> 94.
	cases["port_security_disabled"] = onePort(SecurityGroup{ID: sgA, Rules: []Rule{{Direction: Ingress, EtherType: IPv4}}}, func(p *Port) { p.PortSecurity = false })

	// Stateless group: no conntrack anywhere for this port.
	sl := onePort(SecurityGroup{ID: sgA, Stateless: true, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(80), PortRangeMax: iptr(80)},
		{Direction: Egress, EtherType: IPv4},
		{Direction: Ingress, EtherType: IPv4, RemoteGroupID: sgA},
	}})
	sl.Members[sgA] = []Member{{IP: pfx("10.0.0.5/32"), MAC: mac("fa:16:3e:00:00:01")}}
	cases["stateless"] = sl

	// IPv6 port: ND for the fixed address and the link-local one, ICMPv6 echo rule.
	cases["ipv6_nd"] = onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv6, Protocol: "icmp", PortRangeMin: iptr(128), PortRangeMax: iptr(0)},
		{Direction: Egress, EtherType: IPv6, RemoteIPPrefix: pfx("2001:db8:1::/48")},
	}}, func(p *Port) { p.FixedIPs = []netip.Addr{ip("2001:db8::5")} })

	// permitted_ethertypes.
	pe := onePort(SecurityGroup{ID: sgA})
	pe.Config.PermittedEthertypes = []uint16{0x88cc}
	cases["permitted_ethertypes"] = pe
	// explicitly_egress_direct: table 94 direct output, tagged unicast to the patch port.
	ed := onePort(SecurityGroup{ID: sgA}, func(p *Port) { p.EgressDirectPatch = 2 })
	ed.Config.ExplicitlyEgressDirect = true
	ed.Ports["p2"] = Port{ID: "p2", OFPort: 8, VLAN: 5, MAC: mac("fa:16:3e:00:00:02"), EgressDirectPatch: 2}
	cases["egress_direct"] = ed

	// other_config:hw-offload=true: replies by NORMAL on the port's VLAN.
	hw := onePort(SecurityGroup{ID: sgA})
	hw.Config.HWOffload = true
	cases["hw_offload"] = hw
	return cases
}

func TestGoldenTables(t *testing.T) {
	for name, st := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			got := computeLines(st)
			path := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file: %v (run with -update to create)", err)
			}
			want := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			expectLines(t, got, want)
		})
	}
}
