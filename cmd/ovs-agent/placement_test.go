package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// report_state carries the resource_provider_* keys the reference sends
// for the same options (internal/config/testdata/placement_golden.json,
// made by the reference's own functions), byte for byte: before, the
// bandwidths were always {} and the hypervisors only the configured map.
func TestReportStatePlacementAsReference(t *testing.T) {
	b, err := os.ReadFile("../../internal/config/testdata/placement_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Host         string
		BridgeMappings     string            `json:"bridge_mappings"`
		HypervisorHostname string            `json:"hypervisor_hostname"`
		Tunnelled          *string           `json:"tunnelled_network_rp_name"`
		OVS                map[string]string `json:"ovs"`
		WantJSON           string            `json:"want_json"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, gc := range cases {
		if gc.WantJSON == "" {
			continue // refused at load: internal/config's test
		}
		n++
		var body strings.Builder
		fmt.Fprintf(&body, "[DEFAULT]\nhost = %s\n[ovs]\nbridge_mappings = %s\n", gc.Host, gc.BridgeMappings)
		keys := make([]string, 0, len(gc.OVS))
		for k := range gc.OVS {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&body, "%s = %s\n", k, gc.OVS[k])
		}
		if gc.Tunnelled != nil {
			fmt.Fprintf(&body, "[ml2]\ntunnelled_network_rp_name = %s\n", *gc.Tunnelled)
		}
		raw, err := config.ParseBytes([]byte(body.String()))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", gc.Name, err)
		}
		out, err := json.Marshal(agentConfigurations(cfg, ovsdb.SystemInfo{}, gc.HypervisorHostname, 0))
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(gc.WantJSON), &want); err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if string(got[k]) != string(w) {
				t.Errorf("%s: %s = %s, want %s", gc.Name, k, got[k], w)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d cases", n)
	}
}
