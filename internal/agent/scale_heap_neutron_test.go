//go:build integration

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

// The bench's state at 1,000 ports, in process: the agent wired as run()
// wires it (neutron.Client + neutron.Cache behind NeutronServer, cache
// events into the agent), over an RPC that answers bulk_pull with the
// server's wire form of the objects (shaped on the captures in
// internal/neutron/testdata: bound OVS ports with vif_details and a VXLAN
// binding level, one network, one security group whose ingress rules name
// the group itself, so all N ports are its members), real reconcilers over
// a switch that forgets every bundle, and the fake OVSDB switch.

const (
	heapNet    = "a60fae45-90d8-4e51-94da-69cb0ea8ca98"
	heapSeg    = "bb9af622-6a0b-4b8b-b12c-de31131dcf72"
	heapSubnet = "965133ba-ae70-42dc-add3-786ee4ef5fbb"
	heapSG     = "12e67854-c5a3-410e-852e-2f52043d36d3"
	heapHost   = "me"
)

func heapPortID(i int) string { return fmt.Sprintf("%08x-e81b-4fe2-89a5-566b9576b797", i) }

func heapPortJSON(i int) string {
	id := heapPortID(i)
	return fmt.Sprintf(`{"versioned_object.data": {"admin_state_up": true, "allowed_address_pairs": [],
"binding_levels": [{"versioned_object.data": {"driver": "openvswitch", "host": %[2]q, "level": 0, "port_id": %[1]q,
 "segment": {"versioned_object.data": {"created_at": "2026-12-02T13:59:52Z", "hosts": [], "id": %[3]q, "is_dynamic": false,
  "network_id": %[4]q, "network_type": "vxlan", "revision_number": 0, "segment_index": 0, "segmentation_id": 892,
  "updated_at": "2026-12-02T13:59:52Z"}, "versioned_object.name": "NetworkSegment", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"},
 "segment_id": %[3]q}, "versioned_object.name": "PortBindingLevel", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.1"}],
"bindings": [{"versioned_object.data": {"host": %[2]q, "port_id": %[1]q, "profile": "{}", "status": "ACTIVE",
 "vif_details": "{\"connectivity\": \"l2\", \"port_filter\": true, \"ovs_hybrid_plug\": false, \"datapath_type\": \"system\", \"bridge_name\": \"br-int\"}",
 "vif_type": "ovs", "vnic_type": "normal"}, "versioned_object.name": "PortBinding", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"}],
"created_at": "2026-12-02T13:59:53Z", "data_plane_status": null, "description": "", "device_id": "%08[5]x-f004-470a-9b2d-82f46e9264d7",
"device_owner": "compute:nova", "dhcp_options": [], "distributed_bindings": [], "dns": null,
"fixed_ips": [{"versioned_object.data": {"ip_address": "10.77.%[6]d.%[7]d", "network_id": %[4]q, "port_id": %[1]q, "subnet_id": %[8]q},
 "versioned_object.name": "IPAllocation", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"}],
"id": %[1]q, "mac_address": %[9]q, "name": "bench-%[5]d", "network_id": %[4]q, "project_id": "demo",
"qos_network_policy_id": null, "qos_policy_id": null, "revision_number": 2,
"security": {"versioned_object.data": {"id": %[1]q, "port_security_enabled": true}, "versioned_object.name": "PortSecurity", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"},
"security_group_ids": [%[10]q], "status": "DOWN", "updated_at": "2026-12-02T13:59:53Z"},
"versioned_object.name": "Port", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.7"}`,
		id, heapHost, heapSeg, heapNet, i, i/250, i%250+2, heapSubnet, scaleMAC(i), heapSG)
}

func heapRuleJSON(id, dir, eth string, remote bool) string {
	rg := ""
	if remote {
		rg = fmt.Sprintf(`"remote_group_id": %q, `, heapSG)
	}
	return fmt.Sprintf(`{"versioned_object.data": {"created_at": "2026-12-02T13:59:52Z", "direction": %q, "ethertype": %q, "id": %q,
"normalized_cidr": null, "project_id": "demo", %s"revision_number": 0, "security_group_id": %q, "updated_at": "2026-12-02T13:59:52Z"},
"versioned_object.name": "SecurityGroupRule", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.2"}`,
		dir, eth, id, rg, heapSG)
}

