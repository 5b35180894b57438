package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/trunk"
)

type reportingFeature struct{}

func (reportingFeature) Name() string      { return "qos" }
func (reportingFeature) Extension() string { return "qos" }
func (reportingFeature) Configurations(c map[string]any) {
	c["qos_test_key"] = 1
	c["devices"] = 99 // the agent's own key: must not be overwritten
}

// A feature's part of report_state: its name in extensions, its keys in
// the configurations, never one of the agent's own keys.
func TestFeatureConfigurationsInReport(t *testing.T) {
	c := neutron.AgentConfigurations{Devices: 3}
	featureConfigurations(&c, []feature.Feature{reportingFeature{}})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got["extensions"], []any{"qos"}) || got["qos_test_key"] != float64(1) || got["devices"] != float64(3) {
		t.Errorf("configurations: extensions %v, qos_test_key %v, devices %v", got["extensions"], got["qos_test_key"], got["devices"])
	}
	if _, ok := got["tunneling_ip"]; !ok {
		t.Errorf("tunneling_ip lost in the merge: %s", b)
	}
}

// An extension without a builder is refused (the option table refuses it
// first; this is the second lock), and no extension builds nothing.
func TestBuildFeaturesRefusesUnknownExtension(t *testing.T) {
	// Without a configuration: the trunk handler only (the firewall needs
	// firewall_driver = openvswitch, dvr enable_distributed_routing).
	if fs, err := buildFeatures(featureDeps{}, nil); err != nil || len(fs) != 1 || fs[0].Name() != trunk.FeatureName {
		t.Fatalf("no extensions: %d features, %v", len(fs), err)
	}
	_, err := buildFeatures(featureDeps{}, []string{"fdb"})
	if err == nil || !strings.Contains(err.Error(), `extension "fdb": not supported`) {
		t.Errorf("unknown extension: %v", err)
	}
}
