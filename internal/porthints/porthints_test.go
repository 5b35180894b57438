package porthints

import (
	"encoding/json"
	"maps"
	"os"
	"testing"
)

// golden.json is the reference's own sanitize_ovs_iface_other_config, run by
// testdata/gen.py inside _bind_devices' try/except on cases.json: "set" is
// set_db_attribute's value, "clear" clear_db_attribute, "warning" its LOG.warning.
type goldenCase struct {
	Name  string         `json:"name"`
	Hints map[string]any `json:"hints"`
	Want  struct {
		Set     map[string]string `json:"set"`
		Clear   bool              `json:"clear"`
		Warning bool              `json:"warning"`
	} `json:"want"`
}

func TestInterfaceOtherConfigMatchesReference(t *testing.T) {
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("golden has %d cases, want 20", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got := InterfaceOtherConfig(c.Hints)
			if got.OtherConfig == nil {
				t.Fatal("OtherConfig nil: the column must always be decided for a bound port")
			}
			want := c.Want.Set
			if c.Want.Clear {
				want = map[string]string{} // clear_db_attribute: the column empty
			}
			if !maps.Equal(got.OtherConfig, want) {
				t.Errorf("other_config = %v, reference writes %v", got.OtherConfig, want)
			}
			if got.Cleared != c.Want.Clear {
				t.Errorf("Cleared = %v, reference clears: %v", got.Cleared, c.Want.Clear)
			}
			if got.Sanitized != c.Want.Warning {
				t.Errorf("Sanitized = %v, reference warns: %v", got.Sanitized, c.Want.Warning)
			}
		})
	}
}

// The decision must not alias the hints: the agent keeps it as the Interface
// state it wrote.
func TestInterfaceOtherConfigFreshMap(t *testing.T) {
	h := map[string]any{"openvswitch": map[string]any{"other_config": map[string]any{"tx-steering": "hash"}}}
	a, b := InterfaceOtherConfig(h), InterfaceOtherConfig(h)
	a.OtherConfig["x"] = "y"
	if len(b.OtherConfig) != 1 {
		t.Fatalf("decisions share a map: %v", b.OtherConfig)
	}
}
