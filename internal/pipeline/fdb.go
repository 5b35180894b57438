package pipeline

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
)

// FloodMAC is the MAC of l2population's FLOODING_ENTRY (00:00:00:00:00:00,
// 0.0.0.0): the remote agent floods the network's broadcasts.
const FloodMAC = "00:00:00:00:00:00"

// ApplyRemote applies one remote agent's [mac, ip] pairs of an
// add_fdb_entries (add) or remove_fdb_entries (!add) to a network's FDB m
// (remote agent IP → its entries). It returns how many pairs it could not
// read (skipped). A remote left without its flooding entry, or with no
// entry at all, is dropped: l2pop removes the flooding entry when the
// remote's last port on the network goes, and what is left of its unicast
// entries is stale (neutron-server can send a port's fdb_add after its
// fdb_remove when the port is deleted while going up); it must not keep the
// tunnel port alive. The reference also keys the tunnel on it.
func ApplyRemote(m map[netip.Addr]*RemoteFDB, ip netip.Addr, pairs [][2]string, add bool) (bad int) {
	r := m[ip]
	if r == nil {
		if !add {
			return 0
		}
		r = &RemoteFDB{}
		m[ip] = r
	}
	left := false // the remote's flooding entry is removed
	for _, pair := range pairs {
		if pair[0] == FloodMAC {
			r.Flood = add
			left = !add
			continue
		}
		e, ok := fdbEntry(pair)
		if !ok {
			bad++
			continue
		}
		r.Entries = fdbSet(r.Entries, e, add)
	}
	if left || !r.Flood && len(r.Entries) == 0 {
		delete(m, ip)
	}
	return bad
}

// ChangeRemote applies one remote agent's update_fdb_entries chg_ip (the
// ARP responder entries before and after) to a network's FDB m. Unreadable
// pairs are skipped; an unknown remote is left alone.
func ChangeRemote(m map[netip.Addr]*RemoteFDB, ip netip.Addr, before, after [][2]string) {
	r := m[ip]
	if r == nil {
		return
	}
	for _, pair := range before {
		if e, ok := fdbEntry(pair); ok {
			r.Entries = fdbSet(r.Entries, e, false)
		}
	}
	for _, pair := range after {
		if e, ok := fdbEntry(pair); ok {
			r.Entries = fdbSet(r.Entries, e, true)
		}
	}
}

// WantedTunnels are the tunnel ports br-tun needs with l2pop: one per
// remote agent IP and network type in the FDB (by network id) of the local
// tunnelled networks of s, as neutron names them (vxlan-X, gre-X).
func WantedTunnels(s *State, fdb map[string]map[netip.Addr]*RemoteFDB) map[TunnelKey]bool {
	want := map[TunnelKey]bool{}
	for k, n := range s.Networks {
		if !n.Type.IsTunnel() {
			continue
		}
		for ip := range fdb[k.NetworkID] {
			want[TunnelKey{IP: ip, Type: n.Type}] = true
		}
	}
	return want
}

func fdbEntry(pair [2]string) (FDBEntry, bool) {
	mac, err := net.ParseMAC(pair[0])
	if err != nil {
		return FDBEntry{}, false
	}
	e := FDBEntry{MAC: mac}
	if pair[1] != "" {
		ip, err := netip.ParseAddr(pair[1])
		if err != nil {
			return FDBEntry{}, false
		}
		e.IP = ip
	}
	return e, true
}

func fdbSet(list []FDBEntry, e FDBEntry, add bool) []FDBEntry {
	i := slices.IndexFunc(list, func(x FDBEntry) bool { return bytes.Equal(x.MAC, e.MAC) && x.IP == e.IP })
	switch {
	case add && i < 0:
		return append(list, e)
	case !add && i >= 0:
		return slices.Delete(list, i, i+1)
	}
	return list
}
