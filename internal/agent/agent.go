package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/overlay"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// Options are the agent's settings (from config).
type Options struct {
	Host         string
	LocalIP      string   // tunnel endpoint; empty when tunnelling is off
	TunnelTypes  []string // vxlan, gre, geneve
	L2Population bool
	Pipeline     pipeline.Config

	// BatchWindow is how long events that keep coming right after a batch
	// are coalesced into the next one (an idle agent applies at once).
	BatchWindow time.Duration
	// ReportInterval is report_state's period (0: no reports).
	ReportInterval time.Duration
	// CanaryInterval is how often br-int's canary flow is checked besides
	// every OpenFlow reconnect (0: only on reconnect).
	CanaryInterval time.Duration
	// FDBWait bounds how long the first sync waits for l2pop's FDB of the
	// tunnelled networks before stale flows are swept.
	FDBWait time.Duration
	// RetryMin and RetryMax bound the back-off of failed work.
	RetryMin, RetryMax time.Duration
	// MaxInflightReports bounds the update_device_list calls out at once
	// (default 2). neutron-server turns ports ACTIVE one call after another
	// (one RPC worker, port status rows under DB retry); more calls out do
	// not make it faster, they queue there and time out together, and the
	// retries of work the server was still doing lengthen the time to all
	// ACTIVE (bench/README.md, run 5). Two keep a small call
	// from waiting behind a whole big one. After a failed call the agent
	// sends one at a time until a call succeeds again (reportLimit).
	MaxInflightReports int
	// ReleaseMemoryIdle: once the agent has been in sync and idle this long
	// after a burst of work, the memory the burst left behind is returned
	// to the OS (0: never; the Go runtime then keeps it for a while).
	ReleaseMemoryIdle time.Duration
	// QuitGrace is how long update_device_list calls in flight when Run's
	// context ends may still finish ([agent] quitting_rpc_timeout, as the
	// reference lets its last loop's calls end under that timeout); 0 ends
	// them with the context.
	QuitGrace time.Duration
	// RecordRPC makes the agent record its RPC calls in the metrics; off
	// when the transport's observer already does.
	RecordRPC bool
	// DropFlowsOnStart ([agent] drop_flows_on_start) deletes every flow of
	// br-int, br-tun and the physical bridges once the bridges are set up,
	// before the first flows are installed, as the reference does, instead
	// of adopting what an earlier run left. Traffic stops until re-wired.
	DropFlowsOnStart bool
	// StuckAfter: a batch running longer is reported stuck (LoopCheck, the
	// log) until it returns (default 1 min; see watchdog.go).
	StuckAfter time.Duration
}

