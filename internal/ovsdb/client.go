package ovsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// DefaultTimeout bounds one transaction and the wait for ovs-vswitchd to apply
// it, like the reference's [ovs] ovsdb_timeout.
const DefaultTimeout = 10 * time.Second

// defaultRunDir is OVS's compiled-in run directory, used only when nothing
// else says where the bridges' sockets are.
const defaultRunDir = "/var/run/openvswitch"

// Options tune Dial. The zero value is usable.
type Options struct {
	// Timeout bounds each transaction and vswitchd wait (DefaultTimeout if 0).
	Timeout time.Duration
	// RunDir overrides where <bridge>.mgmt sockets are looked for.
	RunDir string
	// Logger (slog.Default() if nil).
	Logger *slog.Logger
}

// Client is a connection to ovsdb-server with a monitor cache of the
// Open_vSwitch, Bridge, Port, Interface and Controller columns the agent uses
// (vswitchd.Columns). It reconnects on its own and refills the cache from the
// server's current content; writes wait until reconnected or ctx/timeout ends.
// Safe for concurrent use.
type Client struct {
	endpoint string
	runDir   string
	timeout  time.Duration
	log      *slog.Logger
	stop     context.CancelFunc
	loopDone chan struct{}

	mu          sync.Mutex
	sess        *wire.Session // nil while disconnected
	cur         *fill         // the session being filled or live; older sessions' updates are dropped
	up          chan struct{} // closed while connected, replaced when the connection is lost
	db          tables
	rootUUID    string
	curCfg      int
	nextCfg     int
	cfgChanged  chan struct{} // closed and replaced whenever cur_cfg changes
	reconnects  int
	onReconnect []func()
	watchers    map[int]func() // called (cheaply) on Bridge/Port/Interface changes; see monitor.go
	nextWatch   int
}

// fill is one session's monitor: updates that arrive before the monitor's
// initial content is in the cache wait in queued, in order.
type fill struct {
	filling bool
	queued  []json.RawMessage
}

// monitorID names the agent's monitor in the server's update notifications.
const monitorID = "ovsagent"

