package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// goldenPlacement is one case of testdata/placement_golden.json, written by
// testdata/placement_golden.py from the reference's own functions.
type goldenPlacement struct {
	Name               string            `json:"name"`
	Host               string            `json:"host"`
	HypervisorHostname string            `json:"hypervisor_hostname"`
	BridgeMappings     string            `json:"bridge_mappings"`
	Tunnelled          *string           `json:"tunnelled_network_rp_name"`
	OVS                map[string]string `json:"ovs"`
	WantJSON           string            `json:"want_json"`
	ErrorOption        string            `json:"error_option"`
	WantError          string            `json:"want_error"`
}

// placementReport is the part of report_state's configurations the options
// decide, keyed as the reference keys it.
func placementReport(c *Config, hostname string) map[string]any {
	pl := c.OVS.Placement
	return map[string]any{
		"resource_provider_bandwidths":                           pl.Bandwidths,
		"resource_provider_inventory_defaults":                   pl.InventoryDefaults,
		"resource_provider_packet_processing_without_direction":  pl.PPWithoutDirection,
		"resource_provider_packet_processing_with_direction":     pl.PPWithDirection,
		"resource_provider_packet_processing_inventory_defaults": pl.PPInventoryDefaults,
		"resource_provider_hypervisors":                          c.RPHypervisors(hostname),
	}
}

// The resource_provider_* options give the inventories the reference
// computes, byte for byte in JSON, and are refused where the reference
// refuses to start, naming the option.
func TestPlacementGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/placement_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenPlacement
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			var body strings.Builder
			fmt.Fprintf(&body, "%shost = %s\n[ovs]\nbridge_mappings = %s\n", base, gc.Host, gc.BridgeMappings)
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
			c, err := load(t, body.String())
			if gc.ErrorOption != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Option != "ovs."+gc.ErrorOption || strings.Contains(err.Error(), "\n") {
					t.Fatalf("want one-line error naming ovs.%s (reference: %s), got %v", gc.ErrorOption, gc.WantError, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			got, err := json.Marshal(placementReport(c, gc.HypervisorHostname))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != gc.WantJSON {
				t.Errorf("\n got %s\nwant %s", got, gc.WantJSON)
			}
		})
	}
}

// Python's float repr, which the reference's JSON carries.
func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0: "0.0", 1.5: "1.5", 1e-4: "0.0001", 1e-5: "1e-05", 1e15: "1000000000000000.0",
		1e16: "1e+16", 123456789.125: "123456789.125", 0.1: "0.1",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %s, want %s", f, got, want)
		}
	}
	for _, s := range []string{"nan", "inf", "-inf", "0x1p3", "1__0", "_1", "1_", "1_.5", ""} {
		if f, ok := pyFloat(s); ok {
			t.Errorf("pyFloat(%q) = %v, want refused", s, f)
		}
	}
	for s, want := range map[string]float64{" 2 ": 2, "1_0.5": 10.5, "+1e3": 1000, ".5": 0.5} {
		if f, ok := pyFloat(s); !ok || f != want {
			t.Errorf("pyFloat(%q) = %v %v, want %v", s, f, ok, want)
		}
	}
}
