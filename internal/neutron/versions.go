package neutron

import (
	"errors"
	"log/slog"
	"maps"
	"sync"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// Resource versions per server.
//
// The server pushes every resource at each version a live agent reported in
// resource_versions, plus its own (neutron.api.rpc.callbacks.version_manager), one
// version after the other in one loop (resources_rpc.ResourcesPushRpcApi._push). A
// version newer than the server's class makes obj_to_primitive raise
// InvalidTargetVersion inside that loop, which ends it: the versions after it in the
// set's (hash) order are not pushed either, for any agent. So an agent must never
// report a version its server cannot produce, and the newest reference agent reports
// its own (Port 1.11 with 2026.2), which a Zed server (Port 1.7) cannot produce.
//
// ovs-agent therefore negotiates per type: pulls ask for the newest version it decodes
// (VersionLadders); a refusal (InvalidTargetVersion) moves that type one version down
// and the pull is repeated; a pull that returned at least one object at a version
// proves the server produces it (a pulled port also has the types it names probed
// with one small pull each, Client.probeRelated; a pushed object of an unproven type is
// pulled back once, Negotiator.Saw). What is reported (and subscribed, neutron-vo-<T>-<v>)
// is that proven version, and until one is proven the oldest of the ladder, the
// version every supported server (Zed on) produces. Against a 2026.2 server the
// result is the 2026.2 reference's map, against 2025.1 the 2025.1 one's, against Zed
// Zed's. A refused pull costs one call and one ERROR traceback in the server's log
// per step down (Zed: 4 for Port, 2 for Network, 1 each for Subnet, SecurityGroup and
// SecurityGroupRule, once per agent start); while a type is unproven, a pull of many
// ids asks for one id first, so a refusal never costs a large pull.

// VersionLadders are, per negotiated type, the versions this agent decodes, newest
// first; the last is the baseline every supported server produces (Zed's, the
// ResourceVersions entry). Fields each version added (obj_make_compatible of the
// 2026.2 classes): Port 1.8 hints, 1.9 hardware_offload_type, 1.10 trusted, 1.11
// pvlan_type and pvlan_community; Network 1.2 qinq, 1.3 pvlan; Subnet 1.2 external;
// SecurityGroup 1.6 rules at SecurityGroupRule 1.3, which added belongs_to_default_sg.
// Releases: 2025.1 (26.0) has Port 1.10, Network 1.2, Subnet 1.2, SecurityGroup 1.6,
// SecurityGroupRule 1.3; 2026.2 (29.0) Port 1.11 and Network 1.3.
var VersionLadders = map[string][]string{
	TypePort:              {"1.11", "1.10", "1.9", "1.8", "1.7"},
	TypeNetwork:           {"1.3", "1.2", "1.1"},
	TypeSubnet:            {"1.2", "1.1"},
	TypeSecurityGroup:     {"1.6", "1.5"},
	TypeSecurityGroupRule: {"1.3", "1.2"},
}

// negotiation is one type's state; its methods are the pure transitions.
type negotiation struct {
	ladder    []string // newest first
	rung      int      // index of the version pulls ask for
	confirmed bool     // the server returned objects at ladder[rung]
}

// pullVersion is the version the next pull asks for.
func (n negotiation) pullVersion() string { return n.ladder[n.rung] }

// reported is the version to report and consume: the proven one, else the baseline.
func (n negotiation) reported() string {
	if n.confirmed {
		return n.ladder[n.rung]
	}
	return n.ladder[len(n.ladder)-1]
}

// refused is the state after the server refused version v, and whether the pull
// should be repeated (at the new pullVersion). A refusal of a version other than the
// current one (a concurrent pull that asked before the step down) changes nothing but
// is repeated; a refusal of the baseline is final.
func (n negotiation) refused(v string) (negotiation, bool) {
	if v != n.pullVersion() {
		return n, indexOf(n.ladder, v) < n.rung
	}
	if n.rung == len(n.ladder)-1 {
		return n, false
	}
	n.rung++
	n.confirmed = false
	return n, true
}

// produced is the state after a pull at version v returned count objects.
func (n negotiation) produced(v string, count int) negotiation {
	if count > 0 && v == n.pullVersion() {
		n.confirmed = true
	}
	return n
}

func indexOf(l []string, v string) int {
	for i, x := range l {
		if x == v {
			return i
		}
	}
	return -1
}

// IsVersionRefused reports whether err is the server's refusal to produce an object
// at the requested version (oslo.versionedobjects' InvalidTargetVersion, raised by
// obj_to_primitive for a target newer than the class).
func IsVersionRefused(err error) bool {
	var re *oslo.RemoteError
	return errors.As(err, &re) && re.Class == "InvalidTargetVersion"
}

// Negotiator holds the per-server version choice of the negotiated types (see the
// comment at the top of this file). Safe for concurrent use; the zero value is not
// usable, use NewNegotiator.
type Negotiator struct {
	mu       sync.Mutex
	types    map[string]negotiation
	probe    map[string]*sync.Mutex // held by a pull while its type is unproven
	gen      uint64                 // bumped when a reported version changes
	onChange []func(rtype, version string)
	log      *slog.Logger
	probing  bool           // a probe of the types a port names is out (Client.probeRelated)
	probeWG  sync.WaitGroup // the probe goroutines (tests wait for them)
	prober   func(Resource) // pulls a pushed object to settle its type (SetProber)
	sawBusy  bool           // a prober call is out
}

// NewNegotiator starts every type of VersionLadders at its newest version, unproven.
func NewNegotiator(log *slog.Logger) *Negotiator {
	if log == nil {
		log = slog.Default()
	}
	n := &Negotiator{types: map[string]negotiation{}, probe: map[string]*sync.Mutex{}, log: log}
	for t, l := range VersionLadders {
		n.types[t] = negotiation{ladder: l}
		n.probe[t] = &sync.Mutex{}
	}
	return n
}

// Negotiates reports whether rtype's version is negotiated (else ResourceVersions).
func (n *Negotiator) Negotiates(rtype string) bool {
	if n == nil {
		return false
	}
	_, ok := n.probe[rtype] // probe's keys never change after NewNegotiator
	return ok
}

// PullVersion is the version a pull of rtype asks for now.
func (n *Negotiator) PullVersion(rtype string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.types[rtype].pullVersion()
}

// Confirmed reports whether the server was seen producing rtype at PullVersion.
func (n *Negotiator) Confirmed(rtype string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.types[rtype].confirmed
}

// PushVersion is the version of rtype reported and consumed now.
func (n *Negotiator) PushVersion(rtype string) string {
	if !n.Negotiates(rtype) {
		return ResourceVersions[rtype]
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.types[rtype].reported()
}

// Refused records the server's refusal of rtype at v; true: pull again at PullVersion.
func (n *Negotiator) Refused(rtype, v string) bool {
	n.mu.Lock()
	old := n.types[rtype]
	next, retry := old.refused(v)
	n.types[rtype] = next
	n.mu.Unlock()
	if next.rung != old.rung {
		n.log.Info("neutron: the server cannot produce this version; asking for the next older one",
			"type", rtype, "refused", v, "next", next.pullVersion())
	}
	n.changed(rtype, old, next)
	return retry
}

// Produced records a pull of rtype at v that returned count objects.
func (n *Negotiator) Produced(rtype, v string, count int) {
	n.mu.Lock()
	old := n.types[rtype]
	next := old.produced(v, count)
	n.types[rtype] = next
	n.mu.Unlock()
	if next.confirmed && !old.confirmed {
		n.log.Info("neutron: resource version agreed with the server", "type", rtype, "version", v)
	}
	n.changed(rtype, old, next)
}

func (n *Negotiator) changed(rtype string, old, next negotiation) {
	if old.reported() == next.reported() {
		return
	}
	n.mu.Lock()
	n.gen++
	hooks := append([]func(string, string){}, n.onChange...)
	n.mu.Unlock()
	for _, f := range hooks {
		f(rtype, next.reported())
	}
}

// OnChange adds f, called (on the pulling goroutine) with a type and its new reported
// version whenever that changes.
func (n *Negotiator) OnChange(f func(rtype, version string)) {
	n.mu.Lock()
	n.onChange = append(n.onChange, f)
	n.mu.Unlock()
}

// Reported is the resource_versions map to report (ReportedResourceVersions with the
// negotiated types at their reported version) and its generation, which changes
// whenever the map does.
func (n *Negotiator) Reported() (map[string]string, uint64) {
	out := maps.Clone(ReportedResourceVersions)
	n.mu.Lock()
	defer n.mu.Unlock()
	for t, s := range n.types {
		out[t] = s.reported()
	}
	return out, n.gen
}

// startProbe reports whether a probe of the related types should start now: some
// type is unproven and no probe is out. endProbe ends it.
func (n *Negotiator) startProbe() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.probing {
		return false
	}
	for _, s := range n.types {
		if !s.confirmed {
			n.probing = true
			n.probeWG.Add(1)
			return true
		}
	}
	return false
}

func (n *Negotiator) endProbe() {
	n.mu.Lock()
	n.probing = false
	n.mu.Unlock()
	n.probeWG.Done()
}

// SetProber sets the pull Saw uses (Client.ProbeVersions).
func (n *Negotiator) SetProber(f func(Resource)) {
	n.mu.Lock()
	n.prober = f
	n.mu.Unlock()
}

// Saw is told of every object the server pushed. An object of an unproven type is
// pulled back once (the prober, on its own goroutine, one at a time): a host whose
// objects all reach the cache by push would otherwise never pull, and never move off
// the baseline.
func (n *Negotiator) Saw(r Resource) {
	if n == nil || !n.Negotiates(r.ResourceType()) || r.ResourceID() == "" {
		return
	}
	n.mu.Lock()
	f := n.prober
	if f == nil || n.sawBusy || n.types[r.ResourceType()].confirmed {
		n.mu.Unlock()
		return
	}
	n.sawBusy = true
	n.probeWG.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.probeWG.Done()
		defer func() {
			n.mu.Lock()
			n.sawBusy = false
			n.mu.Unlock()
		}()
		f(r)
	}()
}

// lockUnproven serialises the pulls of rtype while its version is unproven, so that
// one small pull settles it before the others go out; it returns the unlock and
// whether the type was still unproven once locked.
func (n *Negotiator) lockUnproven(rtype string) (unlock func(), unproven bool) {
	if n.Confirmed(rtype) {
		return func() {}, false
	}
	mu := n.probe[rtype]
	mu.Lock()
	if n.Confirmed(rtype) {
		mu.Unlock()
		return func() {}, false
	}
	return mu.Unlock, true
}
