package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
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
	// Logger for this package and libovsdb (slog.Default() if nil).
	Logger *slog.Logger
}

// Client is a connection to ovsdb-server with a monitor cache of the
// Open_vSwitch, Bridge, Port, Interface and Controller columns the agent uses.
// It reconnects on its own; writes block until reconnected or ctx/timeout ends.
// Safe for concurrent use.
type Client struct {
	ovs     client.Client
	conn    string
	runDir  string
	timeout time.Duration
	log     *slog.Logger

	mu          sync.Mutex
	rootUUID    string
	curCfg      int
	nextCfg     int
	cfgChanged  chan struct{} // closed and replaced whenever cur_cfg changes
	rootAdds    int
	reconnects  int
	onReconnect []func()
	watchers    map[int]func() // called (cheaply) on Bridge/Port/Interface events; see monitor.go
	nextWatch   int
}

// Dial connects to conn, the reference's ovsdb_connection ("tcp:127.0.0.1:6640"
// or "unix:/run/openvswitch/db.sock"), starts the monitor and waits for the
// first cache fill. The connection is re-established after loss.
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
	dbModel, err := vswitchd.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("ovsdb: model: %w", err)
	}
	// libovsdb logs every failed reconnect attempt as an error; while
	// ovsdb-server is down that is expected, so its records are capped at WARN.
	lg := logr.FromSlogHandler(warnCap{opts.Logger.With("component", "libovsdb").Handler()})
	// Retry forever: libovsdb panics when its backoff gives up.
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = 2 * time.Second
	bo.MaxElapsedTime = 0
	ovs, err := client.NewOVSDBClient(dbModel,
		client.WithEndpoint(conn),
		client.WithReconnect(opts.Timeout, bo),
		client.WithLogger(&lg))
	if err != nil {
		return nil, fmt.Errorf("ovsdb: client for %s: %w", conn, err)
	}
	c := &Client{
		ovs:        ovs,
		conn:       conn,
		timeout:    opts.Timeout,
		log:        opts.Logger.With("component", "ovsdb"),
		cfgChanged: make(chan struct{}),
	}
	if err := connectRetry(ctx, ovs, conn, opts.Timeout, c.log); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	// The cache exists once connected; register before the monitor fills it.
	ovs.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { c.onRow(table, m, true) },
		UpdateFunc: func(table string, _, m model.Model) { c.onRow(table, m, false) },
		DeleteFunc: func(table string, _ model.Model) { c.onRow(table, nil, false) },
	})
	if _, err := ovs.Monitor(cctx, monitorRequest(ovs)); err != nil {
		ovs.Close()
		return nil, fmt.Errorf("ovsdb: monitor %s: %w", conn, err)
	}
	var roots []vswitchd.OpenvSwitch
	if err := ovs.List(cctx, &roots); err != nil || len(roots) != 1 {
		ovs.Close()
		return nil, fmt.Errorf("ovsdb: %s: want one Open_vSwitch row, got %d (%v); was the database initialised?", conn, len(roots), err)
	}
	c.mu.Lock()
	c.rootUUID = roots[0].UUID
	c.curCfg = roots[0].CurCfg
	c.nextCfg = roots[0].NextCfg
	c.mu.Unlock()
	c.runDir = resolveRunDir(opts.RunDir, conn, roots[0].ExternalIDs)
	c.log.Debug("connected", "conn", conn, "rundir", c.runDir, "ovs_version", deref(roots[0].OVSVersion))
	return c, nil
}

type warnCap struct{ slog.Handler }

func (h warnCap) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, min(l, slog.LevelWarn))
}

