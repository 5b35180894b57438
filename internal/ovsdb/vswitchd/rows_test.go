package vswitchd

import (
	"encoding/json"
	"os"
	"testing"
)

// TestColumnsInSchema: every monitored column exists in the schema OVS 3.1
// installs, and SetColumn decodes a value of the schema's type for it.
func TestColumnsInSchema(t *testing.T) {
	b, err := os.ReadFile("../vswitch.ovsschema")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Tables map[string]struct {
			Columns map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"columns"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	rows := map[string]interface {
		SetColumn(string, json.RawMessage) error
	}{
		OpenvSwitchTable: &OpenvSwitch{}, BridgeTable: &Bridge{}, PortTable: &Port{},
		InterfaceTable: &Interface{}, ControllerTable: &Controller{},
	}
	for table, cols := range Columns {
		st, ok := schema.Tables[table]
		if !ok {
			t.Errorf("table %s not in the schema", table)
			continue
		}
		for _, col := range cols {
			c, ok := st.Columns[col]
			if !ok {
				t.Errorf("%s.%s not in the schema", table, col)
				continue
			}
			if err := rows[table].SetColumn(col, sampleValue(t, c.Type)); err != nil {
				t.Errorf("%s.%s (type %s): %v", table, col, c.Type, err)
			}
		}
	}
}

// sampleValue is a value of a schema column type, in the form the server sends.
func sampleValue(t *testing.T, typ json.RawMessage) json.RawMessage {
	var atom string
	if json.Unmarshal(typ, &atom) == nil {
		return atomSample(atom)
	}
	var ct struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(typ, &ct); err != nil {
		t.Fatalf("type %s: %v", typ, err)
	}
	key := baseSample(t, ct.Key)
	if ct.Value != nil {
		return json.RawMessage(`["map",[[` + string(key) + `,` + string(baseSample(t, ct.Value)) + `]]]`)
	}
	return json.RawMessage(`["set",[` + string(key) + `]]`)
}

func baseSample(t *testing.T, base json.RawMessage) json.RawMessage {
	var atom string
	if json.Unmarshal(base, &atom) == nil {
		return atomSample(atom)
	}
	var bt struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(base, &bt); err != nil {
		t.Fatalf("base type %s: %v", base, err)
	}
	return atomSample(bt.Type)
}

func atomSample(typ string) json.RawMessage {
	switch typ {
	case "integer":
		return json.RawMessage(`1`)
	case "boolean":
		return json.RawMessage(`true`)
	case "uuid":
		return json.RawMessage(`["uuid","2f1c0f5e-5b9e-4a57-9b3c-3b0f3d0c9a11"]`)
	case "real":
		return json.RawMessage(`1.5`)
	}
	return json.RawMessage(`"x"`)
}
