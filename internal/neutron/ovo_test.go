package neutron

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// captureMessage is the part of a capture file's examples the tests use.
type captureFile struct {
	Method         string           `json:"method"`
	Examples       []captureExample `json:"examples"`
	DeliverExample []captureExample `json:"deliver_example"`
}

type captureExample struct {
	Decoded struct {
		Method  string          `json:"method"`
		Version string          `json:"version"`
		Args    json.RawMessage `json:"args"`
	} `json:"oslo_message_decoded"`
	Reply []struct {
		Decoded struct {
			Result json.RawMessage `json:"result"`
		} `json:"oslo_message_decoded"`
	} `json:"reply"`
}

func loadCapture(t testing.TB, name string) captureFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "captures", name))
	if err != nil {
		t.Fatal(err)
	}
	var c captureFile
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func captureFiles(t testing.TB, glob string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", "captures", glob))
	if err != nil || len(m) == 0 {
		t.Fatalf("no captures for %s: %v", glob, err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// decodedView is what a golden file records for one decoded resource.
type decodedView struct {
	Type     string   `json:"type"`
	Resource Resource `json:"resource"`
}

func view(rs []Resource) []decodedView {
	out := make([]decodedView, len(rs))
	for i, r := range rs {
		out[i] = decodedView{Type: r.ResourceType(), Resource: r}
	}
	return out
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestGoldenPushCaptures(t *testing.T) {
	for _, f := range captureFiles(t, "neutron-vo-*.json") {
		t.Run(f, func(t *testing.T) {
			c := loadCapture(t, f)
			var all []any
			for _, ex := range append(c.Examples, c.DeliverExample...) {
				if ex.Decoded.Method != "push" || ex.Decoded.Version != "1.1" {
					t.Fatalf("unexpected %s %s", ex.Decoded.Method, ex.Decoded.Version)
				}
				p, err := DecodePush(ex.Decoded.Args)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if len(p.Resources) == 0 {
					t.Fatal("no resources")
				}
				wantType := strings.Split(strings.TrimPrefix(f, "neutron-vo-"), "-")[0]
				for _, r := range p.Resources {
					if r.ResourceType() != wantType {
						t.Errorf("type %s on %s topic", r.ResourceType(), wantType)
					}
				}
				all = append(all, map[string]any{"event_type": p.EventType, "resources": view(p.Resources)})
			}
			golden(t, strings.TrimSuffix(f, ".json")+".golden.json", all)
		})
	}
}

func TestGoldenBulkPullCaptures(t *testing.T) {
	c := loadCapture(t, "neutron__bulk_pull.json")
	var all []any
	for _, ex := range c.Examples {
		if len(ex.Reply) == 0 {
			t.Fatal("no reply")
		}
		rs, err := DecodeResourceList(ex.Reply[0].Decoded.Result)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		var a struct {
			ResourceType string `json:"resource_type"`
			Version      string `json:"version"`
		}
		if err := json.Unmarshal(ex.Decoded.Args, &a); err != nil {
			t.Fatal(err)
		}
		if a.Version != ResourceVersions[a.ResourceType] {
			t.Errorf("captured %s version %s, we speak %s", a.ResourceType, a.Version, ResourceVersions[a.ResourceType])
		}
		for _, r := range rs {
			if r.ResourceType() != a.ResourceType {
				t.Errorf("bulk_pull %s returned %s", a.ResourceType, r.ResourceType())
			}
		}
		all = append(all, view(rs))
	}
	golden(t, "bulk_pull.golden.json", all)
}

func TestDecodeBoundPortFields(t *testing.T) {
	c := loadCapture(t, "neutron__bulk_pull.json")
	var port *Port
	for _, ex := range c.Examples {
		rs, err := DecodeResourceList(ex.Reply[0].Decoded.Result)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if p, ok := r.(*Port); ok && len(p.BindingLevels) > 0 {
				port = p
			}
		}
	}
	if port == nil {
		t.Fatal("no bound port in bulk_pull capture")
	}
	seg := port.Segment()
	if seg == nil || seg.NetworkType != "vxlan" || seg.SegmentationID == nil || *seg.SegmentationID != 892 {
		t.Fatalf("segment = %+v", seg)
	}
	b := port.ActiveBinding()
	if b == nil || b.Host != "hv1" || b.VIFType != "ovs" || b.VIFDetails.Get("datapath_type") != "netdev" {
		t.Fatalf("binding = %+v", b)
	}
	if b.Profile.Map() == nil {
		t.Fatalf("profile = %#v", b.Profile)
	}
	if !port.PortSecurityEnabled() || len(port.SecurityGroupIDs) != 1 || len(port.FixedIPs) != 1 {
		t.Fatalf("port = %+v", port)
	}
}

func prim(name, version, data string) []byte {
	return []byte(`{"versioned_object.name": "` + name + `", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "` + version + `", "versioned_object.data": ` + data + `}`)
}

func TestDecodeErrors(t *testing.T) {
	okPort := `{"id": "p1", "revision_number": 3}`
	cases := []struct {
		name    string
		in      []byte
		wantSub string
		version bool
	}{
		{"unknown type", prim("Trunk", "1.1", `{"id": "q"}`), `"Trunk"`, true},
		{"major mismatch", prim("Port", "2.0", okPort), "Port", true},
		{"bad version", prim("Port", "x", okPort), "Port", true},
		{"nested major", prim("Port", "1.7", `{"id": "p", "bindings": [`+string(prim("PortBinding", "2.1", `{}`))+`]}`), "PortBinding", true},
		{"nested wrong name", prim("Port", "1.7", `{"id": "p", "fixed_ips": [`+string(prim("Route", "1.0", `{}`))+`]}`), "IPAllocation", false},
		{"nested not object", prim("Port", "1.7", `{"id": "p", "fixed_ips": [3]}`), "fixed_ips", false},
		{"wrong field type", prim("Port", "1.7", `{"id": 5}`), "Port", false},
		{"no id", prim("Network", "1.1", `{"mtu": 1500}`), "without id", false},
		{"not json", []byte(`{`), "ovo", false},
		{"array", []byte(`[]`), "ovo", false},
		{"newer minor ok", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in == nil {
				r, err := DecodeResource(prim("Port", "1.11", `{"id": "p", "hints": `+string(prim("PortHints", "1.0", `{"port_id": "p", "hints": "{\"openvswitch\": {\"other_config\": {\"tx-steering\": \"hash\"}}}"}`))+`, "trusted": true, "future_field": [1]}`))
				if err != nil || r.ResourceID() != "p" {
					t.Fatalf("newer minor: %v %v", r, err)
				}
				return
			}
			_, err := DecodeResource(tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantSub) {
				t.Errorf("error %q does not name %q", err, tc.wantSub)
			}
			var ve *VersionError
			if errors.As(err, &ve) != tc.version {
				t.Errorf("VersionError = %v for %v", !tc.version, err)
			}
		})
	}
}

func TestDecodeDefaults(t *testing.T) {
	r, err := DecodeResource(prim("SecurityGroup", "1.5", `{"id": "g"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !r.(*SecurityGroup).Stateful {
		t.Error("stateful should default to true")
	}
	r, err = DecodeResource(prim("Port", "1.7", `{"id": "p", "bindings": [`+string(prim("PortBinding", "1.0", `{"host": "h", "profile": {"migrating_to": "h2"}, "status": "ACTIVE"}`))+`], "security": null}`))
	if err != nil {
		t.Fatal(err)
	}
	p := r.(*Port)
	if !p.PortSecurityEnabled() || MigratingTo(p.Bindings) != "h2" {
		t.Errorf("port = %+v", p)
	}
	r, err = DecodeResource(prim("SecurityGroupRule", "1.2", `{"id": "r", "protocol": 6, "port_range_min": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	if rule := r.(*SecurityGroupRule); rule.Protocol != "6" || rule.PortRangeMin == nil || *rule.PortRangeMin != 0 {
		t.Errorf("rule = %+v", rule)
	}
}

func TestDecodePushErrors(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"event_type": "updated"}`,
		`{"event_type": "exploded", "resource_list": []}`,
		`{"event_type": "updated", "resource_list": {}}`,
		`{"event_type": "updated", "resource_list": [` + string(prim("Foo", "1.0", `{"id": "x"}`)) + `]}`,
		`[1]`,
	} {
		if _, err := DecodePush([]byte(in)); err == nil {
			t.Errorf("DecodePush(%s): no error", in)
		}
	}
}

// seedPrimitives returns every push args and bulk_pull result in the captures.
func seedPrimitives(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, f := range captureFiles(t, "neutron-vo-*.json") {
		c := loadCapture(t, f)
		for _, ex := range append(c.Examples, c.DeliverExample...) {
			seeds = append(seeds, ex.Decoded.Args)
		}
	}
	c := loadCapture(t, "neutron__bulk_pull.json")
	for _, ex := range c.Examples {
		seeds = append(seeds, ex.Reply[0].Decoded.Result)
	}
	return seeds
}

func FuzzDecodeOVO(f *testing.F) {
	for _, s := range seedPrimitives(f) {
		f.Add(s)
		var list []json.RawMessage
		if json.Unmarshal(s, &list) == nil {
			for _, one := range list {
				f.Add([]byte(one))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeResource(b); err == nil {
			if r.ResourceID() == "" {
				t.Fatal("decoded resource without id")
			}
			c := NewCache(CacheOptions{})
			c.Update(r, false)
			Synthesize(Event{Type: r.ResourceType(), Kind: Updated, ID: r.ResourceID(), New: r, Changed: []string{"bindings", "fixed_ips"}})
			if p, ok := r.(*Port); ok {
				_, _ = ComputeDeviceDetails(p.ID, p, nil, "h")
			}
		}
		if p, err := DecodePush(b); err == nil {
			c := NewCache(CacheOptions{})
			c.ApplyPush(p)
		}
		_, _ = DecodeResourceList(b)
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPushDecode(b *testing.B) {
	c := loadCapture(b, "neutron-vo-Port-1.7_fanout__push__updated.json")
	var one json.RawMessage
	for _, ex := range c.Examples {
		var a struct {
			List []json.RawMessage `json:"resource_list"`
		}
		if err := json.Unmarshal(ex.Decoded.Args, &a); err != nil {
			b.Fatal(err)
		}
		for _, r := range a.List {
			if p, err := DecodeResource(r); err == nil && len(p.(*Port).BindingLevels) > 0 {
				one = r
			}
		}
		if one == nil && len(a.List) > 0 {
			one = a.List[0]
		}
	}
	// A push of 100 bound ports, the shape the server sends on a bulk change.
	var buf bytes.Buffer
	buf.WriteString(`{"event_type": "updated", "resource_list": [`)
	const n = 100
	for i := 0; i < n; i++ {
		if i > 0 {
			buf.WriteString(", ")
		}
		buf.Write(one)
	}
	buf.WriteString(`]}`)
	msg := buf.Bytes()
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := DecodePush(msg)
		if err != nil || len(p.Resources) != n {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "ports/s")
	// CPU time is steadier than wall time on a shared machine.
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "ports/cpu-s")
	}
}
