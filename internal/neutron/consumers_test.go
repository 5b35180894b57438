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
)

type recHandler struct {
	mu     sync.Mutex
	got    []string
	fdb    []FDBEntries
	upd    []FDBUpdate
	tunnel []TunnelEvent
}

func (h *recHandler) note(s string) { h.mu.Lock(); h.got = append(h.got, s); h.mu.Unlock() }
func (h *recHandler) TunnelUpdate(_ context.Context, ev TunnelEvent) error {
	h.note("tunnel_update")
	h.tunnel = append(h.tunnel, ev)
	return nil
}
func (h *recHandler) TunnelDelete(_ context.Context, ev TunnelEvent) error {
	h.note("tunnel_delete")
	h.tunnel = append(h.tunnel, ev)
	return nil
}
func (h *recHandler) FDBAdd(_ context.Context, e FDBEntries) error {
	h.note("add")
	h.fdb = append(h.fdb, e)
	return nil
}
func (h *recHandler) FDBRemove(_ context.Context, e FDBEntries) error {
	h.note("remove")
	h.fdb = append(h.fdb, e)
	return nil
}
func (h *recHandler) FDBUpdate(_ context.Context, u FDBUpdate) error {
	h.note("update")
	h.upd = append(h.upd, u)
	return nil
}

// memServer records Serve registrations and dispatches like oslo would (method lookup
// only; version compatibility is oslo's job).
type memServer struct{ topics map[string][]Endpoint }

func (m *memServer) Serve(topic string, eps ...Endpoint) error {
	if m.topics == nil {
		m.topics = map[string][]Endpoint{}
	}
	m.topics[topic] = eps
	return nil
}

func (m *memServer) deliver(t *testing.T, topic, method string, args json.RawMessage) error {
	t.Helper()
	for _, ep := range m.topics[topic] {
		if h, ok := ep.Methods[method]; ok {
			_, err := h(context.Background(), &Request{Method: method, Args: args, Version: "1.0"})
			return err
		}
	}
	t.Fatalf("no %s on %s", method, topic)
	return nil
}

func TestSubscriptions(t *testing.T) {
	srv := &memServer{}
	cfg := ConsumerConfig{Host: "h", Cache: NewCache(CacheOptions{}), Handler: &recHandler{}, L2Population: true}
	if err := cfg.Serve(srv); err != nil {
		t.Fatal(err)
	}
	var topics []string
	for tpc, eps := range srv.topics {
		topics = append(topics, tpc+"@"+eps[0].Version)
	}
	sort.Strings(topics)
	want := []string{
		"neutron-vo-AddressGroup-1.2@1.1", "neutron-vo-Network-1.1@1.1", "neutron-vo-Port-1.7@1.1",
		"neutron-vo-SecurityGroup-1.5@1.1", "neutron-vo-SecurityGroupRule-1.2@1.1", "neutron-vo-Subnet-1.1@1.1",
		"q-agent-notifier-l2population-update@1.7", "q-agent-notifier-tunnel-delete@1.7", "q-agent-notifier-tunnel-update@1.7",
	}
	if !reflect.DeepEqual(topics, want) {
		t.Fatalf("topics %v\nwant %v", topics, want)
	}
	cfg.L2Population = false
	for _, s := range cfg.Subscriptions() {
		if s.Topic == TopicL2PopUpdate {
			t.Fatal("l2pop consumed with l2_population off")
		}
	}
}

