package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Placement holds the [ovs] resource_provider_* options parsed and validated
// as the reference agent does in OVSNeutronAgent.__init__ (neutron_lib's
// parse_rp_bandwidths, parse_rp_pp_with/without_direction and
// parse_rp_inventory_defaults, neutron's validate_rp_bandwidth), so that
// report_state carries the inventories neutron-server creates in placement.
type Placement struct {
	// Bandwidths maps a bridge (or the tunnelled resource provider) to
	// its "egress" and "ingress" kbps; a nil rate is "not given".
	Bandwidths RPRates
	// PPWithoutDirection maps a hypervisor to its "any" packet rate (kpps);
	// PPWithDirection to "egress" and "ingress". At most one is non-empty.
	PPWithoutDirection RPRates
	PPWithDirection    RPRates
	// InventoryDefaults and PPInventoryDefaults keep only the keys the
	// option gives: setting it replaces the whole default dict, as oslo does.
	InventoryDefaults   InventoryDefaults
	PPInventoryDefaults InventoryDefaults
	// Hypervisors is resource_provider_hypervisors as written;
	// DefaultHypervisor resource_provider_default_hypervisor (empty: the
	// host's canonical name, see RPHypervisors).
	Hypervisors       map[string]string
	DefaultHypervisor string
	// TunnelledRPName is [ml2] tunnelled_network_rp_name (neutron 2026.2):
	// the device name of the tunnelled networks' resource provider; empty
	// leaves it out.
	TunnelledRPName string
}

// RPRates is name -> direction -> rate; a nil rate is sent as null.
type RPRates map[string]map[string]*int64

// InventoryDefaults is a placement inventory default set; nil fields are
// absent from the dict.
type InventoryDefaults struct {
	AllocationRatio                      *float64
	MaxUnit, MinUnit, Reserved, StepSize *int64
}

// MarshalJSON writes the dict as Python's json.dumps does (keys sorted,
// floats in repr form: 1.0, 1e-05, 1e+16).
func (d InventoryDefaults) MarshalJSON() ([]byte, error) {
	var parts []string
	if d.AllocationRatio != nil {
		parts = append(parts, `"allocation_ratio":`+pyFloatRepr(*d.AllocationRatio))
	}
	for _, kv := range []struct {
		k string
		v *int64
	}{{"max_unit", d.MaxUnit}, {"min_unit", d.MinUnit}, {"reserved", d.Reserved}, {"step_size", d.StepSize}} {
		if kv.v != nil {
			parts = append(parts, fmt.Sprintf("%q:%d", kv.k, *kv.v))
		}
	}
	return []byte("{" + strings.Join(parts, ",") + "}"), nil
}

// pyFloatRepr is Python's repr of a finite float: shortest round-trip
// digits, exponent form below 1e-4 and from 1e16, ".0" on integral values.
func pyFloatRepr(f float64) string {
	if f != 0 {
		if a := math.Abs(f); a < 1e-4 || a >= 1e16 {
			s := strconv.FormatFloat(f, 'e', -1, 64)
			return s
		}
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

// defaultInventoryDefaults is the reference default of both
// *_inventory_defaults options.
func defaultInventoryDefaults() InventoryDefaults {
	return InventoryDefaults{AllocationRatio: f64(1.0), MinUnit: i64(1), StepSize: i64(1), Reserved: i64(0)}
}

// DefaultRPTunnelledName is neutron_lib's RP_TUNNELLED, the default of
// [ml2] tunnelled_network_rp_name.
const DefaultRPTunnelledName = "rp_tunnelled"

// pyInt is Python's int() on a str: surrounding whitespace, one sign,
// decimal digits with single underscores between them.
func pyInt(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	digits, ok := pyDigits(s)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false // past int64: no inventory is that large
	}
	if neg {
		n = -n
	}
	return n, true
}

// pyDigits checks "d(_?d)*" and returns the digits alone.
func pyDigits(s string) (string, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return "", false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '_' {
			return "", false
		}
	}
	return strings.ReplaceAll(s, "_", ""), true
}

// pyFloat is Python's float() on a str for finite decimal values. nan and
// inf, which Python accepts, are refused: they cannot be sent as JSON
// numbers, and placement has no use for them.
func pyFloat(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "xXpP") || strings.Contains(s, "__") {
		return 0, false // Go would read hex floats; Python does not
	}
	// An underscore must sit between two digits.
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && (i == 0 || i == len(s)-1 || !isDigit(s[i-1]) || !isDigit(s[i+1])) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// parseRPOptions is neutron_lib's _parse_rp_options: "name:r1:...:rN"
// tuples, a bare name standing for all rates unset.
func parseRPOptions(items []string, keys ...string) (RPRates, error) {
	rv := RPRates{}
	for _, item := range items {
		if !strings.Contains(item, ":") {
			item += strings.Repeat(":", len(keys))
		}
		values := strings.Split(item, ":")
		if len(values) != len(keys)+1 {
			return nil, fmt.Errorf("expected a tuple with %d values, got: %s", len(keys)+1, item)
		}
		name := values[0]
		if _, dup := rv[name]; dup {
			return nil, fmt.Errorf("same resource name listed multiple times: %q", name)
		}
		rates := map[string]*int64{}
		for i, k := range keys {
			v := values[i+1]
			if v == "" {
				rates[k] = nil
				continue
			}
			n, ok := pyInt(v)
			if !ok || n < 0 {
				return nil, fmt.Errorf("expected a non-negative integer, got: %s", v)
			}
			rates[k] = i64(n)
		}
		rv[name] = rates
	}
	return rv, nil
}