func (h warnCap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelWarn {
		r.Level = slog.LevelWarn
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnCap) WithAttrs(as []slog.Attr) slog.Handler { return warnCap{h.Handler.WithAttrs(as)} }
func (h warnCap) WithGroup(g string) slog.Handler       { return warnCap{h.Handler.WithGroup(g)} }

// connectRetry makes the first connection, retrying with backoff until ctx
// ends: the agent may start before ovsdb-server (reconnects after that are
// libovsdb's).
func connectRetry(ctx context.Context, ovs client.Client, conn string, timeout time.Duration, log *slog.Logger) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := ovs.Connect(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ovsdb: connect %s (%d attempts): %w", conn, attempt, err)
		}
		if attempt == 1 || attempt%10 == 0 {
			log.Warn("ovsdb-server not reachable, retrying", "conn", conn, "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ovsdb: connect %s (%d attempts): %w", conn, attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// monitorRequest names only the columns the agent reads: Interface statistics
// and status change every few seconds and would wake the port monitor for nothing.
func monitorRequest(ovs client.Client) *client.Monitor {
	root := &vswitchd.OpenvSwitch{}
	br := &vswitchd.Bridge{}
	port := &vswitchd.Port{}
	iface := &vswitchd.Interface{}
	ctl := &vswitchd.Controller{}
	return ovs.NewMonitor(
		client.WithTable(root, &root.Bridges, &root.CurCfg, &root.NextCfg, &root.DatapathTypes,
			&root.IfaceTypes, &root.OVSVersion, &root.ExternalIDs, &root.OtherConfig),
		client.WithTable(br, &br.Name, &br.Ports, &br.DatapathType, &br.FailMode, &br.Protocols,
			&br.OtherConfig, &br.ExternalIDs, &br.Controller, &br.McastSnoopingEnable, &br.DatapathID),
		client.WithTable(port, &port.Name, &port.Interfaces, &port.Tag, &port.VLANMode, &port.Trunks,
			&port.OtherConfig, &port.ExternalIDs),
		client.WithTable(iface, &iface.Name, &iface.Type, &iface.Ofport, &iface.Options,
			&iface.ExternalIDs, &iface.Error),
		client.WithTable(ctl, &ctl.Target, &ctl.InactivityProbe, &ctl.ConnectionMode),
	)
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

// onRow runs on libovsdb's event goroutine; it must not block.
func (c *Client) onRow(table string, m model.Model, add bool) {
	c.mu.Lock()
	if root, ok := m.(*vswitchd.OpenvSwitch); ok {
		if add {
			// A second "add" of the root row means the cache was purged and
			// replayed: the connection was re-established.
			c.rootAdds++
			if c.rootAdds > 1 {
				c.reconnects++
				for _, fn := range c.onReconnect {
					go fn()
				}
			}
		}
		c.nextCfg = root.NextCfg
		if root.CurCfg != c.curCfg {
			c.curCfg = root.CurCfg
			close(c.cfgChanged)
			c.cfgChanged = make(chan struct{})
		}
	}
	var watchers []func()
	if table == "Bridge" || table == "Port" || table == "Interface" {
		for _, w := range c.watchers {
			watchers = append(watchers, w)
		}
	}
	c.mu.Unlock()
	for _, w := range watchers {
		w()
	}
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

func (c *Client) removeWatcher(id int) {
	c.mu.Lock()
	delete(c.watchers, id)
	c.mu.Unlock()
}

// Close ends the connection; the client cannot be used afterwards.
func (c *Client) Close() { c.ovs.Close() }

// Connected reports whether the session is up right now.
func (c *Client) Connected() bool { return c.ovs.Connected() }

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
func (c *Client) transact(ctx context.Context, what string, ops []ovsdb.Operation, waitApplied bool) error {
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
		where := []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: root})}
		ops = append(ops,
			ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: where,
				Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("next_cfg", ovsdb.MutateOperationAdd, 1)}},
			ovsdb.Operation{Op: ovsdb.OperationSelect, Table: "Open_vSwitch", Where: where,
				Columns: []string{"next_cfg"}})
	}
	res, err := c.ovs.Transact(ctx, ops...)
	if err != nil {
		return fmt.Errorf("ovsdb: %s: %w", what, err)
	}
	if opErrs, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		var details []string
		for _, e := range opErrs {
			details = append(details, e.Error())
		}
		return fmt.Errorf("ovsdb: %s: %w (%s)", what, err, strings.Join(details, "; "))
	}
	if !waitApplied {
		return nil
	}
	rows := res[n+1].Rows
	if len(rows) != 1 {
		return fmt.Errorf("ovsdb: %s: next_cfg not returned", what)
	}
	want, ok := toInt(rows[0]["next_cfg"])
	if !ok {
		return fmt.Errorf("ovsdb: %s: next_cfg has type %T", what, rows[0]["next_cfg"])
	}
	if err := c.waitCfg(ctx, want); err != nil {
		return fmt.Errorf("ovsdb: %s: committed, but ovs-vswitchd did not apply it: %w", what, err)
	}
	return nil
}

// WaitApplied waits until ovs-vswitchd has applied every change committed so
// far (by anyone): afterwards new ports have their ofports.
func (c *Client) WaitApplied(ctx context.Context) error {
	c.mu.Lock()
	root := c.rootUUID
	c.mu.Unlock()
	// A no-op change that vswitchd must acknowledge, as ovs-vsctl does.
	op := mutateOp("Open_vSwitch", byUUID(root),
		ovsdb.Mutation{Column: "next_cfg", Mutator: ovsdb.MutateOperationAdd, Value: 0})
	return c.transact(ctx, "wait for ovs-vswitchd", []ovsdb.Operation{op}, true)
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

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	}
	return 0, false
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