var heapRules = []string{
	heapRuleJSON("a445ecba-e6f1-4092-9a6c-ba420600051a", "egress", "IPv6", false),
	heapRuleJSON("afea707c-ce60-41ad-b907-ad3ddb71c400", "ingress", "IPv4", true),
	heapRuleJSON("b6d1bd4e-3f55-4f0f-9d39-2b7d7b39a1f2", "egress", "IPv4", false),
	heapRuleJSON("c2a4e1d0-77aa-4c41-8f0e-5d2f0a1e9b33", "ingress", "IPv6", true),
}

func heapSGJSON() string {
	return fmt.Sprintf(`{"versioned_object.data": {"created_at": "2026-12-02T13:59:52Z", "description": "Default security group", "id": %q,
"is_default": true, "name": "default", "project_id": "demo", "revision_number": 1, "rules": [%s], "shared": false, "stateful": true,
"updated_at": "2026-12-02T13:59:52Z"}, "versioned_object.name": "SecurityGroup", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.5"}`,
		heapSG, heapRules[0]+","+heapRules[1]+","+heapRules[2]+","+heapRules[3])
}

func heapNetJSON() string {
	return fmt.Sprintf(`{"versioned_object.data": {"admin_state_up": true, "created_at": "2026-12-02T13:59:52Z", "description": "", "dns_domain": null,
"id": %[1]q, "mtu": 1450, "name": "vxnet", "project_id": "demo", "qos_policy_id": null, "revision_number": 1,
"security": {"versioned_object.data": {"id": %[1]q, "port_security_enabled": true}, "versioned_object.name": "NetworkPortSecurity", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"},
"segments": [{"versioned_object.data": {"created_at": "2026-12-02T13:59:52Z", "hosts": [], "id": %[2]q, "is_dynamic": false, "network_id": %[1]q,
 "network_type": "vxlan", "revision_number": 0, "segment_index": 0, "segmentation_id": 892, "updated_at": "2026-12-02T13:59:52Z"},
 "versioned_object.name": "NetworkSegment", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.0"}],
"shared": false, "status": "ACTIVE", "updated_at": "2026-12-02T13:59:52Z"}, "versioned_object.name": "Network", "versioned_object.namespace": "versionedobjects", "versioned_object.version": "1.1"}`,
		heapNet, heapSeg)
}

// wireServer is neutron.RPC over the objects above in wire form: bulk_pull
// by id, security_group_ids or security_group_id; update_device_list
// records the ports reported up; tunnel_sync knows no peer.
type wireServer struct {
	mu    sync.Mutex
	objs  map[string][]wireObj // by resource type
	up    map[string]bool
	calls map[string]int
}

type wireObj struct {
	id, sg string // sg: the port's group, or the rule's
	raw    string
}

func newWireServer(n int) *wireServer {
	s := &wireServer{objs: map[string][]wireObj{}, up: map[string]bool{}, calls: map[string]int{}}
	for i := 0; i < n; i++ {
		s.objs[neutron.TypePort] = append(s.objs[neutron.TypePort], wireObj{heapPortID(i), heapSG, heapPortJSON(i)})
	}
	s.objs[neutron.TypeNetwork] = []wireObj{{heapNet, "", heapNetJSON()}}
	s.objs[neutron.TypeSecurityGroup] = []wireObj{{heapSG, "", heapSGJSON()}}
	for _, r := range heapRules {
		var v struct {
			Data struct {
				ID string `json:"id"`
			} `json:"versioned_object.data"`
		}
		_ = json.Unmarshal([]byte(r), &v)
		s.objs[neutron.TypeSecurityGroupRule] = append(s.objs[neutron.TypeSecurityGroupRule], wireObj{v.Data.ID, heapSG, r})
	}
	return s
}