func (o *Options) defaults() {
	if o.BatchWindow <= 0 {
		o.BatchWindow = 10 * time.Millisecond
	}
	if o.FDBWait <= 0 {
		o.FDBWait = 2 * time.Second
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 200 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.MaxInflightReports <= 0 {
		o.MaxInflightReports = 2
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = defaultStuckAfter
	}
}

// Deps are the edges the agent drives.
type Deps struct {
	Switch   Switch
	Flows    Flows
	Plugin   Plugin
	Cache    Cache
	Reporter StateReporter // nil: no state reports
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Now      func() time.Time // tests; time.Now when nil
	// AfterBatch, when set, runs on the loop after every batch (tests wait
	// on it instead of sleeping).
	AfterBatch func(inSync bool)
	// OnOVSRestart, when set, runs on the loop after ovs-vswitchd restarted
	// (the state reporter re-adds start_flag then, like the reference).
	OnOVSRestart func()
	// Features are what the agent runs besides its built-in pipeline
	// (internal/feature): the OVS firewall (internal/secgroup) and the
	// extensions, in registration order; cmd/ovs-agent builds them from the
	// configuration.
	Features []feature.Feature
}

// Agent is the L2 agent: its state and the single loop that owns it. All
// state below is touched only by the loop goroutine.
type Agent struct {
	opt Options
	d   Deps
	log *slog.Logger
	now func() time.Time

	// inbox: notifications from any goroutine, drained by the loop.
	inMu     sync.Mutex
	inbox    []Event
	inOver   inboxOverflow // events beyond inCap, folded
	inCap    int
	inReady  chan struct{}
	explain  chan explainReq
	results  chan *reportResult
	wg       sync.WaitGroup // report calls out
	inflight int
	// reportLimit is the update_device_list calls allowed out now: 1 after
	// a failed call, one more per successful call up to MaxInflightReports.
	reportLimit int

	// state
	layout BridgeLayout
	ps     *pipeline.State
	maps   *pipeline.Mappings // local VLAN mappings: their ports, VLANs and Networks in ps
	ports  map[string]*portRec
	// overlay: the tunnel ports, tunnel_sync and l2pop's FDB (a feature,
	// registered after the pipeline; internal/overlay).
	overlay    *overlay.Overlay
	applied    map[string]map[string]ownerDigest // bridge → owner → digest of the flows applied
	dirtyOwner map[string]bool
	rejected   map[string]*rejection // owners whose latest flows the switch rejected
	retag      map[string]bool       // ports whose owners' rejection began or ended (retagPorts)

	started       bool            // first snapshot processed
	swept         bool            // stale flows of earlier rounds removed (every bridge)
	sweptBr       map[string]bool // … on this bridge
	bridgesOK     bool
	bridgeRetry   retry
	flowsDropped  bool // drop_flows_on_start done (once, at the first bridge setup)
	flowRetry     retry
	resync        string // pending full resync reason
	fresh         bool   // next details fetch bypasses the cache
	checkCanary   bool
	ovsRestarted  bool
	checkBridges  bool                                 // SetupBridges still to run after an ovs-vswitchd restart (handleOVSRestart)
	refreshOut    map[string]bool                      // networks whose FDB refresh is out now (feature.Refresher)
	reportsOut    map[*reportResult]context.CancelFunc // update_device_list calls out now
	deactivated   map[string]bool                      // ports whose binding here was deactivated: unplug (deactivate.go)
	callBase      context.Context                      // update_device_list calls derive from it (see Options.QuitGrace)
	abandoned     map[*reportResult]bool               // … of those, cancelled for a resync
	inSync        bool
	reportStart   atomic.Bool // next report carries start_flag
	reportNow     chan struct{}
	devices       atomic.Int64
	syncFlag      atomic.Bool
	lastBatchSent time.Time
	lastBatchEnd  time.Time       // when the loop's last batch returned (zero: none yet)
	reread        map[string]bool // bridges whose flows are re-read before the next apply (OpenFlow reconnect)
	idle          *idleRelease    // returns a burst's garbage to the OS once idle
	busySince     atomic.Int64    // unix ns the current batch started, 0 while waiting (watchdog.go)
	loopState     atomic.Int32    // loopNotStarted, loopRunning, loopStopped

	// features: the pipeline and Deps.Features (seam.go).
	features *feature.Set
	// featErr: the features could not be registered (Run returns it).
	featErr error
	// featRetry: features whose Sync failed, by name.
	featRetry map[string]*retry
	// resourceTypes: the OVO types some feature consumes (read by
	// NotifyFromCache from any goroutine; never changed after New).
	resourceTypes map[string]bool

	// cacheResync: a reason after which pushes may have been lost
	// (pushesMayBeLost): the cached server objects are to be re-read
	// (resyncCache), with cacheRetry's back-off; "" none.
	cacheResync string
	cacheRetry  retry
	// cacheCurrent: the cache was re-read since fresh was set; the fresh
	// details fetch need not pull the ports again.
	cacheCurrent bool
}

// retry is the back-off of one piece of work retried after failures: the
// bridge setup, the flow bundles, the security groups, one tunnel type's
// tunnel_sync, one port's details and report, one rejected owner, one
// feature's Sync. One type and one doubling (Agent.backoff) for all: the
// failures in a row and when the work may run again.
type retry struct {
	failures int
	at       time.Time
}

// fail counts a failure at now and sets the next try; it returns the wait.
func (r *retry) fail(now time.Time, backoff func(int) time.Duration) time.Duration {
	r.failures++
	d := backoff(r.failures)
	r.at = now.Add(d)
	return d
}

// succeeded ends the run of failures: the next one waits the least again.
func (r *retry) succeeded() { r.failures = 0 }

// waiting: not to be tried again before at.
func (r *retry) waiting(now time.Time) bool { return r.at.After(now) }

// New builds an agent; Run starts it.
func New(opt Options, d Deps) *Agent {
	opt.defaults()
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	a := &Agent{
		opt: opt, d: d, log: d.Log, now: d.Now,
		inReady:     make(chan struct{}, 1),
		inCap:       maxInbox,
		explain:     make(chan explainReq),
		results:     make(chan *reportResult, opt.MaxInflightReports),
		reportLimit: opt.MaxInflightReports,
		reportNow:   make(chan struct{}, 1),
		ps:          pipeline.NewState(opt.Pipeline),
		ports:       map[string]*portRec{},
		reread:      map[string]bool{},
		idle:        newIdleRelease(opt.ReleaseMemoryIdle, d.Log),
		applied:     map[string]map[string]ownerDigest{},
		dirtyOwner:  map[string]bool{},
		rejected:    map[string]*rejection{},
		retag:       map[string]bool{},
		refreshOut:  map[string]bool{},
		reportsOut:  map[*reportResult]context.CancelFunc{},
		abandoned:   map[*reportResult]bool{},
		sweptBr:     map[string]bool{},
		featRetry:   map[string]*retry{},
	}
	a.maps = pipeline.NewMappings(a.ps)
	a.overlay = overlay.New(overlay.Config{LocalIP: opt.LocalIP, TunnelTypes: opt.TunnelTypes, L2Population: opt.L2Population, FDBWait: opt.FDBWait},
		d.Switch, d.Plugin, d.Metrics, a.ps)
	a.registerFeatures(d.Features)
	a.reportStart.Store(true)
	return a
}

// Notify hands a server-side event to the loop. It never blocks; beyond
// inCap waiting events it folds ev into a resync of what ev names.
func (a *Agent) Notify(ev Event) {
	a.inMu.Lock()
	if len(a.inbox) < a.inCap {
		a.inbox = append(a.inbox, ev)
	} else {
		if a.inOver.n == 0 {
			a.log.Warn("agent: event inbox full, folding further events into a resync of what they name", "waiting", len(a.inbox))
		}
		a.inOver.add(ev, a.inCap)
	}
	a.inMu.Unlock()
	select {
	case a.inReady <- struct{}{}:
	default:
	}
}

func (a *Agent) drainInbox() []Event {
	a.inMu.Lock()
	evs := append(a.inbox, a.inOver.events()...)
	a.inbox = nil
	a.inMu.Unlock()
	return evs
}

// Run runs the agent until ctx ends. It returns nil on a clean stop; the
// dataplane is left as it is.
func (a *Agent) Run(ctx context.Context) error {
	if a.featErr != nil {
		return a.featErr
	}
	portEvents := a.d.Switch.PortEvents()
	var ofEvents <-chan DataplaneEvent
	if a.d.Flows != nil {
		ofEvents = a.d.Flows.Events()
	}
	a.loopState.Store(loopRunning)
	defer a.loopState.Store(loopStopped)
	a.callBase = ctx
	if a.opt.QuitGrace > 0 {
		base, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
		a.callBase = base
		defer cancelCalls()
		go func() {
			select {
			case <-ctx.Done():
			case <-base.Done():
				return
			}
			t := time.NewTimer(a.opt.QuitGrace)
			defer t.Stop()
			select {
			case <-t.C:
			case <-base.Done():
			}
			cancelCalls()
		}()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.watchLoop(ctx) }()
	if a.d.Reporter != nil && a.opt.ReportInterval > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); a.reportLoop(ctx) }()
	}
	defer wg.Wait()
	defer a.wg.Wait() // update_device_list calls end with ctx

	var canary <-chan time.Time
	if a.opt.CanaryInterval > 0 {
		t := time.NewTicker(a.opt.CanaryInterval)
		defer t.Stop()
		canary = t.C
	}
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	a.d.Metrics.SetInSync(false)

	// Set the bridges up before anything else; the first batch waits for
	// the monitor's snapshot.
	a.beginWork()
	a.setupBridges(ctx)
	if a.bridgesOK {
		a.adoptBridges(ctx, false)
		a.adoptFeatures()
	}
	a.endWork()
	for {
		// Wait for something to do.
		a.armWake(wake)
		select {
		case <-ctx.Done():
			a.log.Info("agent: stopping")
			return nil
		case ev, ok := <-portEvents:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("agent: OVSDB port monitor closed")
			}
			a.onPortEvent(ev)
		case <-a.inReady:
		case r := <-a.results:
			a.onReportResult(r)
		case ev := <-ofEvents:
			a.onFlowsReconnect(ev)
		case <-canary:
			a.checkCanary = true
		case <-wake.C:
		case req := <-a.explain:
			req.reply <- a.explainPort(req.portID)
			continue
		case <-a.idle.C:
			a.idle.fired()
			continue
		}
		// Coalesce. An event on an idle agent (no batch ended within the
		// window) is applied at once: waiting would only add the window to
		// a lone port's wiring. Events that keep coming right after a batch
		// (a burst, our own writes echoed back) are gathered for the window.
		window := a.opt.BatchWindow
		if a.lastBatchEnd.IsZero() || a.now().Sub(a.lastBatchEnd) >= window {
			window = 0
		}
		if !a.coalesce(ctx, window, portEvents, ofEvents) {
			return nil
		}
		for _, ev := range a.drainInbox() {
			a.log.Debug("agent: event", "type", fmt.Sprintf("%T", ev), "ev", ev)
			a.onEvent(ev)
		}
		start := time.Now()
		a.beginWork()
		a.batch(ctx)
		a.endWork()
		a.d.Metrics.ObserveLoop(time.Since(start))
		a.lastBatchEnd = a.now()
		a.idle.afterBatch(a.inSync)
		if a.d.AfterBatch != nil {
			a.d.AfterBatch(a.inSync)
		}
	}
}

