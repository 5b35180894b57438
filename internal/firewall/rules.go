package firewall

import (
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// nrule is a rule normalised for flow generation.
type nrule struct {
	dir      Direction
	et       EtherType
	proto    uint8
	hasProto bool
	min, max *int
	prefix   netip.Prefix // valid only when it restricts (not /0)
	remote   RemoteRef    // zero for plain rules
}

// RemoteRef names the remote side of a rule: a security group or an address group.
type RemoteRef struct {
	AddressGroup bool
	ID           string
}

func (r RemoteRef) isSet() bool { return r.ID != "" }

func (r nrule) key() string {
	s := r.dir.String() + "|" + r.et.String() + "|"
	if r.hasProto {
		s += strconv.Itoa(int(r.proto))
	}
	s += "|" + optInt(r.min) + "|" + optInt(r.max) + "|"
	if r.prefix.IsValid() {
		s += r.prefix.String()
	}
	if r.remote.isSet() {
		s += "|" + strconv.FormatBool(r.remote.AddressGroup) + r.remote.ID
	}
	return s
}

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// normalise turns an OVO rule into an nrule; ok false drops the rule (bad
// input is not the whole port's problem; checkRule says why, and Problems
// reports it).
func normalise(r Rule) (nrule, bool) {
	if reason, _ := checkRule(r); reason != "" {
		return nrule{}, false
	}
	n := nrule{dir: r.Direction, et: r.EtherType, min: r.PortRangeMin, max: r.PortRangeMax}
	num, has, _ := protocolNumber(r.Protocol, r.EtherType)
	n.proto, n.hasProto = num, has
	if r.RemoteIPPrefix.IsValid() {
		if p := r.RemoteIPPrefix.Masked(); p.Bits() > 0 {
			n.prefix = p
		}
	}
	switch {
	case r.RemoteGroupID != "":
		n.remote = RemoteRef{ID: r.RemoteGroupID}
	case r.RemoteAddressGroupID != "":
		n.remote = RemoteRef{AddressGroup: true, ID: r.RemoteAddressGroupID}
	}
	return n, true
}

// portRules are the port's rules from all its groups, normalised and
// de-duplicated (the server's SG info holds each distinct rule once), in
// group order then rule order.
func portRules(p Port, groups map[string]SecurityGroup) (plain, remote []nrule) {
	seen := map[string]bool{}
	for _, gid := range p.SecurityGroupIDs {
		g, ok := groups[gid]
		if !ok {
			continue
		}
		for _, r := range g.Rules {
			n, ok := normalise(r)
			if !ok {
				continue
			}
			k := n.key()
			if seen[k] {
				continue
			}
			seen[k] = true
			if n.remote.isSet() {
				remote = append(remote, n)
			} else {
				plain = append(plain, n)
			}
		}
	}
	return plain, remote
}

func isICMP(proto uint8) bool { return proto == of.IPProtoICMP || proto == of.IPProtoICMPv6 }

func hasPorts(proto uint8) bool {
	return proto == of.IPProtoTCP || proto == of.IPProtoUDP || proto == of.IPProtoSCTP
}

// priorityOffset is the reference's flow_priority_offset without the
// conjunction base: 0 any protocol, 1 ICMP without type, 2 ICMP with type
// but no code, 3 everything else.
func priorityOffset(r nrule) uint16 {
	if !r.hasProto {
		return 0
	}
	if isICMP(r.proto) {
		if r.min == nil {
			return 1
		}
		if r.max == nil {
			return 2
		}
	}
	return 3
}

// matchTemplate is dl_type, reg5, the remote prefix and nw_proto.
func matchTemplate(r nrule, ofport uint32) of.Match {
	m := of.Match{of.EthType(ethTypeOf(r.et)), regPort(ofport)}
	if r.prefix.IsValid() {
		var f of.MatchField
		if r.dir == Egress {
			f, _ = dstIP(r.prefix)
		} else {
			f, _ = srcIP(r.prefix)
		}
		m = append(m, f)
	}
	if r.hasProto {
		m = append(m, of.IPProto(r.proto))
	}
	return m
}

func portField(proto uint8, pm PortMask) of.MatchField {
	switch proto {
	case of.IPProtoTCP:
		return of.TCPDst(pm.Value, pm.Mask)
	case of.IPProtoUDP:
		return of.UDPDst(pm.Value, pm.Mask)
	}
	return of.MatchField{Field: of.FieldSCTPDst, Value: uint64(pm.Value), Mask: uint64(pm.Mask), HasMask: pm.Mask != 0xffff}
}

// l4Matches expands a rule's ports or ICMP type/code: one match suffix per
// flow (a single empty suffix when the rule does not restrict them).
func l4Matches(r nrule, min, max *int) [][]of.MatchField {
	if !r.hasProto {
		return [][]of.MatchField{nil}
	}
	if isICMP(r.proto) {
		if min == nil {
			return [][]of.MatchField{nil}
		}
		// checkRule refuses these; no flow is the fail-closed answer.
		if *min < 0 || *min > 255 || (max != nil && (*max < 0 || *max > 255)) {
			return nil
		}
		typ, code := of.ICMPType, of.ICMPCode
		if r.proto == of.IPProtoICMPv6 {
			typ, code = of.ICMP6Type, of.ICMP6Code
		}
		m := []of.MatchField{typ(uint8(*min))}
		if max != nil {
			m = append(m, code(uint8(*max)))
		}
		return [][]of.MatchField{m}
	}
	// The reference needs both bounds, and non-zero, to match on ports.
	if !hasPorts(r.proto) || min == nil || max == nil || *min == 0 || *max == 0 {
		return [][]of.MatchField{nil}
	}
	// checkRule refuses these: a bound that does not fit 16 bits must not
	// become "all ports" nor wrap.
	if *min < 0 || *max < 0 || *min > 65535 || *max > 65535 || *min > *max {
		return nil
	}
	var out [][]of.MatchField
	for _, pm := range PortRangeMasks(uint16(*min), uint16(*max)) {
		if pm.Mask == 0 {
			return [][]of.MatchField{nil}
		}
		out = append(out, []of.MatchField{portField(r.proto, pm)})
	}
	return out
}

// acceptActions is what a matching rule does: egress goes on to 73 (which
// commits); ingress outputs, and a new connection is committed first and
// also copied to 92.
func acceptActions(dir Direction, ofport uint32, newConn bool) []of.Action {
	if dir == Egress {
		return []of.Action{resubmit(TableAcceptOrIngress)}
	}
	if newConn {
		return []of.Action{ctCommitted, of.Output{Port: ofport}, resubmit(TableAcceptedIngressTraffic)}
	}
	return []of.Action{of.Output{Port: ofport}}
}

func rulesTable(d Direction) uint8 {
	if d == Egress {
		return TableRulesEgress
	}
	return TableRulesIngress
}

// plainRuleFlows: priority 74..77, both conntrack variants (or one untracked
// flow for a stateless port).
func plainRuleFlows(b *flowSet, v portView, r nrule) {
	prio := 70 + 4 + priorityOffset(r)
	for _, l4 := range l4Matches(r, r.min, r.max) {
		m := append(matchTemplate(r, v.OFPort), l4...)
		if v.stateless {
			b.add(flow(rulesTable(r.dir), prio, m, acceptActions(r.dir, v.OFPort, false)...))
			continue
		}
		for i, st := range ctAcceptVariants {
			mm := append(of.Match{st}, m...)
			b.add(flow(rulesTable(r.dir), prio, mm, acceptActions(r.dir, v.OFPort, i == 1)...))
		}
	}
}

func ruleFlows(b *flowSet, v portView, rs *ruleSet, ids ConjIDs) {
	for _, r := range rs.plain {
		plainRuleFlows(b, v, r)
	}
	conjPortFlows(b, v, rs.remote, ids)
}

// ruleSet is what a list of groups gives a port: its rules, whether it is
// stateless, the conjunction keys of its remote rules.
type ruleSet struct {
	plain, remote []nrule
	stateless     bool
	conjKeys      []ConjKey
}

// rulesIndex memoises ruleSets by group list: ports in the same groups
// (the common case) share one normalisation.
type rulesIndex struct {
	groups map[string]SecurityGroup
	memo   map[string]*ruleSet
	ports  map[string]Port
	macs   map[string]string // (VLAN, MAC) -> winning port id, built on first use
}

// macWinner reports whether port p gets the table-73 entry for mac.
func (x *rulesIndex) macWinner(p Port, mac net.HardwareAddr) bool {
	if x.macs == nil {
		x.macs = macWinners(x.ports)
	}
	w, ok := x.macs[macKey(p.VLAN, mac)]
	return !ok || w == p.ID
}

func newRulesIndex(st *State) *rulesIndex {
	return &rulesIndex{groups: st.Groups, ports: st.Ports, memo: map[string]*ruleSet{}}
}

func (x *rulesIndex) forPort(p Port) *ruleSet {
	k := strings.Join(p.SecurityGroupIDs, "\x00")
	if rs, ok := x.memo[k]; ok {
		return rs
	}
	rs := &ruleSet{stateless: portStateless(p, x.groups)}
	rs.plain, rs.remote = portRules(p, x.groups)
	for _, r := range rs.remote {
		ck := ConjKey{Remote: r.remote, Direction: r.dir, EtherType: r.et, Stateless: rs.stateless}
		dup := false
		for _, y := range rs.conjKeys {
			if y == ck {
				dup = true
				break
			}
		}
		if !dup {
			rs.conjKeys = append(rs.conjKeys, ck)
		}
	}
	x.memo[k] = rs
	return rs
}

// rangeIDs is one port range (or ICMP type/code) and the conjunction ids
// whose rules cover it.
type rangeIDs struct {
	min, max *int
	ids      []uint32
}

// conjPortFlows is the port half of remote group rules: the rule's
// protocol/ports on reg5 as clause 2/2 of its conjunction, and the accept
// flows on conj_id. Rules sharing (direction, ethertype, protocol) are
// merged so that no two clause flows overlap: port ranges are cut into
// disjoint pieces each carrying every id that covers it.
func conjPortFlows(b *flowSet, v portView, remote []nrule, ids ConjIDs) {
	type gkey struct {
		dir      Direction
		et       EtherType
		proto    uint8
		hasProto bool
	}
	type item struct {
		r  nrule
		id uint32
	}
	groups := map[gkey][]item{}
	var order []gkey
	allIDs := map[uint32]nrule{}
	for _, r := range remote {
		base, ok := ids.IDs[ConjKey{Remote: r.remote, Direction: r.dir, EtherType: r.et, Stateless: v.stateless}]
		if !ok {
			continue
		}
		id := base + 2*uint32(priorityOffset(r))
		k := gkey{r.dir, r.et, r.proto, r.hasProto}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], item{r, id})
		allIDs[id] = r
	}
	for _, k := range order {
		items := groups[k]
		tmpl := items[0].r
		var pieces []rangeIDs
		if tmpl.hasProto && hasPorts(tmpl.proto) {
			var spans []span
			for _, it := range items {
				lo, hi := 1, 65535
				if it.r.min != nil && it.r.max != nil && *it.r.min > 0 && *it.r.max > 0 {
					lo, hi = *it.r.min, *it.r.max
				}
				spans = append(spans, span{lo, hi, it.id})
			}
			for _, s := range splitSpans(spans) {
				lo, hi := s.lo, s.hi
				pieces = append(pieces, rangeIDs{&lo, &hi, s.ids})
			}
			if len(pieces) == 1 && *pieces[0].min == 1 && *pieces[0].max == 65535 {
				pieces[0].min, pieces[0].max = nil, nil
			}
		} else {
			byRange := map[string]int{}
			for _, it := range items {
				rk := optInt(it.r.min) + "|" + optInt(it.r.max)
				i, ok := byRange[rk]
				if !ok {
					i = len(pieces)
					byRange[rk] = i
					pieces = append(pieces, rangeIDs{min: it.r.min, max: it.r.max})
				}
				pieces[i].ids = appendUnique(pieces[i].ids, it.id)
			}
		}
		for _, pc := range pieces {
			r := tmpl
			r.min, r.max = pc.min, pc.max
			sort.Slice(pc.ids, func(i, j int) bool { return pc.ids[i] < pc.ids[j] })
			prio := 70 + priorityOffset(r)
			for _, l4 := range l4Matches(r, r.min, r.max) {
				m := append(matchTemplate(r, v.OFPort), l4...)
				if v.stateless {
					b.add(flow(rulesTable(r.dir), prio, m, conjActions(pc.ids, 0, 2)...))
					continue
				}
				for i, st := range ctAcceptVariants {
					b.add(flow(rulesTable(r.dir), prio, append(of.Match{st}, m...), conjActions(pc.ids, uint32(i), 2)...))
				}
			}
		}
	}
	// Accept flows, one per conjunction id (and id+1 for new connections).
	var idList []uint32
	for id := range allIDs {
		idList = append(idList, id)
	}
	sort.Slice(idList, func(i, j int) bool { return idList[i] < idList[j] })
	for _, id := range idList {
		r := allIDs[id]
		prio := 70 + uint16(id%8/2)
		base := of.Match{of.EthType(ethTypeOf(r.et)), regPort(v.OFPort)}
		if v.stateless {
			b.add(flow(rulesTable(r.dir), prio, append(of.Match{of.ConjID(id)}, base...),
				append([]of.Action{of.SetReg(RegRemoteGroup, id)}, acceptActions(r.dir, v.OFPort, false)...)...))
			continue
		}
		for i, st := range ctAcceptVariants {
			cid := id + uint32(i)
			b.add(flow(rulesTable(r.dir), prio, append(of.Match{of.ConjID(cid), st}, base...),
				append([]of.Action{of.SetReg(RegRemoteGroup, cid)}, acceptActions(r.dir, v.OFPort, i == 1)...)...))
		}
	}
}

