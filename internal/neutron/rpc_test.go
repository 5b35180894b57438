package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

type sentCall struct {
	Target  Target
	Method  string
	Args    map[string]any
	Timeout time.Duration
}

// fakeRPC answers calls from a function; it records what was sent.
type fakeRPC struct {
	mu     sync.Mutex
	calls  []sentCall
	answer func(c sentCall) (any, error)
}

func (f *fakeRPC) Call(ctx context.Context, tgt Target, method string, args any, timeout time.Duration) (json.RawMessage, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	c := sentCall{Target: tgt, Method: method, Args: m, Timeout: timeout}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	res, err := f.answer(c)
	if err != nil {
		return nil, err
	}
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(res)
}

func (f *fakeRPC) Cast(ctx context.Context, tgt Target, method string, args any) error {
	_, err := f.Call(ctx, tgt, method, args, 0)
	return err
}

func capturedReply(t *testing.T, file string, i int) json.RawMessage {
	t.Helper()
	c := loadCapture(t, file)
	return c.Examples[i].Reply[0].Decoded.Result
}

func capturedArgs(t *testing.T, file string, i int) map[string]any {
	t.Helper()
	c := loadCapture(t, file)
	var m map[string]any
	if err := json.Unmarshal(c.Examples[i].Decoded.Args, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestUpdateDeviceListChunksAndMerges(t *testing.T) {
	f := &fakeRPC{answer: func(c sentCall) (any, error) {
		up, _ := c.Args["devices_up"].([]any)
		down, _ := c.Args["devices_down"].([]any)
		r := DeviceListResult{DevicesUp: []string{}, FailedDevicesUp: []string{}, DevicesDown: []DeviceDown{}, FailedDevicesDown: []string{}}
		for _, d := range up {
			if d == "bad" {
				r.FailedDevicesUp = append(r.FailedDevicesUp, "bad")
			} else {
				r.DevicesUp = append(r.DevicesUp, d.(string))
			}
		}
		for _, d := range down {
			r.DevicesDown = append(r.DevicesDown, DeviceDown{Device: d.(string), Exists: true})
		}
		return r, nil
	}}
	c := NewClient(f, "hv-x")
	var up []string
	for i := 0; i < 44; i++ {
		up = append(up, "u"+string(rune('A'+i)))
	}
	up = append(up, "bad")
	res, err := c.UpdateDeviceList(context.Background(), up, []string{"d1", "d2", "d3"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 {
		t.Fatalf("%d calls, want 3 (45 devices, step 20)", len(f.calls))
	}
	first := f.calls[0]
	if first.Target != (Target{Topic: "q-plugin", Version: "1.9"}) || first.Method != "update_device_list" {
		t.Fatalf("target %+v %s", first.Target, first.Method)
	}
	want := capturedArgs(t, "neutron__update_device_list.json", 0)
	if !reflect.DeepEqual(keys(first.Args), keys(want)) {
		t.Errorf("args keys %v, captured %v", keys(first.Args), keys(want))
	}
	if first.Args["agent_id"] != "ovs-agent-hv-x" || first.Args["host"] != "hv-x" || first.Args["refresh_tunnels"] != true {
		t.Errorf("args %v", first.Args)
	}
	if n := len(f.calls[2].Args["devices_down"].([]any)); n != 0 {
		t.Errorf("third chunk has %d devices_down", n)
	}
	if len(res.DevicesUp) != 44 || !reflect.DeepEqual(res.FailedDevicesUp, []string{"bad"}) || len(res.DevicesDown) != 3 {
		t.Errorf("merged %+v", res)
	}

	f.calls = nil
	c.DeviceListStep = 1000
	if _, err := c.UpdateDeviceList(context.Background(), up, nil, false); err != nil || len(f.calls) != 1 {
		t.Fatalf("large step: %d calls, %v", len(f.calls), err)
	}
	f.calls = nil
	if _, err := c.UpdateDeviceList(context.Background(), nil, nil, true); err != nil || len(f.calls) != 0 {
		t.Fatalf("empty lists: %d calls", len(f.calls))
	}

	// Captured reply decodes.
	f.answer = func(sentCall) (any, error) { return capturedReply(t, "neutron__update_device_list.json", 0), nil }
	res, err = c.UpdateDeviceList(context.Background(), []string{"c022f4cf-e81b-4fe2-89a5-566b9576b797"}, nil, true)
	if err != nil || !reflect.DeepEqual(res.DevicesUp, []string{"c022f4cf-e81b-4fe2-89a5-566b9576b797"}) {
		t.Fatalf("%+v %v", res, err)
	}

	f.answer = func(sentCall) (any, error) { return nil, errors.New("timeout") }
	if _, err := c.UpdateDeviceList(context.Background(), up, nil, false); err == nil || !strings.Contains(err.Error(), "update_device_list") {
		t.Fatalf("error %v", err)
	}
}

func TestPluginCallsMatchCaptures(t *testing.T) {
	replies := map[string]json.RawMessage{
		"update_device_down":       capturedReply(t, "neutron__update_device_down.json", 0),
		"tunnel_sync":              capturedReply(t, "neutron__tunnel_sync.json", 0),
		"get_network_details":      capturedReply(t, "neutron__get_network_details.json", 0),
		"has_alive_neutron_server": capturedReply(t, "neutron__has_alive_neutron_server.json", 0),
		"bulk_pull":                capturedReply(t, "neutron__bulk_pull.json", 1),
	}
	f := &fakeRPC{answer: func(c sentCall) (any, error) { return replies[c.Method], nil }}
	c := NewClient(f, "hv1")
	ctx := context.Background()

	dd, err := c.UpdateDeviceDown(ctx, "97159a8c-4e92-48c9-82d0-60a3dee40917")
	if err != nil || !dd.Exists || dd.Device != "97159a8c-4e92-48c9-82d0-60a3dee40917" {
		t.Fatalf("update_device_down %+v %v", dd, err)
	}
	tun, err := c.TunnelSync(ctx, "127.0.0.1", "vxlan")
	if err != nil || len(tun) != 1 || tun[0].UDPPort != 4789 || tun[0].Host != "hv1" {
		t.Fatalf("tunnel_sync %+v %v", tun, err)
	}
	nd, err := c.GetNetworkDetails(ctx, "a60fae45-90d8-4e51-94da-69cb0ea8ca98")
	if err != nil || nd.MTU != 1450 || nd.NetworkType != "vxlan" || *nd.SegmentationID != 892 || len(nd.Raw) == 0 {
		t.Fatalf("get_network_details %+v %v", nd, err)
	}
	alive, err := c.HasAliveNeutronServer(ctx)
	if err != nil || !alive {
		t.Fatalf("has_alive %v %v", alive, err)
	}
	rs, err := c.BulkPull(ctx, TypePort, Filter{"security_group_ids": {"12e67854-c5a3-410e-852e-2f52043d36d3"}})
	if err != nil || len(rs) == 0 {
		t.Fatalf("bulk_pull %v %v", rs, err)
	}

	versions := map[string]string{
		"update_device_down": "1.9", "tunnel_sync": "1.4", "get_network_details": "1.6",
		"has_alive_neutron_server": "1.2", "bulk_pull": "1.1",
	}
	captures := map[string]string{
		"update_device_down": "neutron__update_device_down.json", "tunnel_sync": "neutron__tunnel_sync.json",
		"get_network_details": "neutron__get_network_details.json", "has_alive_neutron_server": "neutron__has_alive_neutron_server.json",
		"bulk_pull": "neutron__bulk_pull.json",
	}
	for _, call := range f.calls {
		if call.Target.Version != versions[call.Method] {
			t.Errorf("%s version %s, want %s", call.Method, call.Target.Version, versions[call.Method])
		}
		want := capturedArgs(t, captures[call.Method], 0)
		if !reflect.DeepEqual(keys(call.Args), keys(want)) {
			t.Errorf("%s args %v, captured %v", call.Method, keys(call.Args), keys(want))
		}
		if call.Method == "bulk_pull" {
			want = capturedArgs(t, captures[call.Method], 1)
			if !reflect.DeepEqual(call.Args, want) {
				t.Errorf("bulk_pull args %v, captured %v", call.Args, want)
			}
		}
	}
	if f.calls[0].Args["agent_id"] != "ovs-agent-hv1" {
		t.Error(f.calls[0].Args)
	}

	f.answer = func(sentCall) (any, error) {
		return json.RawMessage(`[{"versioned_object.name": "Port", "versioned_object.version": "2.0", "versioned_object.data": {}}]`), nil
	}
	if _, err := c.BulkPull(ctx, TypePort, nil); err == nil || !strings.Contains(err.Error(), "Port") {
		t.Fatalf("incompatible bulk_pull: %v", err)
	}
	f.answer = func(sentCall) (any, error) { return json.RawMessage(`{"tunnels": 5}`), nil }
	if _, err := c.TunnelSync(ctx, "1.1.1.1", "vxlan"); !errors.Is(err, ErrBadReply) {
		t.Fatalf("bad reply: %v", err)
	}
}

// The report we build for the captured agent's settings equals the captured one, key for
// key and value for value (uuid aside).
func TestReportStateMatchesCapture(t *testing.T) {
	captured := capturedArgs(t, "neutron__report_state.json", 0)
	f := &fakeRPC{answer: func(sentCall) (any, error) { return "new", nil }}
	synced := false
	r := &Reporter{
		Client:   NewClient(f, "hv1"),
		Interval: 30 * time.Second,
		Configurations: func() (AgentConfigurations, bool) {
			return AgentConfigurations{
				BridgeMappings:                                    map[string]string{"physnet1": "br-phys"},
				ResourceProviderInventoryDefaults:                 DefaultInventoryDefaults,
				ResourceProviderPacketProcessingInventoryDefaults: DefaultInventoryDefaults,
				ResourceProviderHypervisors:                       map[string]string{"br-phys": "vm"},
				IntegrationBridge:                                 "br-int",
				TunnelTypes:                                       []string{"vxlan"},
				TunnelingIP:                                       "127.0.0.1",
				L2Population:                                      true,
				DatapathType:                                      "netdev",
				OVSCapabilities: OVSCapabilities{
					DatapathTypes: []string{"netdev", "system"},
					IfaceTypes:    []string{"afxdp", "afxdp-nonpmd", "bareudp", "erspan", "geneve", "gre", "gtpu", "internal", "ip6erspan", "ip6gre", "lisp", "patch", "stt", "system", "tap", "vxlan"},
				},
				VhostuserSocketDir: "/var/run/openvswitch",
			}, true
		},
		Synced: func() bool { return synced },
	}
	res, err := r.ReportOnce(context.Background())
	if err != nil || res != ReportNew {
		t.Fatalf("%q %v", res, err)
	}
	sent := f.calls[0]
	if sent.Target != (Target{Topic: "q-reports-plugin", Version: "1.2"}) || sent.Timeout != 30*time.Second {
		t.Fatalf("target %+v timeout %v", sent.Target, sent.Timeout)
	}
	if _, err := time.Parse(ReportTimeFormat, sent.Args["time"].(string)); err != nil {
		t.Errorf("time %v: %v", sent.Args["time"], err)
	}
	strip := func(m map[string]any) map[string]any {
		st := m["agent_state"].(map[string]any)["agent_state"].(map[string]any)
		delete(st, "uuid")
		return st
	}
	got, want := strip(sent.Args), strip(captured)
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", " ")
		wb, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("agent_state differs:\n got %s\nwant %s", gb, wb)
	}

	// Not synced yet: start_flag stays, resource_versions are gone after one success.
	r.ReportOnce(context.Background())
	st := strip(f.calls[1].Args)
	if st["start_flag"] != true || st["resource_versions"] != nil {
		t.Fatalf("second report %v", keys(st))
	}
	synced = true
	r.ReportOnce(context.Background())
	r.ReportOnce(context.Background())
	if st := strip(f.calls[3].Args); st["start_flag"] != nil {
		t.Fatalf("start_flag after synced success: %v", st["start_flag"])
	}
	r.ForceStartFlag()
	r.ReportOnce(context.Background())
	if st := strip(f.calls[4].Args); st["start_flag"] != true {
		t.Fatal("ForceStartFlag")
	}

	// A failed report keeps what it had to send.
	f2 := &fakeRPC{answer: func(sentCall) (any, error) { return nil, errors.New("down") }}
	r2 := &Reporter{Client: NewClient(f2, "h")}
	r2.ReportOnce(context.Background())
	r2.ReportOnce(context.Background())
	if st := strip(f2.calls[1].Args); st["start_flag"] != true || st["resource_versions"] == nil {
		t.Fatal("failed report dropped start_flag/resource_versions")
	}
}

func TestReporterRun(t *testing.T) {
	var mu sync.Mutex
	results := []string{}
	answers := []any{"new", nil, "revived"}
	n := 0
	f := &fakeRPC{answer: func(sentCall) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		a := answers[n%len(answers)]
		n++
		return a, nil
	}}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reporter{Client: NewClient(f, "h"), Interval: time.Millisecond, OnReport: func(res string, err error) {
		mu.Lock()
		results = append(results, res)
		if len(results) == 3 {
			close(done)
		}
		mu.Unlock()
	}}
	go func() { r.Run(ctx) }()
	<-done
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(results[:3], []string{"new", "", "revived"}) {
		t.Fatalf("results %v", results)
	}
}
