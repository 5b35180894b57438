package main

import (
	"slices"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

// TestQosPolicyTypeOnlyWithExtension: an agent without [agent] extensions = qos
// neither caches QosPolicy nor consumes neutron-vo-QosPolicy-1.10 (the reference
// subscribes to it only with the qos extension loaded); with it, both.
func TestQosPolicyTypeOnlyWithExtension(t *testing.T) {
	if slices.Contains(neutron.CachedTypes, neutron.TypeQosPolicy) {
		t.Fatalf("QosPolicy is a cached type before any extension is configured: %v", neutron.CachedTypes)
	}
	registerExtensionTypes(nil)
	if slices.Contains(neutron.CachedTypes, neutron.TypeQosPolicy) {
		t.Fatalf("no extensions: QosPolicy cached: %v", neutron.CachedTypes)
	}
	registerExtensionTypes([]string{"qos"})
	registerExtensionTypes([]string{"qos"}) // idempotent: no "registered twice" panic
	if !slices.Contains(neutron.CachedTypes, neutron.TypeQosPolicy) {
		t.Fatalf("extensions = qos: QosPolicy not cached: %v", neutron.CachedTypes)
	}
	if got := neutron.PushTopic(neutron.TypeQosPolicy); got != "neutron-vo-QosPolicy-1.10" {
		t.Errorf("push topic %q", got)
	}
}
