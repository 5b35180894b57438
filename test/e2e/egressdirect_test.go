//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScenarioExplicitlyEgressDirect: [agent] explicitly_egress_direct with
// the openvswitch firewall, as the reference's firewall does it: accepted
// traffic leaves table 94 by direct output, to the local VM (priority 12)
// or, tagged, out of the network's patch port (priority 10: patch-tun for
// VXLAN, int-br-phys for VLAN) instead of NORMAL. Real packets: two VMs on
// one VXLAN network ping each other, a VM on a VLAN network pings a host
// behind br-phys; the direct flows' packet counters prove the path.
func TestScenarioExplicitlyEgressDirect(t *testing.T) {
	e := NewEnv(t)
	e.StartAgentAlive(AgentConfig{Set: map[string]map[string]string{"agent": {"explicitly_egress_direct": "True"}}}, 90*time.Second)
	vx := e.Network(NetworkSpec{Name: "ed-vx", NetworkType: "vxlan"})
	e.Subnet(vx.ID, "10.250.25.0/24")
	vlan := e.ProviderVLANNetwork("ed-vlan", "physnet1", 175)
	e.Subnet(vlan.ID, "10.250.26.0/24")
	vm1, vm2, vmV := e.VM(vx, "ed1"), e.VM(vx, "ed2"), e.VM(vlan, "edv")
	for _, vm := range []*VM{vm1, vm2, vmV} {
		e.WaitStatus(vm.Port, "ACTIVE", 60*time.Second)
	}
	if f, flows := findFlow(t, e, "br-int", `table=60,.*priority=2 actions=resubmit\(,94\)`); f == "" {
		t.Errorf("br-int: no table-60 priority-2 resubmit to 94:\n%s", strings.Join(flows, "\n"))
	}

	// VXLAN, both VMs here: delivered by table 94's per-MAC output.
	if _, err := vm1.PingUntil(e.Ctx, vm2.IP, 30*time.Second); err != nil {
		t.Fatalf("%s -> %s: %v", vm1.NS, vm2.IP, err)
	}
	if st, err := vm1.Ping(e.Ctx, vm2.IP, 5); err != nil || st.Lost() != 0 {
		t.Errorf("%s -> %s: %+v %v", vm1.NS, vm2.IP, st, err)
	}
	// VM to VM on this host goes through the firewall's ingress tables;
	// what reaches 94 addressed to a local VM (the ARP reply to the first
	// ping) is delivered by 94's per-MAC output instead of NORMAL.
	n := 0
	for _, vm := range []*VM{vm1, vm2} {
		n += packets(t, e, fmt.Sprintf(`table=94,.*priority=12,.*dl_dst=%s actions=output:%d\b`, strings.ToLower(vm.MAC), ofport(t, e, vm.Tap)))
	}
	if n == 0 {
		t.Errorf("table 94's direct output to %s and %s carried no packet", vm1.Tap, vm2.Tap)
	} else {
		t.Logf("vxlan: %d packets delivered by table 94's direct output to a local VM", n)
	}

	// VLAN: unicast to a host behind br-phys leaves tagged out of int-br-phys.
	sw := e.NewPhysSwitch("br-phys")
	swIP := switchIP("10.250.26.0/24", vmV.IP)
	if err := sw.AddHost(e.Ctx, vlan.SegmentationID, swIP+"/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := vmV.PingUntil(e.Ctx, swIP, 30*time.Second); err != nil {
		t.Fatalf("%s -> switch %s: %v", vmV.NS, swIP, err)
	}
	if st, err := vmV.Ping(e.Ctx, swIP, 5); err != nil || st.Lost() != 0 {
		t.Errorf("%s -> switch %s: %+v %v", vmV.NS, swIP, st, err)
	}
	intPhys := ofport(t, e, "int-br-phys")
	if n := packets(t, e, fmt.Sprintf(`table=94,.*priority=10,.*dl_src=%s,.*output:%d\b`, strings.ToLower(vmV.MAC), intPhys)); n == 0 {
		t.Errorf("table 94's tagged output to int-br-phys (ofport %d) carried no packet", intPhys)
	} else {
		t.Logf("vlan: %d packets left by table 94's tagged output to int-br-phys", n)
	}
}

func ofport(t *testing.T, e *Env, iface string) int {
	t.Helper()
	out, err := e.OVS.Vsctl(e.Ctx, "get", "Interface", iface, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || n <= 0 {
		t.Fatalf("%s: ofport %q", iface, out)
	}
	return n
}

var nPackets = regexp.MustCompile(`n_packets=(\d+)`)

// packets sums n_packets of br-int's flows matching re.
func packets(t *testing.T, e *Env, re string) int {
	t.Helper()
	out, err := e.OVS.Ofctl(e.Ctx, "dump-flows", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	rx := regexp.MustCompile(re)
	sum, found := 0, false
	for _, l := range strings.Split(out, "\n") {
		norm := regexp.MustCompile(`(cookie|duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*, ?`).ReplaceAllString(strings.TrimSpace(l), "")
		if !rx.MatchString(norm) {
			continue
		}
		found = true
		if m := nPackets.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
	}
	if !found {
		t.Errorf("no br-int flow matches %s", re)
	}
	return sum
}
