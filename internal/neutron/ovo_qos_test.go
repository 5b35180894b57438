package neutron

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }

// TestDecodeQosPolicyGolden decodes a QosPolicy 1.10 primitive made by neutron's own
// objects (testdata/qos/gen_qos_policy.py): every rule class, nullable burst unset.
func TestDecodeQosPolicyGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/qos/qos_policy_1.10.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeResource(b)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := r.(*QosPolicy)
	if !ok {
		t.Fatalf("decoded %T", r)
	}
	pid := "5f1c7e3a-6b7e-4d2b-9a55-0d7c0c1e9a01"
	want := &QosPolicy{
		ID: pid, ProjectID: "a1b2c3d4e5f60718293a4b5c6d7e8f90", Name: "gold", Description: "golden policy",
		RevisionNumber: 3, CreatedAt: "2026-12-04T17:00:00Z", UpdatedAt: "2026-12-04T17:05:00Z",
		Rules: []QosRule{
			{Type: RuleBandwidthLimit, ID: "11111111-1111-4111-8111-111111111111", QosPolicyID: pid, Direction: DirectionEgress, MaxKbps: i64(10000), MaxBurstKbps: i64(8000)},
			{Type: RuleBandwidthLimit, ID: "22222222-2222-4222-8222-222222222222", QosPolicyID: pid, Direction: DirectionIngress, MaxKbps: i64(20000)},
			{Type: RuleDSCPMarking, ID: "33333333-3333-4333-8333-333333333333", QosPolicyID: pid, DSCPMark: 26},
			{Type: RuleMinimumBandwidth, ID: "44444444-4444-4444-8444-444444444444", QosPolicyID: pid, Direction: DirectionEgress, MinKbps: i64(1000)},
			{Type: RulePacketRateLimit, ID: "55555555-5555-4555-8555-555555555555", QosPolicyID: pid, Direction: DirectionEgress, MaxKpps: i64(2), MaxBurstKpps: i64(1)},
			{Type: RuleMinimumPacketRate, ID: "66666666-6666-4666-8666-666666666666", QosPolicyID: pid, Direction: DirectionAny, MinKpps: 5},
		},
	}
	if !reflect.DeepEqual(p, want) {
		g, _ := json.MarshalIndent(p, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("decoded\n%s\nwant\n%s", g, w)
	}
	if p.Rules[1].MaxBurstKbps != nil || Int(p.Rules[1].MaxBurstKbps) != 0 {
		t.Errorf("unset burst must read as 0")
	}
}

// TestDecodeQosPolicyPush decodes the policy as the neutron-vo-QosPolicy-1.10 push
// carries it, and the topic name.
func TestDecodeQosPolicyPush(t *testing.T) {
	b, err := os.ReadFile("testdata/qos/qos_policy_1.10.json")
	if err != nil {
		t.Fatal(err)
	}
	args := `{"resource_list": [` + string(b) + `], "event_type": "updated"}`
	p, err := DecodePush([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Resources) != 1 || p.Resources[0].ResourceType() != TypeQosPolicy || len(p.Resources[0].(*QosPolicy).Rules) != 6 {
		t.Fatalf("push decoded %+v", p.Resources)
	}
	if got := PushTopic(TypeQosPolicy); got != "neutron-vo-QosPolicy-1.10" {
		t.Errorf("topic %q", got)
	}
}

// TestDecodeQosPolicyRefusesBadRules: what the OVO fields would not accept is an error,
// never a rule applied as something else.
func TestDecodeQosPolicyRefusesBadRules(t *testing.T) {
	b, err := os.ReadFile("testdata/qos/qos_policy_1.10.json")
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	for name, c := range map[string]struct{ old, new, want string }{
		"unknown rule class": {`"QosDscpMarkingRule"`, `"QosFancyRule"`, "unsupported object type"},
		"rule major version": {`"QosDscpMarkingRule",
    "versioned_object.namespace": "versionedobjects",
    "versioned_object.version": "1.5"`, `"QosDscpMarkingRule",
    "versioned_object.namespace": "versionedobjects",
    "versioned_object.version": "2.0"`, "incompatible"},
		"invalid dscp":    {`"dscp_mark": 26`, `"dscp_mark": 27`, "not a valid DSCP"},
		"negative rate":   {`"max_kbps": 10000`, `"max_kbps": -1`, "negative"},
		"bad direction":   {`"direction": "ingress"`, `"direction": "sideways"`, "direction"},
		"any on bw limit": {`"direction": "ingress"`, `"direction": "any"`, "direction"},
		"policy version":  {`"versioned_object.version": "1.10"`, `"versioned_object.version": "2.0"`, "incompatible"},
	} {
		t.Run(name, func(t *testing.T) {
			s := strings.Replace(good, c.old, c.new, 1)
			if s == good {
				t.Fatalf("fixture has no %q", c.old)
			}
			_, err := DecodeResource([]byte(s))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