func conjActions(ids []uint32, plus uint32, clause uint8) []of.Action {
	out := make([]of.Action, 0, len(ids))
	for _, id := range ids {
		out = append(out, of.Conjunction{ID: id + plus, Clause: clause, NClauses: 2})
	}
	return out
}

func appendUnique(s []uint32, v uint32) []uint32 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// span is a port range carrying a conjunction id; splitSpans cuts
// overlapping spans into disjoint pieces with the union of their ids,
// joining neighbours with the same id set.
type span struct {
	lo, hi int
	id     uint32
}

type piece struct {
	lo, hi int
	ids    []uint32
}

func splitSpans(spans []span) []piece {
	bounds := map[int]bool{}
	for _, s := range spans {
		bounds[s.lo] = true
		bounds[s.hi+1] = true
	}
	var bs []int
	for x := range bounds {
		bs = append(bs, x)
	}
	sort.Ints(bs)
	var out []piece
	for i := 0; i+1 < len(bs); i++ {
		lo, hi := bs[i], bs[i+1]-1
		var ids []uint32
		for _, s := range spans {
			if s.lo <= lo && hi <= s.hi {
				ids = appendUnique(ids, s.id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		if n := len(out); n > 0 && out[n-1].hi+1 == lo && equalIDs(out[n-1].ids, ids) {
			out[n-1].hi = hi
			continue
		}
		out = append(out, piece{lo, hi, ids})
	}
	return out
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
