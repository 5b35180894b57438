package neutron

import (
	"fmt"
)

// QoS objects (neutron/objects/qos/policy.py and rule.py). The agent's qos extension
// subscribes to the QosPolicy push topic and pulls a port's policy by id; the rules
// travel inside the policy (ListOfObjectsField('QosRule', subclasses=True)), each rule
// an envelope of its own class at the QosRule version.
const (
	TypeQosPolicy = "QosPolicy"

	// QosRuleVersion is the version every QosRule subclass carries (QosRule.VERSION:
	// 1.5 since QosMinimumPacketRateRule, unchanged through 2026.2).
	QosRuleVersion = "1.5"
)

// QoS rule types as the server names them (neutron_lib.services.qos.constants).
const (
	RuleBandwidthLimit    = "bandwidth_limit"
	RuleDSCPMarking       = "dscp_marking"
	RuleMinimumBandwidth  = "minimum_bandwidth"
	RulePacketRateLimit   = "packet_rate_limit"
	RuleMinimumPacketRate = "minimum_packet_rate"
)

// Directions of the rules that have one. minimum_packet_rate also accepts "any".
const (
	DirectionEgress  = "egress"
	DirectionIngress = "ingress"
	DirectionAny     = "any"
)

// qosRuleClasses maps a rule's versioned_object.name to its rule type.
var qosRuleClasses = map[string]string{
	"QosBandwidthLimitRule":    RuleBandwidthLimit,
	"QosDscpMarkingRule":       RuleDSCPMarking,
	"QosMinimumBandwidthRule":  RuleMinimumBandwidth,
	"QosPacketRateLimitRule":   RulePacketRateLimit,
	"QosMinimumPacketRateRule": RuleMinimumPacketRate,
}

// QosPolicy is QosPolicy 1.10 (the version from Yoga through 2026.2).
type QosPolicy struct {
	ID             string    `json:"id"`
	ProjectID      string    `json:"project_id,omitempty"`
	Name           string    `json:"name,omitempty"`
	Shared         bool      `json:"shared"`
	IsDefault      bool      `json:"is_default"`
	Rules          []QosRule `json:"rules"`
	RevisionNumber int64     `json:"revision_number"`
	CreatedAt      string    `json:"created_at,omitempty"`
	UpdatedAt      string    `json:"updated_at,omitempty"`
	Description    string    `json:"description,omitempty"`
}

