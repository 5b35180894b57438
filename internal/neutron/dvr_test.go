package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
)

// The DVR calls decode the replies the 2026.2 server gave refenv/dvr.sh rpc (host
// refhv-2026-2-dvr, subnet A, its router interface) and send what the reference sends.
func TestDVRCallsDecodeServerReplies(t *testing.T) {
	b, err := os.ReadFile("testdata/dvr/2026.2-replies.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	answers := map[string]json.RawMessage{
		"get_dvr_mac_address_by_host": rep["get_dvr_mac_address_by_host"],
		"get_dvr_mac_address_list":    rep["get_dvr_mac_address_list"],
		"get_ports_on_host_by_subnet": rep["get_ports_on_host_by_subnet"],
		"get_subnet_for_dvr":          rep["get_subnet_for_dvr(fixed_ips=PORT_ID's)"],
		"get_ports":                   rep["get_ports(filters={id: [PORT_ID]})"],
	}
	f := &fakeRPC{answer: func(c sentCall) (any, error) { return answers[c.Method], nil }}
	c := NewClient(f, "refhv-2026-2-dvr")
	ctx := context.Background()

	me, err := c.GetDVRMACAddressByHost(ctx)
	if err != nil || me.MAC != "FA-16-3F-8E-8E-11" || me.Host != "refhv-2026-2-dvr" {
		t.Fatalf("by host: %+v %v", me, err)
	}
	all, err := c.GetDVRMACAddressList(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %+v %v", all, err)
	}
	ports, err := c.GetPortsOnHostBySubnet(ctx, "90dc9bb5-2d6b-4c84-a088-9f9a3625b0b2")
	if err != nil || len(ports) != 1 || ports[0].DeviceOwner != "compute:nova" || ports[0].MAC != "fa:16:3e:a2:3b:20" {
		t.Fatalf("ports on host: %+v %v", ports, err)
	}
	qr, err := c.GetPorts(ctx, []string{"9ad9633a-e6d4-43c4-9f25-6ecc4bfaa404"})
	if err != nil || len(qr) != 1 || qr[0].DeviceOwner != "network:router_interface_distributed" || len(qr[0].FixedIPs) != 1 {
		t.Fatalf("get_ports: %+v %v", qr, err)
	}
	sub, ok, err := c.GetSubnetForDVR(ctx, qr[0].FixedIPs[0].SubnetID, qr[0].FixedIPs)
	if err != nil || !ok || sub.GatewayMAC == nil || *sub.GatewayMAC != qr[0].MAC || sub.CIDR != "10.120.1.0/24" || sub.IPVersion != 4 || *sub.GatewayIP != "10.120.1.1" {
		t.Fatalf("subnet: %+v %v %v", sub, ok, err)
	}

	want := map[string]map[string]any{
		"get_dvr_mac_address_by_host": {"host": "refhv-2026-2-dvr"},
		"get_dvr_mac_address_list":    {},
		"get_ports_on_host_by_subnet": {"host": "refhv-2026-2-dvr", "subnet": "90dc9bb5-2d6b-4c84-a088-9f9a3625b0b2"},
		"get_ports":                   {"filters": map[string]any{"id": []any{"9ad9633a-e6d4-43c4-9f25-6ecc4bfaa404"}}},
		"get_subnet_for_dvr": {"subnet": "90dc9bb5-2d6b-4c84-a088-9f9a3625b0b2",
			"fixed_ips": []any{map[string]any{"subnet_id": "90dc9bb5-2d6b-4c84-a088-9f9a3625b0b2", "ip_address": "10.120.1.1"}}},
	}
	for _, call := range f.calls {
		if call.Target != (Target{Topic: "q-plugin", Version: "1.0"}) {
			t.Errorf("%s target %+v, want q-plugin 1.0 without namespace", call.Method, call.Target)
		}
		if !reflect.DeepEqual(call.Args, want[call.Method]) {
			t.Errorf("%s args %v, want %v", call.Method, call.Args, want[call.Method])
		}
	}
	if len(f.calls) != len(want) {
		t.Errorf("%d calls, want %d", len(f.calls), len(want))
	}
}

// The csnat port's call sends fixed_ips null; an empty reply (subnet or gateway gone) is
// not an error but not a subnet either; a MAC-less by-host reply is a bad reply.
func TestDVREdgeReplies(t *testing.T) {
	var sent map[string]any
	f := &fakeRPC{answer: func(c sentCall) (any, error) { sent = c.Args; return json.RawMessage(`{}`), nil }}
	c := NewClient(f, "hv1")
	ctx := context.Background()
	if _, ok, err := c.GetSubnetForDVR(ctx, "s1", nil); err != nil || ok {
		t.Fatalf("empty reply: ok=%v err=%v", ok, err)
	}
	if v, present := sent["fixed_ips"]; !present || v != nil {
		t.Fatalf("fixed_ips sent as %v (present %v), want null", v, present)
	}
	if _, err := c.GetDVRMACAddressByHost(ctx); !errors.Is(err, ErrBadReply) {
		t.Fatalf("no MAC: %v", err)
	}
	f.answer = func(sentCall) (any, error) { return json.RawMessage(`{"host": 5}`), nil }
	if _, err := c.GetDVRMACAddressList(ctx); !errors.Is(err, ErrBadReply) {
		t.Fatalf("bad list: %v", err)
	}
}