// Dial connects to conn, the reference's ovsdb_connection ("tcp:127.0.0.1:6640"
// or "unix:/run/openvswitch/db.sock"), starts the monitor and waits for the
// first cache fill, retrying until ctx ends (the agent may start before
// ovsdb-server). The connection is re-established after loss.
func Dial(ctx context.Context, conn string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if !strings.HasPrefix(conn, "tcp:") && !strings.HasPrefix(conn, "unix:") {
		return nil, fmt.Errorf("ovsdb: connection %q: only tcp:HOST:PORT and unix:PATH are supported", conn)
	}
	c := &Client{
		endpoint:   conn,
		timeout:    opts.Timeout,
		log:        opts.Logger.With("component", "ovsdb"),
		up:         make(chan struct{}),
		cfgChanged: make(chan struct{}),
		db:         newTables(),
	}
	sess, err := c.connectRetry(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	c.stop, c.loopDone = cancel, make(chan struct{})
	go c.keep(lctx, sess)
	c.mu.Lock()
	root := c.db.root[c.rootUUID]
	c.mu.Unlock()
	c.runDir = resolveRunDir(opts.RunDir, conn, root.ExternalIDs)
	c.log.Debug("connected", "conn", conn, "rundir", c.runDir, "ovs_version", deref(root.OVSVersion))
	return c, nil
}

// connectRetry connects with backoff (100 ms doubling to 2 s) until it
// succeeds or ctx ends.
func (c *Client) connectRetry(ctx context.Context) (*wire.Session, error) {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		sess, err := c.connect(ctx)
		if err == nil {
			return sess, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ovsdb: connect %s (%d attempts): %w", c.endpoint, attempt, err)
		}
		if attempt == 1 || attempt%10 == 0 {
			c.log.Warn("ovsdb-server not reachable, retrying", "conn", c.endpoint, "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("ovsdb: connect %s (%d attempts): %w", c.endpoint, attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// connect opens a session, starts the monitor and replaces the cache with
// the server's content in one step, so readers see either the old or the
// new database, never a mix.
func (c *Client) connect(ctx context.Context) (*wire.Session, error) {
	st := &fill{filling: true}
	c.mu.Lock()
	c.cur = st
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	sess, err := wire.Dial(ctx, c.endpoint, func(method string, params json.RawMessage) {
		c.onNotify(st, method, params)
	})
	if err != nil {
		return nil, err
	}
	req := make(map[string]any, len(vswitchd.Columns))
	for table, cols := range vswitchd.Columns {
		req[table] = map[string]any{"columns": cols}
	}
	var initial json.RawMessage
	if err := sess.Call(ctx, "monitor", []any{"Open_vSwitch", monitorID, req}, &initial); err != nil {
		sess.Close()
		return nil, err
	}
	fresh := newTables()
	if _, err := fresh.apply(initial); err != nil {
		c.log.Error("ovsdb: rows the agent cannot read are left out of its cache", "err", err)
	}
	if len(fresh.root) != 1 {
		sess.Close()
		return nil, fmt.Errorf("want one Open_vSwitch row, got %d; was the database initialised?", len(fresh.root))
	}
	c.mu.Lock()
	c.db = fresh
	for _, u := range st.queued {
		c.applyLocked(u)
	}
	st.filling, st.queued = false, nil
	c.rootChangedLocked()
	c.sess = sess
	close(c.up)
	watchers := c.watcherListLocked()
	c.mu.Unlock()
	for _, w := range watchers {
		w()
	}
	return sess, nil
}

// keep watches the session and reconnects after a loss, until Close.
func (c *Client) keep(ctx context.Context, sess *wire.Session) {
	defer close(c.loopDone)
	for {
		select {
		case <-sess.Done():
		case <-ctx.Done():
			sess.Close()
			c.down(sess)
			return
		}
		c.down(sess)
		c.log.Warn("ovsdb-server connection lost, reconnecting", "conn", c.endpoint, "err", sess.Err())
		var err error
		if sess, err = c.connectRetry(ctx); err != nil {
			return // closed
		}
		c.mu.Lock()
		c.reconnects++
		fns := slices.Clone(c.onReconnect)
		c.mu.Unlock()
		c.log.Info("ovsdb-server reconnected", "conn", c.endpoint)
		for _, fn := range fns {
			go fn()
		}
	}
}

func (c *Client) down(sess *wire.Session) {
	c.mu.Lock()
	if c.sess == sess {
		c.sess = nil
		c.up = make(chan struct{})
	}
	c.mu.Unlock()
}

// session returns the live session, waiting for a reconnect until ctx ends.
func (c *Client) session(ctx context.Context) (*wire.Session, error) {
	for {
		c.mu.Lock()
		sess, up := c.sess, c.up
		c.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errNotConnected, ctx.Err())
		}
	}
}

// errNotConnected: no session to ovsdb-server right now.
var errNotConnected = errors.New("not connected to ovsdb-server")

// onNotify runs on the session's reader goroutine; it must not block.
func (c *Client) onNotify(st *fill, method string, params json.RawMessage) {
	if method != "update" {
		return
	}
	var p [2]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		c.log.Error("ovsdb: malformed update notification", "err", err)
		return
	}
	c.mu.Lock()
	if st != c.cur {
		c.mu.Unlock()
		return
	}
	if st.filling {
		st.queued = append(st.queued, p[1])
		c.mu.Unlock()
		return
	}
	var watchers []func()
	if c.applyLocked(p[1]) {
		watchers = c.watcherListLocked()
	}
	c.mu.Unlock()
	for _, w := range watchers {
		w()
	}
}

// applyLocked applies one table-updates object and reports whether a
// Bridge, Port or Interface row changed.
func (c *Client) applyLocked(u json.RawMessage) bool {
	tablesTouched, err := c.db.apply(u)
	if err != nil {
		c.log.Error("ovsdb: rows the agent cannot read are left out of its cache", "err", err)
	}
	if tablesTouched[vswitchd.OpenvSwitchTable] {
		c.rootChangedLocked()
	}
	return tablesTouched[vswitchd.BridgeTable] || tablesTouched[vswitchd.PortTable] || tablesTouched[vswitchd.InterfaceTable]
}

func (c *Client) rootChangedLocked() {
	for uuid, root := range c.db.root {
		c.rootUUID = uuid
		c.nextCfg = root.NextCfg
		if root.CurCfg != c.curCfg {
			c.curCfg = root.CurCfg
			close(c.cfgChanged)
			c.cfgChanged = make(chan struct{})
		}
	}
}

func (c *Client) watcherListLocked() []func() {
	ws := make([]func(), 0, len(c.watchers))
	for _, w := range c.watchers {
		ws = append(ws, w)
	}
	return ws
}

func resolveRunDir(explicit, conn string, rootIDs map[string]string) string {
	if explicit != "" {
		return explicit
	}
	if d := os.Getenv("OVS_RUNDIR"); d != "" {
		return d
	}
	if p, ok := strings.CutPrefix(conn, "unix:"); ok && p != "" {
		return filepath.Dir(p)
	}
	// ovs-ctl records its run directory here.
	if d := rootIDs["rundir"]; d != "" {
		return d
	}
	return defaultRunDir
}

// OnReconnect registers fn to run (on its own goroutine) after each
// reconnect. Reads made from fn (Snapshot, BridgePorts, ...) wait for the
// cache refill to finish, so they see the server's current content; the
// agent uses this to resync (the port monitor needs no help: it diffs).
func (c *Client) OnReconnect(fn func()) {
	c.mu.Lock()
	c.onReconnect = append(c.onReconnect, fn)
	c.mu.Unlock()
}

// Reconnects counts re-established connections since Dial.
func (c *Client) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

func (c *Client) addWatcher(fn func()) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchers == nil {
		c.watchers = map[int]func(){}
	}
	c.nextWatch++
	c.watchers[c.nextWatch] = fn
	return c.nextWatch
}

