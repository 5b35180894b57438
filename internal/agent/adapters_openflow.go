package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// OFBridges is Flows over internal/openflow: one connection to each
// bridge's management socket and one Reconciler per bridge, with the cookie
// of our previous run's flows on that bridge, or a fresh random one (see
// ownCookieTag).
type OFBridges struct {
	log    *slog.Logger
	events chan DataplaneEvent
	// RequestTimeout and InactivityProbe are [ovs] of_request_timeout and
	// of_inactivity_probe for the connections Add makes (see
	// openflow.Options); set them before the first Add.
	RequestTimeout, InactivityProbe time.Duration
	// ConnectTimeout bounds the first connection to a bridge ([ovs]
	// of_connect_timeout: the reference gives up on a switch that has not
	// connected by then and exits); 0 waits as long as ctx.
	ConnectTimeout time.Duration

	mu      sync.Mutex
	bridges map[string]*ofBridge
}

type ofBridge struct {
	conn *openflow.Conn
	rec  *openflow.Reconciler
}

// NewOFBridges returns an empty set; Add connects each bridge.
func NewOFBridges(log *slog.Logger) *OFBridges {
	if log == nil {
		log = slog.Default()
	}
	return &OFBridges{log: log, events: make(chan DataplaneEvent, 16), bridges: map[string]*ofBridge{}}
}