// coalesce keeps taking port, report and OpenFlow events for window, or,
// with window 0, only those already waiting. It returns false when ctx ends.
func (a *Agent) coalesce(ctx context.Context, window time.Duration, portEvents <-chan PortEvent, ofEvents <-chan DataplaneEvent) bool {
	var expired <-chan time.Time
	if window > 0 {
		t := time.NewTimer(window)
		defer t.Stop()
		expired = t.C
	}
	for {
		// Take what is waiting first (Go's select picks at random among
		// ready cases: an expired window must not win over a pending event),
		// then wait for more until the window ends.
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-portEvents:
			if !ok {
				portEvents = nil
				continue
			}
			a.onPortEvent(ev)
			continue
		case <-a.inReady:
			continue
		case r := <-a.results:
			a.onReportResult(r)
			continue
		case ev := <-ofEvents:
			a.onFlowsReconnect(ev)
			continue
		default:
		}
		if window == 0 {
			return true // nothing else waiting
		}
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-portEvents:
			if !ok {
				portEvents = nil
				continue
			}
			a.onPortEvent(ev)
		case <-a.inReady:
		case r := <-a.results:
			a.onReportResult(r)
		case ev := <-ofEvents:
			a.onFlowsReconnect(ev)
		case <-expired:
			return true
		}
	}
}

