package qos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// OwnerKind is the kind of QoS's flow owners: "qos:<port id>" for a port's flows and
// OwnerBase for the flows installed whatever the policies.
const (
	OwnerKind = "qos"
	OwnerBase = "qos"
)

// PortOwner is the owner of a port's QoS flows.
func PortOwner(portID string) string { return OwnerKind + ":" + portID }

// Manager is the QoS extension's state, as the reference's QosAgentExtension and its
// OVS driver keep it: the wired ports, the policies known, and per port the plan
// applied with its meter ids. No I/O: the agent feeds it events, applies the flows
// of the owners it returns and the meters of Meters.
type Manager struct {
	opts     Options
	maxMeter uint32
	ports    map[string]Port
	policies map[string]*neutron.QosPolicy
	plans    map[string]Plan
	errs     map[string]error
	ids      map[string]uint32 // meter key → id, every port's
	// unclaimed are the meter keys found on the host (held) whose port has no plan
	// yet, by key → port id: their meters stay until the port is planned or goes
	// (Keep), so that a restart or takeover never lifts a limit in between.
	unclaimed map[string]string
}

// NewManager starts with the meter ids found on the host (ParseMeterIDs of every
// port's other_config), so that a restart or a takeover keeps them; maxMeter is the
// switch's (openflow.MeterFeatures.MaxMeter).
func NewManager(opts Options, maxMeter uint32, held map[string]uint32) *Manager {
	ids := make(map[string]uint32, len(held))
	unclaimed := map[string]string{}
	for k, v := range held {
		ids[k] = v
		if port, ok := meterKeyPort(k); ok {
			unclaimed[k] = port
		}
	}
	return &Manager{opts: opts, maxMeter: maxMeter, ports: map[string]Port{}, policies: map[string]*neutron.QosPolicy{},
		plans: map[string]Plan{}, errs: map[string]error{}, ids: ids, unclaimed: unclaimed}
}

// meterKeyPort is the port id of a meter key (MeterKey's inverse).
func meterKeyPort(key string) (string, bool) {
	_, port, _, ok := parseMeterKey(key)
	return port, ok
}

func parseMeterKey(key string) (kind, port, dir string, ok bool) {
	for _, kind := range []string{KindBPS, KindPPS} {
		rest, ok := strings.CutPrefix(key, kind+"_")
		if !ok {
			continue
		}
		for _, dir := range []string{neutron.DirectionEgress, neutron.DirectionIngress} {
			if port, ok := strings.CutSuffix(rest, "_"+dir); ok && port != "" {
				return kind, port, dir, true
			}
		}
	}
	return "", "", "", false
}

// heldPlan is the plan a port not planned yet keeps from the host: the meters
// its held keys name (kind and direction are in the key; the meter itself is
// kept as found, Keep), so that its flows stay while its policy is pulled. The
// DSCP mark and the queues cannot be known without the policy.
func (m *Manager) heldPlan(portID string) (Plan, bool) {
	plan := Plan{DSCP: -1}
	for _, k := range slices.Sorted(maps.Keys(m.unclaimed)) {
		if m.unclaimed[k] != portID {
			continue
		}
		if kind, _, dir, ok := parseMeterKey(k); ok {
			plan.Meters = append(plan.Meters, MeterSpec{Key: k, Kind: kind, Direction: dir})
		}
	}
	return plan, len(plan.Meters) > 0
}

// Keep are the meter ids found on the host whose port has no plan yet: the port's
// details, or its policy, are still to come. Its meter is not deleted meanwhile (a
// meter's deletion deletes the flows using it: the limit would be lifted until the
// port is planned); once the port is planned the meter is its plan's, and once it is
// removed (or wired dead) the meter goes.
func (m *Manager) Keep() map[uint32]bool {
	out := map[uint32]bool{}
	for k := range m.unclaimed {
		if id, ok := m.ids[k]; ok {
			out[id] = true
		}
	}
	return out
}

// claim ends the wait of a port's held meter keys (it is planned or gone).
func (m *Manager) claim(portID string) {
	for k, port := range m.unclaimed {
		if port == portID {
			delete(m.unclaimed, k)
		}
	}
}

// SetPort records a port as wired (again) and returns the owners to recompute.
func (m *Manager) SetPort(p Port) []string {
	m.ports[p.ID] = p
	m.refresh(p.ID)
	return []string{PortOwner(p.ID)}
}

// RemovePort forgets a port (unplugged or unwired): its flows and meters go.
func (m *Manager) RemovePort(id string) []string {
	if _, ok := m.ports[id]; !ok {
		// never planned (unbound, dead at start): what it held from an earlier
		// run is free, its meter goes at the next Sync
		m.refresh(id)
		return nil
	}
	delete(m.ports, id)
	m.refresh(id)
	return []string{PortOwner(id)}
}

// SetPolicy records a policy (pushed or pulled) and returns the owners of the ports
// it applies to.
func (m *Manager) SetPolicy(p *neutron.QosPolicy) []string {
	m.policies[p.ID] = p
	return m.refreshUsers(p.ID)
}

// DeletePolicy forgets a policy. The server refuses to delete a policy in use, so the
// reference ignores the event; ports that still name it have no rules applied until
// it is pulled again (Missing).
func (m *Manager) DeletePolicy(id string) []string {
	delete(m.policies, id)
	return m.refreshUsers(id)
}

