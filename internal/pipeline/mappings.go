package pipeline

import "sort"

// Mappings are the host's local VLAN mappings as the agent's port lifecycle
// decides them: which ports are on each (network, segment), its local VLAN
// (a VLANManager, fed at start with the tags found in OVSDB) and its
// Network in the State. A mapping is created with its first port and
// released, VLAN and all, once it has none left. Plain state, no I/O; the
// caller marks the owners dirty (a new or released mapping's net: owner).
type Mappings struct {
	s     *State
	vlans *VLANManager
	ports map[NetKey]map[string]bool
}

// NewMappings keeps the mappings of s (its Networks).
func NewMappings(s *State) *Mappings {
	return &Mappings{s: s, vlans: NewVLANManager(), ports: map[NetKey]map[string]bool{}}
}

// Adopt reserves the VLANs of the ports an earlier run left (VLANManager.Adopt).
func (m *Mappings) Adopt(existing []ExistingTag) []string { return m.vlans.Adopt(existing) }

// DisposeHints forgets the adopted VLANs no mapping claimed (after the first sync).
func (m *Mappings) DisposeHints() { m.vlans.DisposeHints() }

// Allocate returns the mapping's local VLAN, allocating one for a new mapping.
func (m *Mappings) Allocate(key NetKey) (uint16, error) { return m.vlans.Allocate(key) }

// VLAN is the mapping's local VLAN (ok false: none allocated).
func (m *Mappings) VLAN(key NetKey) (uint16, bool) { return m.vlans.Get(key) }

// Ports is how many ports are on the mapping.
func (m *Mappings) Ports(key NetKey) int { return len(m.ports[key]) }

// Join puts the port on the mapping of key. A mapping new to the state gets
// its Network (type, physical network, local VLAN); created says so.
func (m *Mappings) Join(port string, key NetKey, typ NetworkType, physnet string, vlan uint16) (created bool) {
	set := m.ports[key]
	if set == nil {
		set = map[string]bool{}
		m.ports[key] = set
	}
	set[port] = true
	if m.s.Networks[key] != nil {
		return false
	}
	m.s.Networks[key] = &Network{Key: key, Type: typ, PhysicalNetwork: physnet, LocalVLAN: vlan}
	return true
}

// Leave takes the port off the mapping of key (the mapping stays until
// ReleaseIdle).
func (m *Mappings) Leave(port string, key NetKey) {
	if set := m.ports[key]; set != nil {
		delete(set, port)
	}
}

// ReleaseIdle releases the mappings without a port: their local VLAN is
// freed and their Network leaves the state. before is called for each
// while its Network is still in the state (its owners' dependents are
// found from it).
func (m *Mappings) ReleaseIdle(before func(NetKey)) {
	var idle []NetKey
	for key, set := range m.ports {
		if len(set) == 0 {
			idle = append(idle, key)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].String() < idle[j].String() })
	for _, key := range idle {
		delete(m.ports, key)
		m.vlans.Release(key)
		before(key)
		delete(m.s.Networks, key)
	}
}