func TestConsumersCapturedMessages(t *testing.T) {
	rec := &recorder{}
	h := &recHandler{}
	srv := &memServer{}
	cache := NewCache(CacheOptions{OnEvent: rec.add})
	cfg := ConsumerConfig{Host: "hv1", Cache: cache, Handler: h, L2Population: true}
	if err := cfg.Serve(srv); err != nil {
		t.Fatal(err)
	}
	// Every captured push feeds the cache through its topic.
	for _, f := range captureFiles(t, "neutron-vo-*.json") {
		c := loadCapture(t, f)
		topic, _, _ := strings.Cut(f, "_fanout")
		for _, ex := range append(c.Examples, c.DeliverExample...) {
			if err := srv.deliver(t, topic, "push", ex.Decoded.Args); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	if cache.Len(TypeNetwork) == 0 || cache.Len(TypeSubnet) == 0 || cache.Len(TypeSecurityGroup) != 1 || cache.Len(TypeSecurityGroupRule) < 5 {
		t.Fatalf("cache: net %d subnet %d sg %d sgr %d", cache.Len(TypeNetwork), cache.Len(TypeSubnet), cache.Len(TypeSecurityGroup), cache.Len(TypeSecurityGroupRule))
	}
	if len(rec.take()) == 0 {
		t.Fatal("no events")
	}

	for _, f := range []string{"q-agent-notifier-l2population-update_fanout__add_fdb_entries.json", "q-agent-notifier-l2population-update_fanout__remove_fdb_entries.json", "q-agent-notifier-tunnel-update_fanout__tunnel_update.json"} {
		c := loadCapture(t, f)
		for _, ex := range c.Examples {
			if err := srv.deliver(t, TopicL2PopUpdate, ex.Decoded.Method, ex.Decoded.Args); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	add := h.fdb[0]["a60fae45-90d8-4e51-94da-69cb0ea8ca98"]
	if add.NetworkType != "vxlan" || *add.SegmentID != 892 || len(add.Ports["127.0.0.1"]) != 2 ||
		!add.Ports["127.0.0.1"][0].IsFlooding() || add.Ports["127.0.0.1"][1] != (PortInfo{MAC: "fa:16:3e:18:c9:a5", IP: "10.100.0.72"}) {
		t.Fatalf("add fdb %+v", add)
	}
	if h.tunnel[0] != (TunnelEvent{TunnelIP: "127.0.0.1", TunnelType: "vxlan"}) {
		t.Fatalf("tunnel %+v", h.tunnel)
	}

	// update_fdb_entries chg_ip and the host filter.
	chg := `{"fdb_entries": {"chg_ip": {"net1": {"10.0.0.9": {"before": [["fa:16:3e:00:00:01", "10.1.0.1"]], "after": [["fa:16:3e:00:00:01", "10.1.0.2"]]}}}}}`
	if err := srv.deliver(t, TopicL2PopUpdate, "update_fdb_entries", json.RawMessage(chg)); err != nil {
		t.Fatal(err)
	}
	u := h.upd[0].ChgIP["net1"]["10.0.0.9"]
	if u.Before[0].IP != "10.1.0.1" || u.After[0].IP != "10.1.0.2" {
		t.Fatalf("chg_ip %+v", h.upd[0])
	}
	n := len(h.got)
	other := `{"host": "someone-else", "fdb_entries": {"net1": {"segment_id": 5, "network_type": "vxlan", "ports": {}}}}`
	mine := `{"host": "hv1", "fdb_entries": {"net1": {"segment_id": 5, "network_type": "vxlan", "ports": {"10.0.0.9": [{"mac_address": "fa:16:3e:00:00:01", "ip_address": "10.1.0.1"}]}}}}`
	for _, m := range []string{"add_fdb_entries", "remove_fdb_entries"} {
		if err := srv.deliver(t, TopicL2PopUpdate, m, json.RawMessage(other)); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.deliver(t, TopicL2PopUpdate, "update_fdb_entries", json.RawMessage(`{"host": "x", "fdb_entries": {}}`)); err != nil {
		t.Fatal(err)
	}
	if len(h.got) != n {
		t.Fatalf("messages for another host delivered: %v", h.got[n:])
	}
	if err := srv.deliver(t, TopicL2PopUpdate, "add_fdb_entries", json.RawMessage(mine)); err != nil || len(h.got) != n+1 {
		t.Fatalf("own host: %v", err)
	}
}

func TestConsumersBadArgs(t *testing.T) {
	h := &recHandler{}
	srv := &memServer{}
	cache := NewCache(CacheOptions{})
	var pushErrs int
	cfg := ConsumerConfig{Host: "hv1", Cache: cache, Handler: h, L2Population: true, OnPushError: func(string, error) { pushErrs++ }}
	if err := cfg.Serve(srv); err != nil {
		t.Fatal(err)
	}
	bad := []struct{ topic, method, args string }{
		{TopicTunnelUpdate, "tunnel_update", `{"tunnel_ip": "1.2.3.4"}`},
		{TopicTunnelUpdate, "tunnel_update", `{"tunnel_ip": "nope", "tunnel_type": "vxlan"}`},
		{TopicTunnelDelete, "tunnel_delete", `{"tunnel_ip": 5, "tunnel_type": "vxlan"}`},
		{TopicL2PopUpdate, "add_fdb_entries", `{"fdb_entries": {"n": {"segment_id": 1, "network_type": "vxlan", "ports": {"1.1.1.1": [["only-mac"]]}}}}`},
		{TopicL2PopUpdate, "add_fdb_entries", `{"fdb_entries": {"n": {"segment_id": 1, "ports": {}}}}`},
		{TopicL2PopUpdate, "remove_fdb_entries", `{"fdb_entries": []}`},
		{TopicL2PopUpdate, "update_fdb_entries", `{"fdb_entries": {"chg_ip": {"n": {"1.1.1.1": {"before": 3}}}}}`},
		{PushTopic(TypePort), "push", `{"event_type": "updated", "resource_list": [{"versioned_object.name": "Port", "versioned_object.version": "3.0", "versioned_object.data": {"id": "x"}}]}`},
		{PushTopic(TypePort), "push", `{"event_type": "updated", "resource_list": [{"versioned_object.name": "Network", "versioned_object.version": "1.1", "versioned_object.data": {"id": "x"}}]}`},
		{PushTopic(TypePort), "push", `not json`},
	}
	for _, b := range bad {
		err := srv.deliver(t, b.topic, b.method, json.RawMessage(b.args))
		if !errors.Is(err, ErrBadArgs) {
			t.Errorf("%s %s: err %v, want ErrBadArgs", b.method, b.args, err)
		}
	}
	if len(h.got) != 0 || cache.Len(TypePort) != 0 || cache.Len(TypeNetwork) != 0 {
		t.Fatalf("bad messages had effects: %v", h.got)
	}
	if pushErrs != 3 {
		t.Errorf("OnPushError called %d times", pushErrs)
	}
	// A good message after bad ones still works.
	if err := srv.deliver(t, TopicTunnelUpdate, "tunnel_update", json.RawMessage(`{"tunnel_ip": "10.0.0.2", "tunnel_type": "geneve"}`)); err != nil || len(h.got) != 1 {
		t.Fatalf("good after bad: %v %v", err, h.got)
	}
}

// The fast path for [mac, ip] entries decodes what encoding/json decodes.
func TestPortInfoFastPathMatchesJSON(t *testing.T) {
	for _, in := range []string{
		`["fa:16:3e:00:00:01", "10.0.0.1"]`, `[ "m" ,"i" ]`, `["m", "i", "x", 5]`, `["m\"q", "i"]`,
		`["m", "i\u0041"]`, `["", ""]`, `["m"]`, `[]`, `["m", 5]`, `[5, "i"]`, `{"mac_address": "m", "ip_address": "i"}`,
	} {
		var got PortInfo
		gerr := json.Unmarshal([]byte(in), &got)
		var want PortInfo
		var l []string
		werr := json.Unmarshal([]byte(in), &l)
		if werr == nil && len(l) >= 2 {
			want = PortInfo{MAC: l[0], IP: l[1]}
		} else if in[0] == '{' {
			want, werr = PortInfo{MAC: "m", IP: "i"}, nil
		} else if werr == nil {
			werr = errors.New("short")
		}
		if (gerr == nil) != (werr == nil) || got != want {
			t.Errorf("%s: got %+v %v, want %+v %v", in, got, gerr, want, werr)
		}
	}
}
