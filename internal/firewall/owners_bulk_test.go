package firewall

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

// FlowsForOwners gives exactly FlowsFor's flows for every owner, including
// ports sharing a MAC (the index it shares decides their winner).
func TestFlowsForOwnersMatchesFlowsFor(t *testing.T) {
	st := &State{Ports: map[string]Port{}, Members: map[string][]Member{}, Groups: map[string]SecurityGroup{
		"sg": {ID: "sg", Rules: []Rule{
			{ID: "r1", Direction: Ingress, EtherType: IPv4, RemoteGroupID: "sg"},
			{ID: "r2", Direction: Egress, EtherType: IPv4},
		}},
	}}
	for i := 0; i < 6; i++ {
		mac := net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, byte(i % 4)} // two pairs share a MAC
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 2)})
		id := fmt.Sprintf("p%d", i)
		st.Ports[id] = Port{ID: id, OFPort: uint32(10 + i), VLAN: 1, MAC: mac, FixedIPs: []netip.Addr{ip},
			PortSecurity: true, SecurityGroupIDs: []string{"sg"}}
		st.Members["sg"] = append(st.Members["sg"], Member{IP: netip.PrefixFrom(ip, 32), MAC: mac})
	}
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	owners := append(Owners(st, ids), OwnerPort("gone"))
	got, errs := FlowsForOwners(st, ids, owners)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, o := range owners {
		want, err := FlowsFor(st, ids, o)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[o], want) {
			t.Errorf("%s: FlowsForOwners differs from FlowsFor:\n got %v\nwant %v", o, got[o], want)
		}
	}
	if _, errs := FlowsForOwners(st, ids, []string{"fw:bogus"}); errs["fw:bogus"] == nil {
		t.Errorf("no error for a bad owner")
	}
}
