// Package porthints decides the Interface other_config a bound port's Neutron
// port hints (Port OVO 1.8+, the port_hints ml2 extension) ask for.
//
// The 2026.2 reference agent applies them in _bind_devices: it sets the
// Interface's other_config to sanitize_ovs_iface_other_config(
// hints['openvswitch']['other_config']) and, when that lookup raises KeyError
// or TypeError (no hints, hints without the key, a value that is not a dict),
// clears the column. Only tx-steering = hash | thread survives sanitizing; a
// WARNING is logged when sanitizing changed the dict. Both outcomes replace the
// whole column, so any other key someone set on the Interface is dropped, as
// the reference drops it.
package porthints

import "strings"

// The only key and values the reference passes through.
const (
	TxSteering       = "tx-steering"
	TxSteeringHash   = "hash"
	TxSteeringThread = "thread"
)

// Decision is what to write on the Interface row of a bound port.
type Decision struct {
	// OtherConfig is the whole Interface other_config to write; empty means
	// cleared (the reference's clear_db_attribute, or set to {}). Never nil.
	OtherConfig map[string]string
	// Sanitized is true when the reference would log its WARNING "Got
	// unexpected other_config, using sanitized version!": the hints' dict
	// differed from what is written.
	Sanitized bool
	// Cleared is true when the reference would take its KeyError/TypeError
	// path (no usable hints['openvswitch']['other_config']).
	Cleared bool
}

// InterfaceOtherConfig maps a port's hints (nil: the server sent None or no
// hints) to the Interface other_config to write, with the reference's
// semantics, including Python's behaviour on values of the wrong type.
func InterfaceOtherConfig(hints map[string]any) Decision {
	cleared := Decision{OtherConfig: map[string]string{}, Cleared: true}
	if hints == nil { // None['openvswitch']: TypeError
		return cleared
	}
	ovs, ok := hints["openvswitch"]
	if !ok { // KeyError
		return cleared
	}
	ovsDict, ok := ovs.(map[string]any)
	if !ok {
		// None / number / list / string indexed by a str: TypeError.
		return cleared
	}
	oc, ok := ovsDict["other_config"]
	if !ok { // KeyError
		return cleared
	}
	switch v := oc.(type) {
	case map[string]any:
		out := map[string]string{}
		if s, ok := v[TxSteering].(string); ok && (s == TxSteeringHash || s == TxSteeringThread) {
			out[TxSteering] = s
		}
		// other_config != output: output is a subset of v, so they differ
		// exactly when v has more keys.
		return Decision{OtherConfig: out, Sanitized: len(v) != len(out)}
	case string:
		// `'tx-steering' in other_config` is a substring test on a str; when
		// it holds, other_config['tx-steering'] raises TypeError.
		if strings.Contains(v, TxSteering) {
			return cleared
		}
		return Decision{OtherConfig: map[string]string{}, Sanitized: true}
	case []any:
		// Membership in a list; indexing a list by a str is a TypeError.
		for _, e := range v {
			if s, ok := e.(string); ok && s == TxSteering {
				return cleared
			}
		}
		return Decision{OtherConfig: map[string]string{}, Sanitized: true}
	default:
		// None, numbers, bools: `in` raises TypeError.
		return cleared
	}
}
