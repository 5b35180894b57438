package neutron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
)

// Topics the agent consumes besides the neutron-vo-* push topics.
const (
	TopicTunnelUpdate = "q-agent-notifier-tunnel-update"
	TopicTunnelDelete = "q-agent-notifier-tunnel-delete"
	TopicL2PopUpdate  = "q-agent-notifier-l2population-update"
)

// Endpoint versions the reference exposes.
const (
	AgentEndpointVersion = "1.7" // OVSNeutronAgent.target
	PushEndpointVersion  = "1.1" // ResourcesPushRpcCallback.target
)

// TunnelEvent is tunnel_update / tunnel_delete.
type TunnelEvent struct {
	TunnelIP   string
	TunnelType string
}

// PortInfo is one l2pop FDB entry, [mac, ip] on the wire.
type PortInfo struct {
	MAC string
	IP  string
}

// FloodingEntry is the l2pop entry that means "flood BUM traffic to this agent".
var FloodingEntry = PortInfo{MAC: "00:00:00:00:00:00", IP: "0.0.0.0"}

// IsFlooding reports whether p is the FLOODING_ENTRY.
func (p PortInfo) IsFlooding() bool { return p == FloodingEntry }

// UnmarshalJSON accepts [mac, ip] (also [mac, ip, ...]) and {"mac_address", "ip_address"}.
func (p *PortInfo) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			MAC string `json:"mac_address"`
			IP  string `json:"ip_address"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return fmt.Errorf("fdb entry: %w", err)
		}
		p.MAC, p.IP = o.MAC, o.IP
		return nil
	}
	if mac, ip, ok := plainPair(b); ok {
		p.MAC, p.IP = mac, ip
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("fdb entry: %w", err)
	}
	if len(l) < 2 {
		return fmt.Errorf("fdb entry: want [mac, ip], got %d elements", len(l))
	}
	p.MAC, p.IP = l[0], l[1]
	return nil
}

// plainPair reads ["mac", "ip"] whose two strings have no escapes, the
// form the server sends, without a decoder per entry (an l2pop message holds
// one entry per remote port). b is valid JSON (the message was validated
// whole); anything else is left to encoding/json.
func plainPair(b []byte) (mac, ip string, ok bool) {
	str := func(b []byte) (string, []byte, bool) {
		b = bytes.TrimLeft(b, " \t\r\n")
		if len(b) == 0 || b[0] != '"' {
			return "", nil, false
		}
		end := bytes.IndexByte(b[1:], '"')
		if end < 0 || bytes.IndexByte(b[1:1+end], '\\') >= 0 {
			return "", nil, false
		}
		return string(b[1 : 1+end]), bytes.TrimLeft(b[2+end:], " \t\r\n"), true
	}
	if len(b) == 0 || b[0] != '[' {
		return "", "", false
	}
	mac, rest, ok := str(b[1:])
	if !ok || len(rest) == 0 || rest[0] != ',' {
		return "", "", false
	}
	ip, rest, ok = str(rest[1:])
	if !ok || len(rest) == 0 || rest[0] != ']' {
		return "", "", false
	}
	return mac, ip, true
}

// MarshalJSON renders the wire form [mac, ip].
func (p PortInfo) MarshalJSON() ([]byte, error) { return json.Marshal([]string{p.MAC, p.IP}) }

// NetworkFDB is the FDB of one network: its segment and, per remote agent tunnel IP,
// the entries.
type NetworkFDB struct {
	SegmentID   *int                  `json:"segment_id"`
	NetworkType string                `json:"network_type"`
	Ports       map[string][]PortInfo `json:"ports"`
}

// FDBEntries is add_fdb_entries / remove_fdb_entries' fdb_entries, by network id.
type FDBEntries map[string]NetworkFDB

// IPChange is one agent's before/after entries of an update_fdb_entries chg_ip.
type IPChange struct {
	Before []PortInfo `json:"before"`
	After  []PortInfo `json:"after"`
}

// FDBUpdate is update_fdb_entries' fdb_entries: chg_ip[network id][agent ip].
type FDBUpdate struct {
	ChgIP map[string]map[string]IPChange `json:"chg_ip"`
}

// NotificationHandler receives the server's notifications (other than pushes, which feed the Cache).
// Methods run on the consumer goroutine and should hand off quickly; an error is logged
// and counted by the transport for that message only.
type NotificationHandler interface {
	TunnelUpdate(ctx context.Context, ev TunnelEvent) error
	TunnelDelete(ctx context.Context, ev TunnelEvent) error
	FDBAdd(ctx context.Context, entries FDBEntries) error
	FDBRemove(ctx context.Context, entries FDBEntries) error
	FDBUpdate(ctx context.Context, upd FDBUpdate) error
}

// ConsumerConfig wires the consumers.
type ConsumerConfig struct {
	Host    string // CONF.host: l2pop messages for another host are ignored
	Cache   *Cache // fed by the push topics; nil: push topics not consumed
	Handler NotificationHandler
	// L2Population enables the l2population topic ([agent] l2_population).
	L2Population bool
	// OnPushError, if set, sees pushes the cache could not decode (besides the error
	// returned to the transport).
	OnPushError func(rtype string, err error)
	// Versions, if set, chooses the push topics of the negotiated types
	// (neutron-vo-<type>-<PushVersion>) and, when a version changes, Serve adds that
	// topic and then calls OnVersions (ask for a report carrying the new versions: the
	// queue must be bound before the server pushes at that version only).
	Versions   *Negotiator
	OnVersions func()
}

// Subscription is one topic and its endpoints.
type Subscription struct {
	Topic     string
	Endpoints []Endpoint
}

// ErrBadArgs is wrapped by handler errors for arguments that do not decode.
var ErrBadArgs = errors.New("neutron: bad arguments")

// Subscriptions returns the topics and endpoints the reference OVS agent consumes.
func (cfg ConsumerConfig) Subscriptions() []Subscription {
	var subs []Subscription
	if cfg.Cache != nil {
		for _, rt := range CachedTypes {
			v := cfg.Versions.PushVersion(rt)
			subs = append(subs, Subscription{Topic: PushTopicAt(rt, v), Endpoints: []Endpoint{cfg.pushEndpoint(rt, v)}})
		}
	}
	if cfg.Handler != nil {
		ep := cfg.agentEndpoint()
		subs = append(subs,
			Subscription{Topic: TopicTunnelUpdate, Endpoints: []Endpoint{ep}},
			Subscription{Topic: TopicTunnelDelete, Endpoints: []Endpoint{ep}})
		if cfg.L2Population {
			subs = append(subs, Subscription{Topic: TopicL2PopUpdate, Endpoints: []Endpoint{ep}})
		}
	}
	return subs
}

// Serve registers every subscription on srv, and with Versions the push topic of each
// version agreed later.
func (cfg ConsumerConfig) Serve(srv Server) error {
	var mu sync.Mutex
	served := map[string]bool{}
	serve := func(topic string, eps ...Endpoint) error {
		mu.Lock()
		defer mu.Unlock()
		if served[topic] {
			return nil
		}
		if err := srv.Serve(topic, eps...); err != nil {
			return fmt.Errorf("neutron: consume %s: %w", topic, err)
		}
		served[topic] = true
		return nil
	}
	if cfg.Versions != nil && cfg.Cache != nil {
		// Registered before the first subscriptions, so no change falls between them.
		// The topic of the version reported before stays served: the server pushes it
		// until it has the new report, and other agents may still report it.
		// The new topic is served before the pull that proved the version returns:
		// the server always pushes at its own version, and an API process may push
		// only there for up to a minute after the report (its version set is re-read
		// from the database every 60 s; the report's fanout reaches RPC workers only),
		// so the objects that pull brought must not change unseen meanwhile. Serve
		// does not wait for a broker that is down.
		cfg.Versions.OnChange(func(rtype, version string) {
			if !slices.Contains(CachedTypes, rtype) {
				return
			}
			topic := PushTopicAt(rtype, version)
			if err := serve(topic, cfg.pushEndpoint(rtype, version)); err != nil {
				slog.Error("neutron: push topic of the agreed version not consumed; the version stays unreported", "topic", topic, "err", err)
				return
			}
			if cfg.OnVersions != nil {
				go cfg.OnVersions()
			}
		})
	}
	for _, s := range cfg.Subscriptions() {
		if err := serve(s.Topic, s.Endpoints...); err != nil {
			return err
		}
	}
	return nil
}

// pushEndpoint consumes neutron-vo-<rtype>-<version>. The version goes with each push into
// the cache: while two versions' topics are served, the server pushes one change on both,
// and the older copy (without the newer fields, e.g. a Port's hints) must not replace the
// newer one of the same revision (Cache.ApplyPushAt).
func (cfg ConsumerConfig) pushEndpoint(rtype, version string) Endpoint {
	return Endpoint{Version: PushEndpointVersion, Methods: map[string]Handler{
		"push": func(ctx context.Context, req *Request) (any, error) {
			p, err := DecodePush(req.Args)
			if err != nil {
				if cfg.OnPushError != nil {
					cfg.OnPushError(rtype, err)
				}
				return nil, fmt.Errorf("%w: %s push: %v", ErrBadArgs, rtype, err)
			}
			for _, r := range p.Resources {
				if r.ResourceType() != rtype {
					err := fmt.Errorf("%w: %s object on the %s push topic", ErrBadArgs, r.ResourceType(), rtype)
					if cfg.OnPushError != nil {
						cfg.OnPushError(rtype, err)
					}
					return nil, err
				}
			}
			cfg.Cache.ApplyPushAt(p, version)
			if p.EventType == EventUpdated {
				for _, r := range p.Resources {
					cfg.Versions.Saw(r)
				}
			}
			return nil, nil
		},
	}}
}

func decodeArgs(req *Request, out any) error {
	if err := json.Unmarshal(req.Args, out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadArgs, req.Method, err)
	}
	return nil
}

// forOtherHost reports whether a host kwarg names another agent.
func (cfg ConsumerConfig) forOtherHost(host *string) bool {
	return host != nil && *host != "" && *host != cfg.Host
}

func (cfg ConsumerConfig) agentEndpoint() Endpoint {
	h := cfg.Handler
	tunnel := func(deliver func(context.Context, TunnelEvent) error) Handler {
		return func(ctx context.Context, req *Request) (any, error) {
			var a struct {
				TunnelIP   string `json:"tunnel_ip"`
				TunnelType string `json:"tunnel_type"`
			}
			if err := decodeArgs(req, &a); err != nil {
				return nil, err
			}
			if a.TunnelType == "" {
				return nil, fmt.Errorf("%w: %s: no tunnel_type", ErrBadArgs, req.Method)
			}
			if net.ParseIP(a.TunnelIP) == nil {
				return nil, fmt.Errorf("%w: %s: bad tunnel_ip %q", ErrBadArgs, req.Method, a.TunnelIP)
			}
			return nil, deliver(ctx, TunnelEvent{TunnelIP: a.TunnelIP, TunnelType: a.TunnelType})
		}
	}
	fdb := func(deliver func(context.Context, FDBEntries) error) Handler {
		return func(ctx context.Context, req *Request) (any, error) {
			// The host first: entries meant for another agent are not decoded.
			var h struct {
				Host *string `json:"host"`
			}
			if err := decodeArgs(req, &h); err != nil {
				return nil, err
			}
			if cfg.forOtherHost(h.Host) {
				return nil, nil
			}
			var a struct {
				FDB FDBEntries `json:"fdb_entries"`
			}
			if err := decodeArgs(req, &a); err != nil {
				return nil, err
			}
			if err := a.FDB.validate(); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrBadArgs, req.Method, err)
			}
			return nil, deliver(ctx, a.FDB)
		}
	}
	return Endpoint{Version: AgentEndpointVersion, Methods: map[string]Handler{
		"tunnel_update":      tunnel(h.TunnelUpdate),
		"tunnel_delete":      tunnel(h.TunnelDelete),
		"add_fdb_entries":    fdb(h.FDBAdd),
		"remove_fdb_entries": fdb(h.FDBRemove),
		"update_fdb_entries": func(ctx context.Context, req *Request) (any, error) {
			var a struct {
				FDB  FDBUpdate `json:"fdb_entries"`
				Host *string   `json:"host"`
			}
			if err := decodeArgs(req, &a); err != nil {
				return nil, err
			}
			if cfg.forOtherHost(a.Host) {
				return nil, nil
			}
			return nil, h.FDBUpdate(ctx, a.FDB)
		},
	}}
}

func (e FDBEntries) validate() error {
	for netID, n := range e {
		if n.NetworkType == "" {
			return fmt.Errorf("network %s: no network_type", netID)
		}
	}
	return nil
}

// Networks returns the network ids of e in order.
func (e FDBEntries) Networks() []string {
	out := make([]string, 0, len(e))
	for id := range e {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