func (s *wireServer) Call(_ context.Context, _ neutron.Target, method string, args any, _ time.Duration) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	a, _ := args.(map[string]any)
	switch method {
	case "bulk_pull":
		rtype, _ := a["resource_type"].(string)
		f, _ := a["filter_kwargs"].(neutron.Filter)
		out := []byte{'['}
		for _, o := range s.objs[rtype] {
			if ids, ok := f["id"]; ok && !slices.Contains(ids, o.id) {
				continue
			}
			if sgs, ok := f["security_group_ids"]; ok && !slices.Contains(sgs, o.sg) {
				continue
			}
			if sgs, ok := f["security_group_id"]; ok && !slices.Contains(sgs, o.sg) {
				continue
			}
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, o.raw...)
		}
		return append(out, ']'), nil
	case "update_device_list":
		up, _ := a["devices_up"].([]string)
		for _, d := range up {
			s.up[d] = true
		}
		return json.Marshal(map[string]any{"devices_up": up, "failed_devices_up": []string{}, "devices_down": []any{}, "failed_devices_down": []string{}})
	case "tunnel_sync":
		return json.RawMessage(`{"tunnels": []}`), nil
	}
	return nil, fmt.Errorf("wireServer: no %s", method)
}

func (s *wireServer) Cast(context.Context, neutron.Target, string, any) error { return nil }

func (s *wireServer) allUp(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.up) == n
}

// TestScaleHeapNeutron reports the live heap at N ports in the bench's
// state (see above): in sync, then without the agent and its reconcilers,
// then without the neutron cache too (the fake server and switch stay).
//
//	OVSAGENT_SCALE_PORTS=1000 go test ./internal/agent -run TestScaleHeapNeutron -v
func TestScaleHeapNeutron(t *testing.T) {
	if os.Getenv("OVSAGENT_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096 // a finer profile than the default 512 KiB
	}
	n := scalePorts()
	ws, sw, fl := newWireServer(n), newFakeSwitch(true), newRecFlows()
	client := neutron.NewClient(ws, heapHost)
	var ag *Agent
	var srv *NeutronServer
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	cache := neutron.NewCache(neutron.CacheOptions{OnEvent: func(ev neutron.Event) {
		mu.Lock()
		a := ag
		mu.Unlock()
		if a != nil {
			NotifyFromCache(a, heapHost, ev)
			srv.WarmFromEvent(ctx, ev)
		}
	}})
	cache.SetPuller(client)
	srv = &NeutronServer{Client: client, Cache: cache, Host: heapHost}
	opt := testOpts(true)
	opt.Host = heapHost
	opt.Pipeline.FirewallDriver, opt.Pipeline.EnableSecurityGroup = "openvswitch", true
	opt.BatchWindow = 10 * time.Millisecond
	opt.FDBWait = 2 * time.Second
	synced := make(chan struct{}, 1)
	a := newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: srv, Cache: srv, Log: testLogger(),
		AfterBatch: func(in bool) {
			if in {
				select {
				case synced <- struct{}{}:
				default:
				}
			}
		}})
	mu.Lock()
	ag = a
	mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	sw.snapshot()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		id := heapPortID(i)
		sw.plug(id, "tap"+id[:11], scaleMAC(i))
	}
	deadline := time.After(180 * time.Second)
	for !(ws.allUp(n) && a.InSync()) {
		select {
		case <-synced:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("not in sync with all %d ports up after 180 s", n)
		}
	}
	wire := time.Since(t0)
	flows := fl.flows()
	in := liveHeap()
	// What the bench's idle minute leaves: the agent returns free memory
	// to the OS once idle (idleRelease); the test process's anonymous
	// resident set then is the heap in use, GC metadata and stacks (the
	// fakes' included).
	debug.FreeOSMemory()
	anon := procStatus("RssAnon:")
	rss := procRSS()
	writeHeap(t)
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	ag = nil
	mu.Unlock()
	a, fl = nil, nil
	noAgent := liveHeap()
	srv, cache, client = nil, nil, nil
	none := liveHeap()
	runtime.KeepAlive(sw)
	runtime.KeepAlive(ws)
	t.Logf("%d ports, %d flows: wired in %v; heap in sync: alloc %.2f MiB, inuse %.2f MiB; agent + reconcilers %.2f MiB, neutron cache %.2f MiB; RssAnon after FreeOSMemory %s; %s",
		n, flows, wire.Round(time.Millisecond), mib(in.HeapAlloc), mib(in.HeapInuse),
		mib(in.HeapAlloc-noAgent.HeapAlloc), mib(noAgent.HeapAlloc-none.HeapAlloc), anon, rss)
}

// procStatus is one field of /proc/self/status ("" if unreadable).
func procStatus(field string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