// setDefaultHypervisor is neutron_lib's _rp_pp_set_default_hypervisor: the
// entry without a hypervisor name is the agent's host.
func setDefaultHypervisor(r RPRates, host string) error {
	noName, ok := r[""]
	if !ok {
		return nil
	}
	if _, clash := r[host]; clash {
		return fmt.Errorf("found configuration for %q hypervisor and one without hypervisor name specified that would override it", host)
	}
	delete(r, "")
	r[host] = noName
	return nil
}

// parseInventoryDefaults is neutron_lib's parse_rp_inventory_defaults.
func parseInventoryDefaults(m map[string]string) (InventoryDefaults, error) {
	var d InventoryDefaults
	var unexpected []string
	for k := range m {
		switch k {
		case "allocation_ratio", "max_unit", "min_unit", "reserved", "step_size":
		default:
			unexpected = append(unexpected, k)
		}
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		return d, fmt.Errorf("unexpected options: %s", strings.Join(unexpected, ","))
	}
	if v, ok := m["allocation_ratio"]; ok {
		f, ok := pyFloat(v)
		if !ok || f < 0 {
			return d, fmt.Errorf("allocation_ratio: expected a non-negative float, got: %s", v)
		}
		d.AllocationRatio = f64(f)
	}
	for _, kv := range []struct {
		k   string
		dst **int64
	}{{"min_unit", &d.MinUnit}, {"max_unit", &d.MaxUnit}, {"reserved", &d.Reserved}, {"step_size", &d.StepSize}} {
		v, ok := m[kv.k]
		if !ok {
			continue
		}
		n, ok := pyInt(v)
		if !ok || n < 0 {
			return d, fmt.Errorf("%s: expected a non-negative int, got: %s", kv.k, v)
		}
		*kv.dst = i64(n)
	}
	return d, nil
}

// parsePlacement reads the resource_provider_* options after [DEFAULT] host,
// [ovs] bridge_mappings and [ml2] tunnelled_network_rp_name, in the order
// the reference checks them, so the first error is the reference's.
func (p *parser) parsePlacement(host string, mappings []BridgeMapping, pl *Placement) {
	const ovs = "ovs"
	rates := func(key string, keys ...string) (RPRates, string) {
		v, _ := p.lookup(ovs, key)
		r, err := parseRPOptions(splitList(v), keys...)
		if err == nil && key != "resource_provider_bandwidths" {
			err = setDefaultHypervisor(r, host)
		}
		if err != nil {
			p.fail(ovs, key, v, "cannot parse %s: %v", key, err)
		}
		return r, v
	}
	pl.Bandwidths, _ = rates("resource_provider_bandwidths", "egress", "ingress")
	pl.PPWithoutDirection, _ = rates("resource_provider_packet_processing_without_direction", "any")
	var with string
	pl.PPWithDirection, with = rates("resource_provider_packet_processing_with_direction", "egress", "ingress")
	if p.err != nil {
		return
	}
	if len(pl.PPWithDirection) > 0 && len(pl.PPWithoutDirection) > 0 {
		p.fail(ovs, "resource_provider_packet_processing_with_direction", with,
			"resource_provider_packet_processing_without_direction and resource_provider_packet_processing_with_direction are mutually exclusive")
		return
	}
	// validate_rp_bandwidth: a bandwidth needs a bridge of bridge_mappings
	// (or the tunnelled resource provider) to hang on.
	devices := map[string]bool{}
	for _, m := range mappings {
		devices[m.Bridge] = true
	}
	if pl.TunnelledRPName != "" {
		devices[pl.TunnelledRPName] = true
	}
	names := make([]string, 0, len(pl.Bandwidths))
	for n := range pl.Bandwidths {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !devices[n] {
			v, _ := p.lookup(ovs, "resource_provider_bandwidths")
			p.fail(ovs, "resource_provider_bandwidths", v, "device name %q is missing from bridge_mappings", n)
			return
		}
	}
	for _, o := range []struct {
		key string
		dst *InventoryDefaults
	}{{"resource_provider_inventory_defaults", &pl.InventoryDefaults}, {"resource_provider_packet_processing_inventory_defaults", &pl.PPInventoryDefaults}} {
		var m map[string]string
		p.dict(ovs, o.key, &m)
		if p.err != nil {
			return
		}
		if m == nil {
			continue // unset: the default Defaults() put there
		}
		d, err := parseInventoryDefaults(m)
		if err != nil {
			v, _ := p.lookup(ovs, o.key)
			p.fail(ovs, o.key, v, "cannot parse inventory defaults: %v", err)
			return
		}
		*o.dst = d
	}
	p.dict(ovs, "resource_provider_hypervisors", &pl.Hypervisors)
	p.str(ovs, "resource_provider_default_hypervisor", &pl.DefaultHypervisor)
}

// RPHypervisors is neutron 2026.2's default_rp_hypervisors: every bridge of
// bridge_mappings, and the tunnelled resource provider, mapped to its
// resource_provider_hypervisors entry when that is non-empty, else to
// resource_provider_default_hypervisor, else to hostname (the host's
// canonical name, as the reference's get_hypervisor_hostname finds it).
func (c *Config) RPHypervisors(hostname string) map[string]string {
	pl := c.OVS.Placement
	def := pl.DefaultHypervisor
	if def == "" {
		def = hostname
	}
	out := map[string]string{}
	set := func(dev string) {
		if hv := pl.Hypervisors[dev]; hv != "" {
			out[dev] = hv
		} else {
			out[dev] = def
		}
	}
	for _, m := range c.OVS.BridgeMappings {
		set(m.Bridge)
	}
	if pl.TunnelledRPName != "" {
		set(pl.TunnelledRPName)
	}
	return out
}
