//go:build integration

package trunk

// The golden scenario replayed on a private Open vSwitch (ovsdb-server + ovs-vswitchd,
// internal/testing/ovstest) through internal/ovsdb: the rows the adapter writes must be
// the reference's, read back with ovs-vsctl.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

type ovsWorld struct {
	o   *ovstest.OVS
	c   *ovsdb.Client
	ctx context.Context
}

func (w *ovsWorld) vsctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := w.o.Vsctl(args...)
	if err != nil {
		t.Fatalf("ovs-vsctl %v: %v", args, err)
	}
	return out
}

func (w *ovsWorld) addBridge(t *testing.T, name string) {
	w.vsctl(t, "add-br", name, "--", "set", "Bridge", name, "datapath_type=netdev")
}

func (w *ovsWorld) ifaces(t *testing.T, bridge string) []Iface {
	t.Helper()
	got, _, err := w.c.BridgeIfaces(w.ctx, bridge)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Iface, len(got))
	for i, g := range got {
		out[i] = Iface{Name: g.Name, ExternalIDs: g.ExternalIDs, Options: g.Options}
	}
	return out
}

func (w *ovsWorld) apply(t *testing.T, p Plan) Outcome {
	t.Helper()
	o, err := Apply(w.ctx, w.c, p)
	if err != nil {
		t.Logf("apply: %v", err)
	}
	return o
}

func (w *ovsWorld) unplugVM(t *testing.T, bridge, vm string) map[string]string {
	t.Helper()
	var last map[string]string
	for _, i := range w.ifaces(t, bridge) {
		if i.Name == vm {
			last = i.ExternalIDs
		}
	}
	w.vsctl(t, "del-br", bridge)
	return last
}

// ovsdbValue decodes ovs-vsctl's JSON for one column: a scalar, ["uuid",u], ["set",[…]]
// or ["map",[[k,v],…]].
func ovsdbValue(raw json.RawMessage) any {
	var l []json.RawMessage
	if json.Unmarshal(raw, &l) != nil || len(l) != 2 {
		var v any
		_ = json.Unmarshal(raw, &v)
		return v
	}
	var kind string
	_ = json.Unmarshal(l[0], &kind)
	switch kind {
	case "uuid":
		var u string
		_ = json.Unmarshal(l[1], &u)
		return u
	case "set":
		var items []json.RawMessage
		_ = json.Unmarshal(l[1], &items)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = ovsdbValue(it)
		}
		return out
	case "map":
		var pairs [][2]json.RawMessage
		_ = json.Unmarshal(l[1], &pairs)
		m := map[string]string{}
		for _, p := range pairs {
			var k, v string
			_ = json.Unmarshal(p[0], &k)
			_ = json.Unmarshal(p[1], &v)
			m[k] = v
		}
		return m
	}
	return nil
}

func (w *ovsWorld) list(t *testing.T, table, cols string) []map[string]any {
	t.Helper()
	var r struct {
		Headings []string            `json:"headings"`
		Data     [][]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(w.vsctl(t, "--format=json", "--columns="+cols, "list", table)), &r); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, row := range r.Data {
		m := map[string]any{}
		for i, h := range r.Headings {
			m[h] = ovsdbValue(row[i])
		}
		out = append(out, m)
	}
	return out
}

func (w *ovsWorld) snapshot(t *testing.T) dbModel {
	t.Helper()
	ifaces := map[string]map[string]any{}
	for _, i := range w.list(t, "Interface", "_uuid,name,type,options,external_ids") {
		ifaces[i["_uuid"].(string)] = i
	}
	ports := map[string]map[string]any{}
	for _, p := range w.list(t, "Port", "_uuid,name,tag,vlan_mode,interfaces") {
		ports[p["_uuid"].(string)] = p
	}
	m := dbModel{}
	for _, b := range w.list(t, "Bridge", "name,ports") {
		br := b["name"].(string)
		m[br] = map[string]refRow{}
		refs, ok := b["ports"].([]any)
		if !ok {
			refs = []any{b["ports"]}
		}
		for _, pu := range refs {
			p := ports[pu.(string)]
			name := p["name"].(string)
			if name == br {
				continue // the bridge's local port: list-ports leaves it out
			}
			var iu string
			switch v := p["interfaces"].(type) {
			case string:
				iu = v
			case []any:
				iu = v[0].(string)
			}
			i := ifaces[iu]
			r := refRow{Type: i["type"].(string), Options: i["options"].(map[string]string), ExternalIDs: i["external_ids"].(map[string]string)}
			if tag, ok := p["tag"].(float64); ok {
				n := int(tag)
				r.Tag = &n
			}
			if mode, ok := p["vlan_mode"].(string); ok {
				r.VLANMode = &mode
			}
			m[br][name] = r
		}
	}
	return m
}

func TestReplayOnOVS(t *testing.T) {
	compareWithReference(t, func(t *testing.T, plug dbModel) world {
		o := ovstest.Start(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		c, err := ovsdb.Dial(ctx, o.DB, ovsdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		w := &ovsWorld{o: o, c: c, ctx: ctx}
		for br, ports := range plug {
			w.addBridge(t, br)
			for name, r := range ports {
				args := []string{"add-port", br, name, "--", "set", "Interface", name, "type=" + r.Type}
				for _, k := range slices.Sorted(maps.Keys(r.ExternalIDs)) {
					args = append(args, fmt.Sprintf("external_ids:%s=%q", k, r.ExternalIDs[k]))
				}
				w.vsctl(t, args...)
			}
		}
		if got := w.snapshot(t); len(diff(got, plug)) != 0 {
			t.Fatalf("set-up differs from the reference's plug step: %s", strings.Join(diff(got, plug), "; "))
		}
		return w
	})
}
