package firewall

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

func cloneState(st *State) *State {
	n := &State{Config: st.Config, Ports: map[string]Port{}, Groups: map[string]SecurityGroup{}, Members: map[string][]Member{}}
	for k, v := range st.Ports {
		n.Ports[k] = v
	}
	for k, v := range st.Groups {
		v.Rules = append([]Rule(nil), v.Rules...)
		n.Groups[k] = v
	}
	for k, v := range st.Members {
		n.Members[k] = append([]Member(nil), v...)
	}
	return n
}

// Every flow entry (table, priority, match) belongs to exactly one owner:
// the reconciler diffs owners independently, so a shared entry would be
// deleted by one owner while another still wants it.
func TestOwnersDisjoint(t *testing.T) {
	for name, st := range map[string]*State{"scenario": scenarioState(t), "bench": benchState(100, 20)} {
		ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
		seen := map[string]string{}
		for owner, fs := range Compute(st, ids) {
			for _, f := range fs {
				if o, dup := seen[f.Key()]; dup {
					t.Errorf("%s: %s in %s and %s", name, f.Key(), o, owner)
				}
				seen[f.Key()] = owner
			}
		}
	}
}

func TestFlowsForMatchesCompute(t *testing.T) {
	st := scenarioState(t)
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	all := Compute(st, ids)
	owners := Owners(st, ids)
	if len(owners) != len(all) {
		t.Fatalf("Owners %d vs Compute %d", len(owners), len(all))
	}
	for _, o := range owners {
		fs, err := FlowsFor(st, ids, o)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(lines(fs), lines(all[o])) {
			t.Errorf("%s: FlowsFor differs from Compute", o)
		}
	}
	want := []string{"fw:base", "fw:conj:1", "fw:conj:2", "fw:conj:3"}
	for _, w := range want {
		if _, ok := all[w]; !ok {
			t.Errorf("missing owner %s (have %v)", w, owners)
		}
	}
	if _, err := FlowsFor(st, ids, "nope"); err == nil {
		t.Error("unknown owner accepted")
	}
}