// PolicyAbsent records that the server has no such policy (a pull returned none): the
// ports naming it lose their rules, as the reference's handle_port resets them.
func (m *Manager) PolicyAbsent(id string) []string {
	m.policies[id] = &neutron.QosPolicy{ID: id}
	return m.refreshUsers(id)
}

func (m *Manager) refreshUsers(policyID string) []string {
	var out []string
	for id, p := range m.ports {
		if p.PolicyIDToApply() == policyID {
			m.refresh(id)
			out = append(out, PortOwner(id))
		}
	}
	sort.Strings(out)
	return out
}

// Missing are the policies wired ports name that are not known: the agent pulls them
// (the reference's resource_rpc.pull) and calls SetPolicy.
func (m *Manager) Missing() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range m.ports {
		id := p.PolicyIDToApply()
		if id != "" && m.policies[id] == nil && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// refresh recomputes a port's plan and its meter ids: ids of keys it no longer needs
// are freed, new keys get free ids.
//
// A port whose policy is not known yet keeps what it had (and the ids it held from an
// earlier run): a restart must not lift a limit while the policy is being pulled.
func (m *Manager) refresh(portID string) {
	if p, ok := m.ports[portID]; ok {
		if id := p.PolicyIDToApply(); id != "" && m.policies[id] == nil {
			return
		}
	}
	m.claim(portID)
	old := m.plans[portID]
	delete(m.plans, portID)
	delete(m.errs, portID)
	p, ok := m.ports[portID]
	var plan Plan
	if ok {
		var err error
		if plan, err = Decide(p, m.policies[p.PolicyIDToApply()], m.opts); err != nil {
			m.errs[portID] = err
			plan = Plan{DSCP: -1}
		}
		if m.maxMeter == 0 {
			// a switch without meters: the reference skips the meter rules (and
			// says so once) and applies the others
			plan.Meters = nil
		}
	}
	want := map[string]bool{}
	var keys []string
	for _, s := range plan.Meters {
		want[s.Key] = true
		keys = append(keys, s.Key)
	}
	for _, s := range old.Meters {
		if !want[s.Key] {
			delete(m.ids, s.Key)
		}
	}
	// keys this port held from an earlier run but no longer wants
	for _, kind := range []string{KindBPS, KindPPS} {
		for _, dir := range []string{neutron.DirectionEgress, neutron.DirectionIngress} {
			if k := MeterKey(kind, portID, dir); !want[k] {
				delete(m.ids, k)
			}
		}
	}
	if ok {
		ids, err := AssignMeterIDs(keys, m.ids, m.maxMeter)
		for k, v := range ids {
			m.ids[k] = v
		}
		if err != nil && m.errs[portID] == nil {
			m.errs[portID] = err
		}
		m.plans[portID] = plan
	}
}

// Plan is the plan applied to a port (zero when it has none).
func (m *Manager) Plan(portID string) (Plan, bool) {
	p, ok := m.plans[portID]
	return p, ok
}

// Owners are every owner with flows: the base owner and one per wired port.
func (m *Manager) Owners() []string {
	out := []string{OwnerBase}
	for id := range m.ports {
		out = append(out, PortOwner(id))
	}
	sort.Strings(out)
	return out
}

// Flows computes owners' br-int flows. A port whose policy could not be turned into
// meters (ids exhausted, a rate beyond 32 bits) is in errs and keeps what it had.
func (m *Manager) Flows(owners []string) (map[string][]of.Flow, map[string]error) {
	out := map[string][]of.Flow{}
	errs := map[string]error{}
	for _, o := range owners {
		if o == OwnerBase {
			out[o] = BaseFlows()
			continue
		}
		kind, id := o, ""
		if len(o) > len(OwnerKind)+1 && o[:len(OwnerKind)+1] == OwnerKind+":" {
			kind, id = OwnerKind, o[len(OwnerKind)+1:]
		}
		if kind != OwnerKind {
			errs[o] = fmt.Errorf("qos: not a qos owner: %q", o)
			continue
		}
		if err := m.errs[id]; err != nil {
			errs[o] = err
			continue
		}
		p, ok := m.ports[id]
		plan, planned := m.plans[id]
		if ok && !planned {
			plan, planned = m.heldPlan(id)
		}
		if !ok || !planned {
			out[o] = nil
			continue
		}
		out[o] = Flows(p, plan, m.ids)
	}
	return out, errs
}

// Meters are the meters br-int must hold: every port's, by id.
func (m *Manager) Meters() (map[uint32]of.MeterConfig, error) {
	plans := make([]Plan, 0, len(m.plans))
	for _, id := range slices.Sorted(maps.Keys(m.plans)) {
		plans = append(plans, m.plans[id])
	}
	return MeterConfigs(plans, m.ids)
}

// MeterIDs are the ids a port's meters have, by key (what the reference stores in the
// port's other_config).
func (m *Manager) MeterIDs(portID string) map[string]uint32 {
	out := map[string]uint32{}
	for _, s := range m.plans[portID].Meters {
		if id, ok := m.ids[s.Key]; ok {
			out[s.Key] = id
		}
	}
	return out
}

// MinBandwidthQueues are the wired ports' minimum-bandwidth queues (ports on a
// physical network with an egress minimum_bandwidth rule), by queue number.
func (m *Manager) MinBandwidthQueues() []Queue {
	var out []Queue
	for _, id := range slices.Sorted(maps.Keys(m.plans)) {
		if q := m.plans[id].MinBandwidthQueue; q != nil {
			out = append(out, *q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].QueueNum < out[j].QueueNum })
	return out
}