// onFlowsReconnect: a bridge's OpenFlow connection came back. ovs-vswitchd
// may have restarted: with empty tables (the canary tells) or with flows
// restored by someone else (ovs-ctl restart saves and restores them, minus
// flags such as reset_counts), so what the reconciler believes is installed
// is re-read from the bridge.
func (a *Agent) onFlowsReconnect(ev DataplaneEvent) {
	a.log.Info("agent: OpenFlow connection (re)established", "bridge", ev.Bridge)
	a.checkCanary = true
	a.reread[ev.Bridge] = true
}

// armWake sets the timer to the earliest pending retry or deadline.
func (a *Agent) armWake(t *time.Timer) {
	next := a.nextWake()
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	if next.IsZero() {
		t.Reset(time.Hour)
		return
	}
	d := next.Sub(a.now())
	if d < 0 {
		d = 0
	}
	t.Reset(d)
}

func (a *Agent) nextWake() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !a.bridgesOK {
		consider(a.bridgeRetry.at)
	}
	if len(a.dirtyOwner) > 0 && a.started && a.bridgesOK {
		// Owners left dirty by the end of a batch (e.g. a tunnel port
		// deleted after the sweep) are applied at once, failed ones after
		// their back-off, owners the switch rejected after theirs.
		if a.flowRetry.at.IsZero() {
			consider(a.dirtyWake())
		} else {
			consider(a.flowRetry.at)
		}
	}
	for _, p := range a.ports {
		if p.pending() {
			consider(p.retry.at)
		}
	}
	for _, f := range a.features.All() {
		if w, ok := f.(feature.Waiter); ok && w.Waiting() {
			consider(w.RetryAt())
		}
		if c, ok := f.(feature.Completer); ok {
			consider(c.CompleteBy())
		}
	}
	for _, r := range a.featRetry {
		consider(r.at)
	}
	if a.cacheResync != "" && a.started && a.bridgesOK {
		consider(a.cacheRetry.at)
	}
	return next
}

