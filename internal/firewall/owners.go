package firewall

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Owners lists every owner key the state has: the base, each port, each VLAN
// with address flows. Sorted, base first.
func Owners(st *State, ids ConjIDs) []string {
	out := []string{OwnerBase}
	var ports []string
	for id := range st.Ports {
		ports = append(ports, OwnerPort(id))
	}
	sort.Strings(ports)
	out = append(out, ports...)
	for _, v := range ConjVLANs(st, ids) {
		out = append(out, OwnerConj(v))
	}
	return out
}

// Compute returns the flows of every owner.
func Compute(st *State, ids ConjIDs) map[string][]of.Flow {
	out := map[string][]of.Flow{OwnerBase: BaseFlows(st.Config)}
	idx := newRulesIndex(st)
	for id, p := range st.Ports {
		out[OwnerPort(id)] = portFlows(st, p, ids, idx)
	}
	for v, keys := range conjVLANs(st, ids, idx) {
		out[OwnerConj(v)] = conjFlowsFor(st, v, keys)
	}
	return out
}

// FlowsFor computes one owner's flows. An owner the state no longer has
// yields no flows (the reconciler then removes what it installed for it).
func FlowsFor(st *State, ids ConjIDs, owner string) ([]of.Flow, error) {
	kind, id, ok := ParseOwner(owner)
	if !ok {
		return nil, fmt.Errorf("firewall: unknown owner %q", owner)
	}
	switch kind {
	case "base":
		return BaseFlows(st.Config), nil
	case "port":
		p, ok := st.Ports[id]
		if !ok {
			return nil, nil
		}
		return PortFlows(st, p, ids), nil
	default:
		v, err := strconv.ParseUint(id, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("firewall: bad owner %q: %w", owner, err)
		}
		return ConjFlows(st, ids, uint16(v)), nil
	}
}

// FlowsForOwners is FlowsFor for many owners of one state at once. The
// per-state rules index (which port wins each MAC, over every port) is built
// once: FlowsFor per port owner rebuilt it each time, O(ports²) per batch,
// which dominated the first batch after a start at scale.
func FlowsForOwners(st *State, ids ConjIDs, owners []string) (map[string][]of.Flow, map[string]error) {
	out := make(map[string][]of.Flow, len(owners))
	errs := map[string]error{}
	idx := newRulesIndex(st)
	for _, owner := range owners {
		kind, id, ok := ParseOwner(owner)
		if ok && kind == "port" {
			if p, found := st.Ports[id]; found {
				out[owner] = portFlows(st, p, ids, idx)
			} else {
				out[owner] = nil
			}
			continue
		}
		fs, err := FlowsFor(st, ids, owner)
		if err != nil {
			errs[owner] = err
			continue
		}
		out[owner] = fs
	}
	return out, errs
}

// Update assigns conjunction ids for next (keeping prevIDs' where still
// needed) and names the owners whose flows differ between (prev, prevIDs)
// and (next, ids): recompute and install exactly those, each as one batch.
func Update(prev, next *State, prevIDs ConjIDs) (ids ConjIDs, changed []string) {
	ids = AssignConjIDs(prevIDs, NeededConjKeys(next))
	return ids, ChangedOwners(prev, next, prevIDs, ids)
}

// ChangedOwners names the owners whose flows may differ between the two
// inputs, from what each owner depends on rather than by computing flows:
//
//   - a port's owner: the port itself, the groups it is in (rules,
//     statefulness), the conjunction ids of its remote rules;
//   - a VLAN's conjunction owner: which ids its ports use for which remotes,
//     and the member addresses of those remotes;
//   - the base and everything else: the config.
//
// So a rule change dirties the ports of that group (and the conjunction
// owners of their VLANs if it touches a remote group rule); a membership
// change dirties only the conjunction owners of the VLANs whose ports
// reference that group — never the ports (unlike the reference, which
// re-filters every port of every referencing group).
// Owners that exist in only one of the inputs are included (added or removed).
func ChangedOwners(prev, next *State, prevIDs, nextIDs ConjIDs) []string {
	if prev == nil {
		prev = &State{}
	}
	set := map[string]bool{}
	if !reflect.DeepEqual(prev.Config, next.Config) {
		for _, o := range Owners(prev, prevIDs) {
			set[o] = true
		}
		for _, o := range Owners(next, nextIDs) {
			set[o] = true
		}
		return sortedOwners(set)
	}
	nidx := newRulesIndex(next)
	groupChanged := map[string]bool{}
	for id, g := range next.Groups {
		og, ok := prev.Groups[id]
		groupChanged[id] = !ok || !reflect.DeepEqual(og, g)
	}
	for id := range prev.Groups {
		if _, ok := next.Groups[id]; !ok {
			groupChanged[id] = true
		}
	}
	for id, np := range next.Ports {
		pp, ok := prev.Ports[id]
		if !ok || portChanged(groupChanged, nidx, pp, np, prevIDs, nextIDs) {
			set[OwnerPort(id)] = true
		}
	}
	for id := range prev.Ports {
		if _, ok := next.Ports[id]; !ok {
			set[OwnerPort(id)] = true
		}
	}
	// A shared MAC moving between claimants changes both ports' table 73.
	pw, nw := macWinners(prev.Ports), macWinners(next.Ports)
	for k, w := range nw {
		if pw[k] != w {
			set[OwnerPort(w)] = true
			if old, ok := pw[k]; ok {
				set[OwnerPort(old)] = true
			}
		}
	}
	for k, w := range pw {
		if _, ok := nw[k]; !ok {
			set[OwnerPort(w)] = true
		}
	}
	for o := range set {
		if _, id, _ := ParseOwner(o); id != "" {
			if _, inPrev := prev.Ports[id]; !inPrev {
				if _, inNext := next.Ports[id]; !inNext {
					delete(set, o)
				}
			}
		}
	}
	pv, nv := conjVLANs(prev, prevIDs, newRulesIndex(prev)), conjVLANs(next, nextIDs, nidx)
	for v, nk := range nv {
		pk, ok := pv[v]
		if !ok || !reflect.DeepEqual(pk, nk) {
			set[OwnerConj(v)] = true
			continue
		}
		for k := range nk {
			if !reflect.DeepEqual(prev.Members[k.Remote.ID], next.Members[k.Remote.ID]) {
				set[OwnerConj(v)] = true
				break
			}
		}
	}
	for v := range pv {
		if _, ok := nv[v]; !ok {
			set[OwnerConj(v)] = true
		}
	}
	return sortedOwners(set)
}

func portChanged(groupChanged map[string]bool, nidx *rulesIndex, pp, np Port, prevIDs, nextIDs ConjIDs) bool {
	if !reflect.DeepEqual(pp, np) {
		return true
	}
	if !np.PortSecurity {
		return false
	}
	for _, g := range np.SecurityGroupIDs {
		if ch, known := groupChanged[g]; ch || !known {
			if !known {
				continue // in neither state: nothing changed
			}
			return true
		}
	}
	for _, k := range portConjKeys(np, nidx) {
		a, ok1 := prevIDs.IDs[k]
		b, ok2 := nextIDs.IDs[k]
		if ok1 != ok2 || a != b {
			return true
		}
	}
	return false
}

func sortedOwners(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for o := range set {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}
