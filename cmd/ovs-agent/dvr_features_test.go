package main

import (
	"encoding/json"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/dvr"
	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

type recordingServer struct{ topics map[string][]neutron.Endpoint }

func (s *recordingServer) Serve(topic string, eps ...neutron.Endpoint) error {
	s.topics[topic] = eps
	return nil
}

func dvrConfig(t *testing.T, on bool) *config.Config {
	t.Helper()
	raw, err := config.ParseBytes([]byte("[agent]\ntunnel_types = vxlan\nl2_population = True\n[ovs]\nlocal_ip = 192.0.2.1\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agent.EnableDistributedRouting = on
	return cfg
}

// enable_distributed_routing builds the dvr feature and consumes
// q-agent-notifier-dvr-update with its dvr_mac_address_update endpoint;
// without it neither. report_state then says enable_distributed_routing, the
// forced ARP responder and in_distributed_mode (false until the server gave
// this host's DVR MAC), each key once.
func TestDVRFeatureWiring(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := &recordingServer{topics: map[string][]neutron.Endpoint{}}
		cfg := dvrConfig(t, on)
		fs, err := buildFeatures(featureDeps{Config: cfg, Client: &neutron.Client{}, Cache: &neutron.Cache{}, Server: srv}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var f feature.Feature
		for _, x := range fs {
			if x.Name() == dvr.FeatureName {
				f = x
			}
		}
		eps, served := srv.topics[dvr.UpdateTopic]
		if (f != nil) != on || served != on {
			t.Fatalf("enable_distributed_routing=%v: feature %v, consumer %v", on, f != nil, served)
		}
		if on && (len(eps) != 1 || eps[0].Methods["dvr_mac_address_update"] == nil || eps[0].Version != "1.0") {
			t.Fatalf("consumer endpoints %+v", eps)
		}
		c := agentConfigurations(cfg, ovsdb.SystemInfo{}, "hv", 0)
		featureConfigurations(&c, fs)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got["enable_distributed_routing"] != on || got["arp_responder_enabled"] != on || got["in_distributed_mode"] != false {
			t.Errorf("enable_distributed_routing=%v: report %s", on, b)
		}
	}
}
