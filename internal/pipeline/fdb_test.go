package pipeline

import (
	"net/netip"
	"testing"
)

// l2pop's FDB of one network as the agent keeps it: the flooding entry and
// unicast entries per remote agent, a remote dropped with its flooding
// entry (what is left of its unicast entries is stale) or when nothing is
// left, unreadable pairs counted, chg_ip replacing an entry.
func TestApplyRemote(t *testing.T) {
	m := map[netip.Addr]*RemoteFDB{}
	r1 := netip.MustParseAddr("192.0.2.2")
	flood := [2]string{FloodMAC, "0.0.0.0"}
	if bad := ApplyRemote(m, r1, [][2]string{flood, {"fa:16:3e:00:00:01", "10.0.0.1"}, {"zz", "10.0.0.2"}, {"fa:16:3e:00:00:03", "x"}}, true); bad != 2 {
		t.Errorf("unreadable pairs: %d, want 2", bad)
	}
	if r := m[r1]; r == nil || !r.Flood || len(r.Entries) != 1 || r.Entries[0].IP != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("after add: %+v", m[r1])
	}
	// the same entry twice is kept once
	ApplyRemote(m, r1, [][2]string{{"fa:16:3e:00:00:01", "10.0.0.1"}}, true)
	if len(m[r1].Entries) != 1 {
		t.Errorf("duplicate entry: %+v", m[r1].Entries)
	}
	ChangeRemote(m, r1, [][2]string{{"fa:16:3e:00:00:01", "10.0.0.1"}}, [][2]string{{"fa:16:3e:00:00:01", "10.0.0.7"}})
	if len(m[r1].Entries) != 1 || m[r1].Entries[0].IP != netip.MustParseAddr("10.0.0.7") {
		t.Errorf("chg_ip: %+v", m[r1].Entries)
	}
	// the flooding entry goes: the remote goes, unicast entries and all
	ApplyRemote(m, r1, [][2]string{flood}, false)
	if _, ok := m[r1]; ok {
		t.Fatalf("remote kept without its flooding entry: %+v", m[r1])
	}
	// a remove for an unknown remote creates nothing
	ApplyRemote(m, r1, [][2]string{{"fa:16:3e:00:00:01", "10.0.0.7"}}, false)
	if len(m) != 0 {
		t.Errorf("remove created a remote: %+v", m)
	}
	// unicast only, then removed: nothing left, remote dropped
	ApplyRemote(m, r1, [][2]string{{"fa:16:3e:00:00:05", "10.0.0.5"}}, true)
	ApplyRemote(m, r1, [][2]string{{"fa:16:3e:00:00:05", "10.0.0.5"}}, false)
	if len(m) != 0 {
		t.Errorf("empty remote kept: %+v", m)
	}
}

// With l2pop, br-tun needs one tunnel port per remote agent and type of the
// tunnelled networks' FDB; a VLAN network's FDB asks for none.
func TestWantedTunnels(t *testing.T) {
	s := NewState(Config{})
	vx := NetKey{NetworkID: "n1", SegID: 7, HasSeg: true}
	vl := NetKey{NetworkID: "n2", SegID: 100, HasSeg: true}
	s.Networks[vx] = &Network{Key: vx, Type: TypeVXLAN}
	s.Networks[vl] = &Network{Key: vl, Type: TypeVLAN}
	a, b := netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	fdb := map[string]map[netip.Addr]*RemoteFDB{"n1": {a: {Flood: true}}, "n2": {b: {Flood: true}}}
	got := WantedTunnels(s, fdb)
	if len(got) != 1 || !got[TunnelKey{IP: a, Type: TypeVXLAN}] {
		t.Errorf("wanted tunnels: %v", got)
	}
}