// Add connects to bridge's management socket (retrying until ctx ends:
// ovs-vswitchd may still be starting) and sets up its reconciler.
// Adding a bridge twice is a no-op.
func (o *OFBridges) Add(ctx context.Context, bridge, mgmtPath string) error {
	o.mu.Lock()
	_, ok := o.bridges[bridge]
	o.mu.Unlock()
	if ok {
		return nil
	}
	opt := openflow.Options{Logger: o.log, RequestTimeout: o.RequestTimeout, InactivityProbe: o.InactivityProbe, OnReconnect: func() {
		select {
		case o.events <- DataplaneEvent{Bridge: bridge}:
		default:
		}
	}}
	backoff := 100 * time.Millisecond
	if o.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.ConnectTimeout)
		defer cancel()
	}
	for {
		conn, err := openflow.Dial(ctx, mgmtPath, opt)
		if err == nil {
			rec := openflow.NewReconciler(conn, newRoundCookie())
			// Take over what the bridge holds: an earlier run's flows keep
			// forwarding until the first sync sweeps what nobody re-installed.
			if err := rec.Adopt(ctx); err != nil {
				conn.Close()
				return fmt.Errorf("openflow: adopt %s: %w", bridge, err)
			}
			origin := "new"
			if prev, n := ownCookie(rec.Installed()); n > 0 {
				rec.SetCookie(prev)
				origin = fmt.Sprintf("kept from %d flows of an earlier run", n)
			}
			o.mu.Lock()
			o.bridges[bridge] = &ofBridge{conn: conn, rec: rec}
			o.mu.Unlock()
			o.log.Info("openflow: bridge connected", "bridge", bridge, "cookie", fmt.Sprintf("%#x", rec.Cookie()), "cookie_origin", origin)
			return nil
		}
		o.log.Warn("openflow: bridge not reachable yet; retrying", "bridge", bridge, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("openflow: connect %s: %w", bridge, err)
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// Cookies of ovs-agent carry feature.OwnCookieTag in their low 16 bits, the
// rest random (internal/feature says why; features read it there).
const (
	ownCookieTag  = feature.OwnCookieTag
	ownCookieMask = feature.OwnCookieMask
)

// newRoundCookie returns a fresh random cookie with our tag, clear of OVS's
// reserved all-ones value.
func newRoundCookie() uint64 {
	return (rand.Uint64()&^(1<<63))&^ownCookieMask | ownCookieTag
}

// ourCookie: c is a cookie of ovs-agent (of any run).
func ourCookie(c uint64) bool { return feature.OwnCookie(c) }

// sweepable says which flows no owner desires a sweep deletes: those with
// our cookie, and, in tables (the start-up sweep's reference tables), those
// of any cookie, as the reference's first-iteration cleanup does. Another
// controller's flows elsewhere, and everywhere after a reconnect, stay.
func sweepable(tables []uint8) func(*openflow.Flow) bool {
	var in [256]bool
	for _, t := range tables {
		in[t] = true
	}
	return func(f *openflow.Flow) bool { return ourCookie(f.Cookie) || in[f.Table] }
}

// ownCookie returns the tagged cookie most of flows carry, and how many do;
// n is 0 when no flow carries our tag.
func ownCookie(flows []openflow.InstalledFlow) (cookie uint64, n int) {
	count := map[uint64]int{}
	for i := range flows {
		if c := flows[i].Flow.Cookie; ourCookie(c) {
			count[c]++
		}
	}
	for c, k := range count {
		if k > n || (k == n && c < cookie) {
			cookie, n = c, k
		}
	}
	return cookie, n
}

func (o *OFBridges) get(bridge string) (*ofBridge, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.bridges[bridge]
	if b == nil {
		return nil, fmt.Errorf("openflow: bridge %s not connected", bridge)
	}
	return b, nil
}

// Conn is a connected bridge's OpenFlow connection, for what the flows are not
// (a feature's meters).
func (o *OFBridges) Conn(bridge string) (*openflow.Conn, error) {
	b, err := o.get(bridge)
	if err != nil {
		return nil, err
	}
	return b.conn, nil
}

// Apply implements Flows. A sweep deletes, in the same bundle, what no
// owner wants and is ours to delete (sweepable).
func (o *OFBridges) Apply(ctx context.Context, bridge string, ch FlowChange) error {
	b, err := o.get(bridge)
	if err != nil {
		return err
	}
	if ch.Sweep {
		b.rec.SetSweepable(sweepable(ch.SweepTables))
		err = b.rec.ApplyAndSweep(ctx, ch.Set)
	} else {
		err = b.rec.Apply(ctx, ch.Set)
	}
	if err != nil {
		return fmt.Errorf("openflow: apply on %s: %w", bridge, err)
	}
	return nil
}

// Cookie implements Flows.
func (o *OFBridges) Cookie(bridge string) uint64 {
	b, err := o.get(bridge)
	if err != nil {
		return 0
	}
	return b.rec.Cookie()
}

// Reset implements Flows: the bridge's tables were emptied (ovs-vswitchd
// restarted); the next Apply re-installs every desired flow.
func (o *OFBridges) Reset(bridge string) {
	if b, err := o.get(bridge); err == nil {
		b.rec.Reset()
	}
}

// DropAll implements Flows: one delete of every flow in every table,
// whatever its cookie (the reference's uninstall_flows(cookie=COOKIE_ANY)),
// then the reconciler forgets what it adopted so the next Apply installs
// every desired flow.
func (o *OFBridges) DropAll(ctx context.Context, bridge string) error {
	b, err := o.get(bridge)
	if err != nil {
		return err
	}
	del := openflow.FlowMod{Command: openflow.CmdDelete, Flow: openflow.Flow{Table: openflow.TableAll}}
	if err := b.conn.Bundle(ctx, []openflow.FlowMod{del}); err != nil {
		return fmt.Errorf("openflow: drop flows on %s: %w", bridge, err)
	}
	b.rec.Reset()
	return nil
}

// Reread implements Flows.
func (o *OFBridges) Reread(ctx context.Context, bridge string, sweep bool) error {
	b, err := o.get(bridge)
	if err != nil {
		return err
	}
	if err := b.rec.Adopt(ctx); err != nil {
		return fmt.Errorf("openflow: re-read %s: %w", bridge, err)
	}
	if sweep {
		b.rec.SetSweepable(sweepable(nil))
		err = b.rec.ApplyAndSweep(ctx, nil)
	} else {
		err = b.rec.Apply(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("openflow: re-assert %s: %w", bridge, err)
	}
	return nil
}

// CanaryPresent implements Flows: br-int's table 23 holds the canary.
func (o *OFBridges) CanaryPresent(ctx context.Context, bridge string) (bool, error) {
	b, err := o.get(bridge)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fs, err := b.conn.DumpFlows(ctx, 23, 0, 0)
	if err != nil {
		return false, fmt.Errorf("openflow: canary on %s: %w", bridge, err)
	}
	return len(fs) > 0, nil
}

// Check is the bridges' part of readiness: nil when every bridge's OpenFlow
// connection is up, else which are down. Safe from any goroutine.
func (o *OFBridges) Check() error {
	o.mu.Lock()
	var down []string
	for br, b := range o.bridges {
		if !b.conn.Connected() {
			down = append(down, br)
		}
	}
	o.mu.Unlock()
	if len(down) == 0 {
		return nil
	}
	sort.Strings(down)
	return fmt.Errorf("openflow: %s not connected", strings.Join(down, ", "))
}

// Connected reports whether the bridge's OpenFlow connection is up (false
// for a bridge not added).
func (o *OFBridges) Connected(bridge string) bool {
	b, err := o.get(bridge)
	return err == nil && b.conn.Connected()
}

// Events implements Flows.
func (o *OFBridges) Events() <-chan DataplaneEvent { return o.events }

// Desired implements Flows.
func (o *OFBridges) Desired(bridge, owner string) []openflow.Flow {
	b, err := o.get(bridge)
	if err != nil {
		return nil
	}
	return b.rec.Desired(owner)
}

// Installed returns the flows installed on a bridge (for diagnostics).
func (o *OFBridges) Installed(bridge string) []openflow.InstalledFlow {
	b, err := o.get(bridge)
	if err != nil {
		return nil
	}
	return b.rec.Installed()
}

// InstalledIn returns the bridge's installed flows of the tables keep
// accepts (unsorted).
func (o *OFBridges) InstalledIn(bridge string, keep func(table uint8) bool) []openflow.Flow {
	b, err := o.get(bridge)
	if err != nil {
		return nil
	}
	return b.rec.InstalledIn(keep)
}

// InstalledFlows returns the flows the bridge's reconciler believes are
// installed (at start: what it adopted).
func (o *OFBridges) InstalledFlows(bridge string) []openflow.Flow {
	var out []openflow.Flow
	for _, f := range o.Installed(bridge) {
		out = append(out, f.Flow)
	}
	return out
}

// Close closes every connection.
func (o *OFBridges) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.bridges {
		b.conn.Close()
	}
}