// wakeups is a watcher as a channel: one wake-up now (to read what exists) and one
// after any database change, coalesced while the reader is busy. stop unregisters it.
func (c *Client) wakeups() (wake <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	poke := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	id := c.addWatcher(poke)
	poke()
	return ch, func() { c.removeWatcher(id) }
}

func (c *Client) removeWatcher(id int) {
	c.mu.Lock()
	delete(c.watchers, id)
	c.mu.Unlock()
}

// Close ends the connection; the client cannot be used afterwards.
func (c *Client) Close() {
	c.stop()
	<-c.loopDone
}

// Connected reports whether the session is up right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil
}

// RunDir is where ovs-vswitchd puts the bridges' management sockets: the
// explicit option, else $OVS_RUNDIR, else the directory of the unix db socket,
// else Open_vSwitch external_ids:rundir, else OVS's default.
func (c *Client) RunDir() string { return c.runDir }

// MgmtSocket is the path of bridge's OpenFlow management socket
// (<rundir>/<bridge>.mgmt); dial it as "unix:"+path.
func (c *Client) MgmtSocket(bridge string) string {
	return filepath.Join(c.runDir, bridge+".mgmt")
}

func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// transact commits ops as one transaction. With waitApplied it also bumps
// next_cfg and waits until ovs-vswitchd reports it applied (cur_cfg), as
// ovs-vsctl does, so that ofports of new ports are known on return.
func (c *Client) transact(ctx context.Context, what string, ops []wire.Operation, waitApplied bool) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if len(ops) == 0 {
		if !waitApplied {
			return nil
		}
		// Nothing to change, but what is there may not be applied yet (e.g.
		// ovs-vswitchd restarting): the same promise as after a write.
		c.mu.Lock()
		want := c.nextCfg
		c.mu.Unlock()
		if err := c.waitCfg(ctx, want); err != nil {
			return fmt.Errorf("ovsdb: %s: ovs-vswitchd has not applied the configuration: %w", what, err)
		}
		return nil
	}
	c.mu.Lock()
	root := c.rootUUID
	c.mu.Unlock()
	n := len(ops)
	if waitApplied {
		where := byUUID(root)
		ops = append(ops,
			mutateOp("Open_vSwitch", where, wire.Mutation{Column: "next_cfg", Mutator: wire.MutAdd, Value: 1}),
			wire.Operation{Op: wire.OpSelect, Table: "Open_vSwitch", Where: where, Columns: []string{"next_cfg"}})
	}
	res, err := c.transactRaw(ctx, ops)
	if err != nil {
		return fmt.Errorf("ovsdb: %s: %w", what, err)
	}
	if !waitApplied {
		return nil
	}
	rows := res[n+1].Rows
	if len(rows) != 1 {
		return fmt.Errorf("ovsdb: %s: next_cfg not returned", what)
	}
	want, err := wire.Int(rows[0]["next_cfg"])
	if err != nil {
		return fmt.Errorf("ovsdb: %s: next_cfg: %w", what, err)
	}
	if err := c.waitCfg(ctx, want); err != nil {
		return fmt.Errorf("ovsdb: %s: committed, but ovs-vswitchd did not apply it: %w", what, err)
	}
	return nil
}

// transactRaw sends one transaction on the live session (waiting for a
// reconnect until ctx ends) and checks every operation's result.
func (c *Client) transactRaw(ctx context.Context, ops []wire.Operation) ([]wire.Result, error) {
	sess, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	params := make([]any, 0, len(ops)+1)
	params = append(params, "Open_vSwitch")
	for _, op := range ops {
		params = append(params, op)
	}
	var res []wire.Result
	if err := sess.Call(ctx, "transact", params, &res); err != nil {
		return nil, err
	}
	if err := wire.CheckResults(res, ops); err != nil {
		return nil, err
	}
	return res, nil
}

// WaitApplied waits until ovs-vswitchd has applied every change committed so
// far (by anyone): afterwards new ports have their ofports.
func (c *Client) WaitApplied(ctx context.Context) error {
	c.mu.Lock()
	root := c.rootUUID
	c.mu.Unlock()
	// A no-op change that vswitchd must acknowledge, as ovs-vsctl does.
	op := mutateOp("Open_vSwitch", byUUID(root),
		wire.Mutation{Column: "next_cfg", Mutator: wire.MutAdd, Value: 0})
	return c.transact(ctx, "wait for ovs-vswitchd", []wire.Operation{op}, true)
}

func (c *Client) waitCfg(ctx context.Context, want int) error {
	for {
		c.mu.Lock()
		cur, ch := c.curCfg, c.cfgChanged
		c.mu.Unlock()
		if cur >= want {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("cur_cfg %d < next_cfg %d: %w", cur, want, ctx.Err())
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ErrNotFound is returned (wrapped) when a named bridge or port does not exist.
var ErrNotFound = errors.New("not found")
