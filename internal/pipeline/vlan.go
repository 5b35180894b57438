package pipeline

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Local VLAN range (1..4094; 0 is "untagged", 4095 the dead VLAN).
const (
	MinLocalVLAN = 1
	MaxLocalVLAN = 4094
)

// ErrNoFreeVLAN is returned when all 4094 local VLANs are in use.
var ErrNoFreeVLAN = errors.New("pipeline: no free local VLAN")

// VLANManager allocates local VLANs to (network, segment) mappings. It is
// plain state, no I/O: the agent feeds it what it read from OVSDB at start
// (Adopt), asks for a VLAN when a network gets its first local port
// (Allocate) and gives it back when the last one leaves (Release).
//
// Allocation takes the lowest free VLAN, which is what the reference does in
// practice (it pops from a set of small ints), so a fresh host numbers its
// networks 1, 2, 3 in the order they appear, as the reference does.
type VLANManager struct {
	byKey  map[NetKey]uint16
	byVLAN [MaxLocalVLAN + 1]*NetKey // index = VLAN; entry set when allocated or hinted
	hints  map[NetKey]uint16         // adopted at restart, not yet claimed by Allocate
	low    uint16                    // no free VLAN below this
}

// NewVLANManager returns an empty manager.
func NewVLANManager() *VLANManager {
	return &VLANManager{byKey: map[NetKey]uint16{}, hints: map[NetKey]uint16{}, low: MinLocalVLAN}
}

// ExistingTag is one VIF Port row as found in OVSDB at start: its tag and
// the other_config keys the agent wrote when it bound the port.
type ExistingTag struct {
	Port           string // Port name, for messages
	Tag            int
	NetUUID        string // other_config:net_uuid
	SegmentationID string // other_config:segmentation_id; "" when absent (flat, local)
}

// key parses the mapping key the port was bound with.
func (e ExistingTag) key() (NetKey, error) {
	seg := strings.TrimSpace(e.SegmentationID)
	if seg == "" || seg == "None" {
		return NoSeg(e.NetUUID), nil
	}
	n, err := strconv.ParseUint(seg, 10, 32)
	if err != nil {
		return NetKey{}, fmt.Errorf("port %s: segmentation_id %q: %w", e.Port, e.SegmentationID, err)
	}
	return Seg(e.NetUUID, uint32(n)), nil
}

// Adopt reserves the VLANs found on existing ports as hints, so that each
// network keeps its local VLAN across agent restarts (the reference's
// _restore_local_vlan_map). Ports without net_uuid, dead (4095) or out of
// range tags are ignored.
//
// Inconsistent OVSDB contents are resolved deterministically, whatever the
// input order: a network seen with several tags keeps the tag most of its
// ports carry (ties: the lowest tag); a tag claimed by several networks goes
// to the network with most ports on it (ties: the smallest key). The losers
// get fresh VLANs when they are allocated, and their ports are re-tagged.
// Adopt returns one message per dropped claim, for the log.
func (m *VLANManager) Adopt(existing []ExistingTag) []string {
	var msgs []string
	type claim struct {
		key NetKey
		tag uint16
	}
	count := map[claim]int{}
	for _, e := range existing {
		if e.NetUUID == "" || e.Tag < MinLocalVLAN || e.Tag > MaxLocalVLAN {
			continue
		}
		k, err := e.key()
		if err != nil {
			msgs = append(msgs, err.Error())
			continue
		}
		count[claim{k, uint16(e.Tag)}]++
	}
	claims := make([]claim, 0, len(count))
	for c := range count {
		claims = append(claims, c)
	}
	// Strongest claims first: most ports, then lowest tag, then smallest key.
	sort.Slice(claims, func(i, j int) bool {
		a, b := claims[i], claims[j]
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		if a.tag != b.tag {
			return a.tag < b.tag
		}
		return a.key.String() < b.key.String()
	})
	for _, c := range claims {
		if _, ok := m.byKey[c.key]; ok {
			continue // already allocated in this run; adopting is only for restart
		}
		if t, ok := m.hints[c.key]; ok {
			msgs = append(msgs, fmt.Sprintf("network %s seen with tags %d and %d: keeping %d", c.key, t, c.tag, t))
			continue
		}
		if owner := m.byVLAN[c.tag]; owner != nil {
			msgs = append(msgs, fmt.Sprintf("tag %d claimed by %s and %s: keeping %s", c.tag, *owner, c.key, *owner))
			continue
		}
		k := c.key
		m.hints[k] = c.tag
		m.byVLAN[c.tag] = &k
	}
	return msgs
}

// Allocate returns the local VLAN of key, allocating one (the adopted hint if
// any, else the lowest free) if it has none.
func (m *VLANManager) Allocate(key NetKey) (uint16, error) {
	if v, ok := m.byKey[key]; ok {
		return v, nil
	}
	if v, ok := m.hints[key]; ok {
		delete(m.hints, key)
		m.byKey[key] = v
		return v, nil
	}
	for v := m.low; v <= MaxLocalVLAN; v++ {
		if m.byVLAN[v] == nil {
			k := key
			m.byVLAN[v] = &k
			m.byKey[key] = v
			m.low = v + 1
			return v, nil
		}
	}
	m.low = MaxLocalVLAN + 1
	return 0, ErrNoFreeVLAN
}

// Get returns the VLAN allocated to key.
func (m *VLANManager) Get(key NetKey) (uint16, bool) {
	v, ok := m.byKey[key]
	return v, ok
}

// Release frees the VLAN of key (the network has no local port left).
func (m *VLANManager) Release(key NetKey) {
	v, ok := m.byKey[key]
	if !ok {
		return
	}
	delete(m.byKey, key)
	m.free(v)
}

// DisposeHints frees the adopted VLANs no network claimed; the reference does
// this at the end of its first successful iteration.
func (m *VLANManager) DisposeHints() {
	for k, v := range m.hints {
		delete(m.hints, k)
		m.free(v)
	}
}

func (m *VLANManager) free(v uint16) {
	m.byVLAN[v] = nil
	if v < m.low {
		m.low = v
	}
}

// Len is the number of allocated VLANs (hints excluded).
func (m *VLANManager) Len() int { return len(m.byKey) }

// Allocations returns a copy of key -> VLAN.
func (m *VLANManager) Allocations() map[NetKey]uint16 {
	out := make(map[NetKey]uint16, len(m.byKey))
	for k, v := range m.byKey {
		out[k] = v
	}
	return out
}