func (a *Agent) backoff(failures int) time.Duration {
	d := a.opt.RetryMin
	for i := 1; i < failures && d < a.opt.RetryMax; i++ {
		d *= 2
	}
	if d > a.opt.RetryMax {
		d = a.opt.RetryMax
	}
	return d
}

func (a *Agent) setupBridges(ctx context.Context) {
	l, err := a.d.Switch.SetupBridges(ctx)
	if err != nil {
		wait := a.bridgeRetry.fail(a.now(), a.backoff)
		a.log.Error("agent: bridge setup failed; retrying", "err", err, "in", wait)
		a.bridgesOK = false
		return
	}
	if a.opt.DropFlowsOnStart && !a.flowsDropped {
		if err := a.dropFlows(ctx, l); err != nil {
			wait := a.bridgeRetry.fail(a.now(), a.backoff)
			a.log.Error("agent: drop_flows_on_start failed; retrying", "err", err, "in", wait)
			a.bridgesOK = false
			return
		}
		a.flowsDropped = true
	}
	a.bridgeRetry.succeeded()
	a.bridgesOK = true
	if a.applyLayout(l) {
		a.dirtyAll()
	}
}

// dropFlows is the reference's uninstall_flows(cookie=COOKIE_ANY) on
// br-int, br-tun (when tunnelling) and every physical bridge at start
// under drop_flows_on_start. The reference also unplugs br-int's patch-tun
// first so nothing floods over it meanwhile; ovs-agent's bridges are in
// secure fail mode, where a bridge without flows forwards nothing, so the
// patch port stays (and keeps its ofport).
func (a *Agent) dropFlows(ctx context.Context, l BridgeLayout) error {
	for _, br := range l.Bridges() {
		if err := a.d.Flows.DropAll(ctx, br); err != nil {
			return fmt.Errorf("agent: drop flows on %s: %w", br, err)
		}
	}
	a.log.Info("agent: drop_flows_on_start: deleted every flow", "bridges", l.Bridges())
	return nil
}

// applyLayout records the bridges in the state; it reports whether they
// changed (every owner must then be recomputed).
func (a *Agent) applyLayout(l BridgeLayout) bool {
	changed := !layoutEqual(a.layout, l)
	a.layout = l
	var cookie func(string) uint64 // this run's, per bridge (none without OpenFlow)
	if a.d.Flows != nil {
		cookie = a.d.Flows.Cookie
	}
	a.ps.SetBridges(l, cookie)
	for _, br := range l.Bridges() {
		if a.applied[br] == nil {
			a.applied[br] = map[string]ownerDigest{}
		}
	}
	return changed
}

// touch marks an owner and the owners whose flows depend on its object.
// Call it before and after changing the object in the state.
func (a *Agent) touch(owner string) {
	a.dirtyOwner[owner] = true
	if src, ok := a.features.SourceOf(owner); ok {
		if dep, ok := src.(feature.Dependents); ok {
			for _, d := range dep.Dependents(owner) {
				a.dirtyOwner[d] = true
			}
		}
	}
}

// dirtyAll marks every owner for recomputation.
func (a *Agent) dirtyAll() {
	for _, o := range a.features.AllOwners() {
		a.dirtyOwner[o] = true
	}
	for _, m := range a.applied {
		for o := range m {
			a.dirtyOwner[o] = true
		}
	}
}

func layoutEqual(a, b BridgeLayout) bool {
	if a.Integration != b.Integration || a.Tunnel != b.Tunnel || a.PatchTun != b.PatchTun || a.PatchInt != b.PatchInt || len(a.Physical) != len(b.Physical) {
		return false
	}
	for k, v := range a.Physical {
		if b.Physical[k] != v {
			return false
		}
	}
	return true
}

func (a *Agent) observeRPC(method string, d time.Duration, err error) {
	if a.opt.RecordRPC {
		a.d.Metrics.ObserveRPC(method, d, err)
	}
}

func (a *Agent) devicesCount() int { return int(a.devices.Load()) }

// Devices is the number of VIFs on br-int (report_state's "devices"). Safe
// from any goroutine.
func (a *Agent) Devices() int { return a.devicesCount() }

// InSync reports whether the last batch left the agent in sync (dataplane
// complete, stale flows swept, the server told about every port). Safe from
// any goroutine.
func (a *Agent) InSync() bool { return a.syncFlag.Load() }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprint(err)
}