func TestChangedOwners(t *testing.T) {
	base := scenarioState(t)
	sg := "12e67854-c5a3-410e-852e-2f52043d36d3"
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(base))
	allPorts := []string{
		OwnerPort("8201cd6c-0f55-4ae8-8ccb-2d16cb0cfd53"), OwnerPort("97159a8c-4e92-48c9-82d0-60a3dee40917"),
		OwnerPort("bf7809b0-5be6-4c20-aeb6-0577dd1bdcad"), OwnerPort("c022f4cf-e81b-4fe2-89a5-566b9576b797"),
	}
	cases := []struct {
		name string
		mut  func(*State)
		want []string
	}{
		{"nothing", func(*State) {}, nil},
		{"plain rule added", func(s *State) {
			g := s.Groups[sg]
			g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, Protocol: "udp", PortRangeMin: iptr(53), PortRangeMax: iptr(53)})
			s.Groups[sg] = g
		}, allPorts},
		{"member added", func(s *State) {
			s.Members[sg] = append(s.Members[sg], Member{IP: pfx("10.100.0.200/32"), MAC: mac("fa:16:3e:00:00:c8")})
		}, []string{"fw:conj:1", "fw:conj:2", "fw:conj:3"}},
		{"member of an unreferenced group", func(s *State) {
			s.Members["other"] = []Member{{IP: pfx("10.9.9.9/32")}}
		}, nil},
		{"port removed", func(s *State) {
			delete(s.Ports, "8201cd6c-0f55-4ae8-8ccb-2d16cb0cfd53") // the only port on VLAN 2
		}, []string{"fw:conj:2", OwnerPort("8201cd6c-0f55-4ae8-8ccb-2d16cb0cfd53")}},
		{"port AAP", func(s *State) {
			p := s.Ports["bf7809b0-5be6-4c20-aeb6-0577dd1bdcad"]
			p.AllowedAddressPairs = []AddressPair{{IP: pfx("10.102.0.50/32")}}
			s.Ports[p.ID] = p
		}, []string{OwnerPort("bf7809b0-5be6-4c20-aeb6-0577dd1bdcad")}},
		{"config", func(s *State) { s.Config.PermittedEthertypes = []uint16{0x88cc} },
			append([]string{"fw:base", "fw:conj:1", "fw:conj:2", "fw:conj:3"}, allPorts...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := cloneState(base)
			c.mut(next)
			nids, got := Update(base, next, ids)
			want := append([]string(nil), c.want...)
			sortStrings(want)
			if len(got) == 0 && len(want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("changed %v, want %v", got, want)
			}
			// Owners not named must compute the same flows as before.
			before, after := Compute(base, ids), Compute(next, nids)
			named := map[string]bool{}
			for _, o := range got {
				named[o] = true
			}
			for o := range after {
				if !named[o] && !reflect.DeepEqual(lines(before[o]), lines(after[o])) {
					t.Errorf("owner %s changed but was not named", o)
				}
			}
			for o := range before {
				if _, ok := after[o]; !ok && !named[o] {
					t.Errorf("owner %s vanished but was not named", o)
				}
			}
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestAssignConjIDsStable(t *testing.T) {
	k := func(id string, d Direction, e EtherType) ConjKey {
		return ConjKey{Remote: RemoteRef{ID: id}, Direction: d, EtherType: e}
	}
	a, b, c := k("a", Ingress, IPv4), k("b", Ingress, IPv4), k("c", Egress, IPv6)
	ids := AssignConjIDs(ConjIDs{}, []ConjKey{b, a})
	if ids.IDs[a] != 16 || ids.IDs[b] != 24 {
		t.Fatalf("first assignment %v", ids.IDs)
	}
	// a goes away, c arrives: b keeps 24, c must not take a's freshly freed 16.
	ids2 := AssignConjIDs(ids, []ConjKey{b, c})
	if ids2.IDs[b] != 24 || ids2.IDs[c] != 32 {
		t.Fatalf("second assignment %v", ids2.IDs)
	}
	// Next round 16 is free again.
	ids3 := AssignConjIDs(ids2, []ConjKey{b, c, a})
	if ids3.IDs[a] != 16 {
		t.Fatalf("third assignment %v", ids3.IDs)
	}
	// Reserved blocks are skipped until released.
	r := AssignConjIDs(ConjIDs{Reserved: map[uint32]bool{16: true, 24: true}}, []ConjKey{a})
	if r.IDs[a] != 32 || !r.Reserved[16] || !r.Reserved[24] {
		t.Fatalf("reserved assignment %+v", r)
	}
	if rr := r.ReleaseReserved(); rr.Reserved != nil || rr.IDs[a] != 32 {
		t.Fatalf("release %+v", rr)
	}
}

// After a restart the ids are recovered from the installed flows, so the
// recomputed flows are identical (no churn), and ids that cannot be
// attributed stay reserved.
func TestRecoverConjIDs(t *testing.T) {
	st := benchState(30, 5)
	// A previous run that allocated in another order: shift every block.
	prev := ConjIDs{IDs: map[ConjKey]uint32{}}
	for i, k := range NeededConjKeys(st) {
		prev.IDs[k] = uint32(80 + 8*i)
	}
	var installed []of.Flow
	for _, fs := range Compute(st, prev) {
		installed = append(installed, fs...)
	}
	installed = append(installed, of.Flow{Table: TableRulesIngress, Priority: 70, Match: of.Match{of.Reg(RegNet, 9), of.IPv4Src(netip.MustParsePrefix("1.2.3.4/32"))}, Actions: []of.Action{of.Conjunction{ID: 1001, Clause: 1, NClauses: 2}}})
	rec := RecoverConjIDs(installed, st)
	if !reflect.DeepEqual(rec.IDs, prev.IDs) {
		t.Fatalf("recovered %v, want %v", rec.IDs, prev.IDs)
	}
	if !rec.Reserved[1000] || len(rec.Reserved) != 1 {
		t.Fatalf("reserved %v", rec.Reserved)
	}
	ids := AssignConjIDs(rec, NeededConjKeys(st))
	if !reflect.DeepEqual(lines(flatten(Compute(st, ids))), lines(installed[:len(installed)-1])) {
		t.Fatal("recomputed flows differ from installed ones")
	}
}

func flatten(m map[string][]of.Flow) []of.Flow {
	var out []of.Flow
	for _, fs := range m {
		out = append(out, fs...)
	}
	return out
}

// Two ports on one VLAN sharing an allowed-address-pair MAC: one table-73
// entry, owned by the port whose own MAC it is, else the lowest ofport.
func TestSharedAAPMAC(t *testing.T) {
	st := onePort(SecurityGroup{ID: sgA})
	vip := mac("fa:16:3e:00:00:ee")
	p1 := st.Ports["p1"]
	p1.AllowedAddressPairs = []AddressPair{{MAC: vip, IP: pfx("10.0.0.200/32")}}
	st.Ports["p1"] = p1
	p2 := p1
	p2.ID, p2.OFPort, p2.MAC = "p2", 3, mac("fa:16:3e:00:00:02")
	st.Ports["p2"] = p2
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	has := func(st *State, id string) bool {
		for _, l := range lines(PortFlows(st, st.Ports[id], ids)) {
			if strings.Contains(l, "dl_dst=fa:16:3e:00:00:ee") {
				return true
			}
		}
		return false
	}
	if has(st, "p1") || !has(st, "p2") {
		t.Fatalf("lowest ofport (p2) must win: p1=%v p2=%v", has(st, "p1"), has(st, "p2"))
	}
	// A third port whose own MAC it is takes it; both losers' owners change.
	next := cloneState(st)
	p3 := p1
	p3.ID, p3.OFPort, p3.MAC, p3.AllowedAddressPairs = "p3", 9, vip, nil
	next.Ports["p3"] = p3
	if has(next, "p2") || !has(next, "p3") {
		t.Fatal("own MAC must win")
	}
	_, changed := Update(st, next, ids)
	if !reflect.DeepEqual(changed, []string{OwnerPort("p2"), OwnerPort("p3")}) {
		t.Fatalf("changed %v", changed)
	}
	seen := map[string]string{}
	for o, fs := range Compute(next, ids) {
		for _, f := range fs {
			if prev, dup := seen[f.Key()]; dup {
				t.Errorf("%s in %s and %s", f.Key(), prev, o)
			}
			seen[f.Key()] = o
		}
	}
}