// QosRule is one rule of a policy, every subclass in one type: Type says which fields
// mean something. The integer fields the OVO declares nullable are pointers (nil: unset,
// which the reference driver reads as 0).
type QosRule struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	QosPolicyID string `json:"qos_policy_id,omitempty"`
	Direction   string `json:"direction,omitempty"`
	// bandwidth_limit
	MaxKbps      *int64 `json:"max_kbps,omitempty"`
	MaxBurstKbps *int64 `json:"max_burst_kbps,omitempty"`
	// dscp_marking
	DSCPMark int `json:"dscp_mark,omitempty"`
	// minimum_bandwidth
	MinKbps *int64 `json:"min_kbps,omitempty"`
	// packet_rate_limit
	MaxKpps      *int64 `json:"max_kpps,omitempty"`
	MaxBurstKpps *int64 `json:"max_burst_kpps,omitempty"`
	// minimum_packet_rate
	MinKpps int64 `json:"min_kpps,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler over the versioned-object envelope.
func (p *QosPolicy) UnmarshalJSON(b []byte) error { return decodeQosPolicy(b, p) }

// ResourceType implements Resource.
func (p *QosPolicy) ResourceType() string { return TypeQosPolicy }

// ResourceID implements Resource.
func (p *QosPolicy) ResourceID() string { return p.ID }

// Revision implements Resource.
func (p *QosPolicy) Revision() int64 { return p.RevisionNumber }

// Int returns *v, 0 when unset (the reference's "rule.max_kbps or 0").
func Int(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// qosRuleData is the union of every rule class's fields as they are on the wire.
type qosRuleData struct {
	ID           string `json:"id"`
	QosPolicyID  string `json:"qos_policy_id"`
	Direction    string `json:"direction"`
	MaxKbps      *int64 `json:"max_kbps"`
	MaxBurstKbps *int64 `json:"max_burst_kbps"`
	DSCPMark     *int   `json:"dscp_mark"`
	MinKbps      *int64 `json:"min_kbps"`
	MaxKpps      *int64 `json:"max_kpps"`
	MaxBurstKpps *int64 `json:"max_burst_kpps"`
	MinKpps      *int64 `json:"min_kpps"`
}

type (
	qosPolicyPlain QosPolicy
	qosPolicyWire  struct {
		qosPolicyPlain
		Rules []vo[qosRuleData] `json:"rules"`
	}
)

func decodeQosPolicy(b []byte, p *QosPolicy) error {
	var w vo[qosPolicyWire]
	if err := decodeTop(b, &w, TypeQosPolicy); err != nil {
		return err
	}
	out := QosPolicy(w.Data.qosPolicyPlain)
	out.Rules = nil
	for i := range w.Data.Rules {
		r, err := qosRule(&w.Data.Rules[i])
		if err != nil {
			return fmt.Errorf("ovo: QosPolicy %s rule %d: %w", out.ID, i, err)
		}
		out.Rules = append(out.Rules, r)
	}
	*p = out
	return nil
}

// qosRule checks one rule envelope and its fields against what the OVO accepts: a
// value the server could not have sent is refused rather than applied as something else.
func qosRule(v *vo[qosRuleData]) (QosRule, error) {
	typ, ok := qosRuleClasses[v.Name]
	if !ok {
		return QosRule{}, &VersionError{Name: v.Name, Version: v.Version}
	}
	if !compatible(v.Version, QosRuleVersion) {
		return QosRule{}, &VersionError{Name: v.Name, Version: v.Version, Want: QosRuleVersion}
	}
	d := &v.Data
	r := QosRule{Type: typ, ID: d.ID, QosPolicyID: d.QosPolicyID, Direction: d.Direction}
	if r.ID == "" {
		return QosRule{}, fmt.Errorf("%s without id", v.Name)
	}
	nonNeg := func(name string, x *int64) error {
		if x != nil && *x < 0 {
			return fmt.Errorf("%s %s=%d is negative", v.Name, name, *x)
		}
		return nil
	}
	switch typ {
	case RuleBandwidthLimit, RulePacketRateLimit:
		if r.Direction == "" {
			r.Direction = DirectionEgress // FlowDirectionEnumField(default=egress)
		}
	case RuleDSCPMarking:
		if d.DSCPMark == nil {
			return QosRule{}, fmt.Errorf("%s without dscp_mark", v.Name)
		}
		r.DSCPMark = *d.DSCPMark
		if !validDSCP(r.DSCPMark) {
			return QosRule{}, fmt.Errorf("%s dscp_mark %d is not a valid DSCP mark", v.Name, r.DSCPMark)
		}
	case RuleMinimumPacketRate:
		if d.MinKpps == nil {
			return QosRule{}, fmt.Errorf("%s without min_kpps", v.Name)
		}
		r.MinKpps = *d.MinKpps
		if r.MinKpps < 0 {
			return QosRule{}, fmt.Errorf("%s min_kpps=%d is negative", v.Name, r.MinKpps)
		}
	}
	switch r.Direction {
	case "", DirectionEgress, DirectionIngress:
	case DirectionAny:
		if typ != RuleMinimumPacketRate {
			return QosRule{}, fmt.Errorf("%s direction %q", v.Name, r.Direction)
		}
	default:
		return QosRule{}, fmt.Errorf("%s direction %q", v.Name, r.Direction)
	}
	if typ == RuleMinimumBandwidth && r.Direction == "" {
		return QosRule{}, fmt.Errorf("%s without direction", v.Name)
	}
	for _, f := range []struct {
		name string
		v    *int64
		dst  **int64
		of   string
	}{
		{"max_kbps", d.MaxKbps, &r.MaxKbps, RuleBandwidthLimit},
		{"max_burst_kbps", d.MaxBurstKbps, &r.MaxBurstKbps, RuleBandwidthLimit},
		{"min_kbps", d.MinKbps, &r.MinKbps, RuleMinimumBandwidth},
		{"max_kpps", d.MaxKpps, &r.MaxKpps, RulePacketRateLimit},
		{"max_burst_kpps", d.MaxBurstKpps, &r.MaxBurstKpps, RulePacketRateLimit},
	} {
		if f.of != typ {
			continue
		}
		if err := nonNeg(f.name, f.v); err != nil {
			return QosRule{}, err
		}
		*f.dst = f.v
	}
	return r, nil
}

// validDSCP is neutron_lib's VALID_DSCP_MARKS: 0, 8, 10, ..., 56 (the marks the API
// accepts; DscpMarkField is an enum of them).
func validDSCP(m int) bool {
	switch m {
	case 0, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 46, 48, 56:
		return true
	}
	return false
}
