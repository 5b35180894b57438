package firewall

import (
	"net"
	"net/netip"
	"sort"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// ConjKey is what a conjunction id block is allocated for: one remote group
// or address group, seen in one direction and ethertype. (The reference also
// keys on the rule's own group; sharing the block across groups that
// reference the same remote is equivalent, because the port half of the
// conjunction matches reg5, and it needs fewer address flows.) Stateless
// ports get their own block: their address flows carry no ct_state.
type ConjKey struct {
	Remote    RemoteRef
	Direction Direction
	EtherType EtherType
	Stateless bool
}

func (k ConjKey) less(o ConjKey) bool {
	if k.Remote.ID != o.Remote.ID {
		return k.Remote.ID < o.Remote.ID
	}
	if k.Remote.AddressGroup != o.Remote.AddressGroup {
		return !k.Remote.AddressGroup
	}
	if k.Direction != o.Direction {
		return k.Direction < o.Direction
	}
	if k.EtherType != o.EtherType {
		return k.EtherType < o.EtherType
	}
	return !k.Stateless && o.Stateless
}

// Conjunction id blocks: each key owns 8 ids, base divisible by 8; the rule
// class (priority offset 0..3) picks base+2*offset, and +1 is the variant for
// new connections. The first block is 16, as in the reference on a fresh
// bridge (its allocator starts one block above the max id found, 0).
const (
	conjBlock    = 8
	conjFirst    = 16
	conjMaxBlock = 1<<32 - conjBlock
)

// ConjIDs is the conjunction id assignment. It is a value: AssignConjIDs
// returns a new one. Reserved holds blocks seen in installed flows that no
// key claims yet (after an agent restart); they are never handed out, so a
// new key cannot collide with a flow that is still installed.
type ConjIDs struct {
	IDs      map[ConjKey]uint32
	Reserved map[uint32]bool
}

// NeededConjKeys lists the keys the state's filtered ports use, sorted.
func NeededConjKeys(st *State) []ConjKey {
	set := map[ConjKey]bool{}
	idx := newRulesIndex(st)
	for _, p := range st.Ports {
		for _, k := range portConjKeys(p, idx) {
			set[k] = true
		}
	}
	out := make([]ConjKey, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

func portConjKeys(p Port, idx *rulesIndex) []ConjKey {
	if !p.PortSecurity {
		return nil
	}
	return idx.forPort(p).conjKeys
}

// AssignConjIDs keeps prev's id for every key still needed, drops the others
// and gives each new key the lowest free block. A block freed in this call is
// not reused in the same call: flows of owners not recomputed together with
// this assignment might still name it.
func AssignConjIDs(prev ConjIDs, needed []ConjKey) ConjIDs {
	next := ConjIDs{IDs: make(map[ConjKey]uint32, len(needed))}
	taken := map[uint32]bool{}
	for _, id := range prev.IDs {
		taken[id] = true
	}
	for id := range prev.Reserved {
		taken[id] = true
	}
	var fresh []ConjKey
	for _, k := range needed {
		if id, ok := prev.IDs[k]; ok {
			next.IDs[k] = id
		} else {
			fresh = append(fresh, k)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].less(fresh[j]) })
	cand := uint32(conjFirst)
	for _, k := range fresh {
		for taken[cand] && cand < conjMaxBlock {
			cand += conjBlock
		}
		next.IDs[k] = cand
		taken[cand] = true
	}
	if len(prev.Reserved) > 0 {
		next.Reserved = map[uint32]bool{}
		for id := range prev.Reserved {
			next.Reserved[id] = true
		}
		for _, id := range next.IDs {
			delete(next.Reserved, id)
		}
	}
	return next
}

// ReleaseReserved forgets the reserved blocks: call it once the installed
// flows are the computed ones (after the first full sync since restart).
func (c ConjIDs) ReleaseReserved() ConjIDs {
	return ConjIDs{IDs: c.IDs}
}

// RecoverConjIDs rebuilds the assignment after a restart from the flows
// installed in the firewall tables, so that the new computation reproduces
// them (no flow churn) wherever that is unambiguous, and never collides with
// them otherwise. An accept flow "conj_id=X, reg5=P, dl_type" in 72/82 tells
// direction, ethertype and port; if the state gives that port exactly one
// key for that direction and ethertype, the key gets X's block. Every other
// block seen in installed flows is reserved.
func RecoverConjIDs(installed []of.Flow, st *State) ConjIDs {
	type pde struct {
		ofport uint32
		dir    Direction
		et     EtherType
	}
	seenBlocks := map[uint32]bool{}
	hints := map[pde]map[uint32]bool{}
	for _, f := range installed {
		var conj, port uint32
		var hasConj, hasPort bool
		var eth uint16
		for _, m := range f.Match {
			switch {
			case m.Field == of.FieldConjID:
				conj, hasConj = uint32(m.Value), true
			case m.Field == of.FieldReg && m.Reg == RegPort:
				port, hasPort = uint32(m.Value), true
			case m.Field == of.FieldEthType:
				eth = uint16(m.Value)
			}
		}
		for _, a := range f.Actions {
			if c, ok := a.(of.Conjunction); ok {
				seenBlocks[c.ID-c.ID%conjBlock] = true
			}
		}
		if !hasConj {
			continue
		}
		block := conj - conj%conjBlock
		seenBlocks[block] = true
		if !hasPort || (f.Table != TableRulesEgress && f.Table != TableRulesIngress) {
			continue
		}
		k := pde{ofport: port, dir: Ingress, et: IPv4}
		if f.Table == TableRulesEgress {
			k.dir = Egress
		}
		if eth == of.EthTypeIPv6 {
			k.et = IPv6
		}
		if hints[k] == nil {
			hints[k] = map[uint32]bool{}
		}
		hints[k][block] = true
	}
	claims := map[ConjKey]map[uint32]bool{}
	idx := newRulesIndex(st)
	for _, p := range st.Ports {
		keys := portConjKeys(p, idx)
		for _, k := range keys {
			n := 0
			for _, o := range keys {
				if o.Direction == k.Direction && o.EtherType == k.EtherType {
					n++
				}
			}
			blocks := hints[pde{p.OFPort, k.Direction, k.EtherType}]
			if n != 1 || len(blocks) != 1 {
				continue
			}
			if claims[k] == nil {
				claims[k] = map[uint32]bool{}
			}
			for b := range blocks {
				claims[k][b] = true
			}
		}
	}
	out := ConjIDs{IDs: map[ConjKey]uint32{}, Reserved: map[uint32]bool{}}
	owner := map[uint32]int{}
	for _, bs := range claims {
		if len(bs) == 1 {
			for b := range bs {
				owner[b]++
			}
		}
	}
	for k, bs := range claims {
		if len(bs) != 1 {
			continue
		}
		for b := range bs {
			if owner[b] == 1 {
				out.IDs[k] = b
			}
		}
	}
	for b := range seenBlocks {
		out.Reserved[b] = true
	}
	for _, id := range out.IDs {
		delete(out.Reserved, id)
	}
	return out
}

// conjVLANs maps each local VLAN to the conjunction ids (base+2*offset) its
// filtered ports use, per key: the address flows of that VLAN carry exactly
// these.
func conjVLANs(st *State, ids ConjIDs, idx *rulesIndex) map[uint16]map[ConjKey]map[uint32]bool {
	out := map[uint16]map[ConjKey]map[uint32]bool{}
	for _, p := range st.Ports {
		if !p.PortSecurity {
			continue
		}
		rs := idx.forPort(p)
		for _, r := range rs.remote {
			k := ConjKey{Remote: r.remote, Direction: r.dir, EtherType: r.et, Stateless: rs.stateless}
			base, ok := ids.IDs[k]
			if !ok {
				continue
			}
			if out[p.VLAN] == nil {
				out[p.VLAN] = map[ConjKey]map[uint32]bool{}
			}
			if out[p.VLAN][k] == nil {
				out[p.VLAN][k] = map[uint32]bool{}
			}
			out[p.VLAN][k][base+2*uint32(priorityOffset(r))] = true
		}
	}
	return out
}

// ConjVLANs lists the VLANs that have address flows (OwnerConj), sorted.
func ConjVLANs(st *State, ids ConjIDs) []uint16 {
	m := conjVLANs(st, ids, newRulesIndex(st))
	out := make([]uint16, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ConjFlows is the address half of remote group rules on one VLAN (owner
// OwnerConj(vlan)): for every member address of every remote the VLAN's
// ports use, "reg6=L, address" as clause 1/2 of all the conjunctions whose
// remote contains it, one flow per priority, in both conntrack variants
// (one untracked flow for stateless keys).
func ConjFlows(st *State, ids ConjIDs, vlan uint16) []of.Flow {
	return conjFlowsFor(st, vlan, conjVLANs(st, ids, newRulesIndex(st))[vlan])
}

func conjFlowsFor(st *State, vlan uint16, keys map[ConjKey]map[uint32]bool) []of.Flow {
	type akey struct {
		dir       Direction
		et        EtherType
		stateless bool
		ip        netip.Prefix
		mac       string // only for a /0 member
	}
	addr := map[akey]map[uint32]bool{}
	for k, idset := range keys {
		for _, m := range st.Members[k.Remote.ID] {
			p, ok := memberPrefix(m, k.EtherType)
			if !ok {
				continue
			}
			a := akey{k.Direction, k.EtherType, k.Stateless, p, ""}
			if p.Bits() == 0 && len(m.MAC) > 0 {
				a.mac = m.MAC.String()
			}
			if addr[a] == nil {
				addr[a] = map[uint32]bool{}
			}
			for id := range idset {
				addr[a][id] = true
			}
		}
	}
	akeys := make([]akey, 0, len(addr))
	for a := range addr {
		akeys = append(akeys, a)
	}
	sort.Slice(akeys, func(i, j int) bool {
		a, b := akeys[i], akeys[j]
		if a.dir != b.dir {
			return a.dir < b.dir
		}
		if a.et != b.et {
			return a.et < b.et
		}
		if a.stateless != b.stateless {
			return !a.stateless
		}
		if c := a.ip.Addr().Compare(b.ip.Addr()); c != 0 {
			return c < 0
		}
		if a.ip.Bits() != b.ip.Bits() {
			return a.ip.Bits() < b.ip.Bits()
		}
		return a.mac < b.mac
	})
	b := &flowSet{}
	for _, a := range akeys {
		m := of.Match{of.EthType(ethTypeOf(a.et)), regNet(vlan)}
		var f of.MatchField
		var ok bool
		if a.dir == Egress {
			f, ok = dstIP(a.ip)
		} else {
			f, ok = srcIP(a.ip)
		}
		switch {
		case ok:
			m = append(m, f)
		case a.ip.Bits() != 0:
			// Only a /0 member may go without an address match.
			continue
		}
		if a.mac != "" {
			mac, err := net.ParseMAC(a.mac)
			if err == nil {
				m = append(m, of.EthSrc(mac))
			}
		}
		byOffset := [4][]uint32{}
		for id := range addr[a] {
			off := id % conjBlock / 2
			byOffset[off] = append(byOffset[off], id)
		}
		for off, idl := range byOffset {
			if len(idl) == 0 {
				continue
			}
			sort.Slice(idl, func(i, j int) bool { return idl[i] < idl[j] })
			prio := 70 + uint16(off)
			if a.stateless {
				b.add(flow(rulesTable(a.dir), prio, m, conjActions(idl, 0, 1)...))
				continue
			}
			for i, st := range ctAcceptVariants {
				b.add(flow(rulesTable(a.dir), prio, append(of.Match{st}, m...), conjActions(idl, uint32(i), 1)...))
			}
		}
	}
	return b.flows
}

func (k ConjKey) String() string {
	s := "sg:"
	if k.Remote.AddressGroup {
		s = "ag:"
	}
	s += k.Remote.ID + "/" + k.Direction.String() + "/" + k.EtherType.String()
	if k.Stateless {
		s += "/stateless"
	}
	return s
}
