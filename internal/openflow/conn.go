package openflow

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotConnected is returned by operations while the connection is down.
var ErrNotConnected = errors.New("openflow: not connected")

// ErrTimeout (wrapped, with ErrNotConnected) says the switch did not answer
// within Options.RequestTimeout or through an inactivity probe; the session
// was dropped and is being reconnected.
var ErrTimeout = errors.New("openflow: switch not answering")

// BundleError reports a rejected bundle: the switch discarded all of it.
type BundleError struct {
	Index int    // index of the offending FlowMod, -1 if unknown
	Flow  string // its rendered text
	Cmd   Command
	Err   *Error // the switch's error for that flow_mod (or the commit error)
	// Rejected is every flow_mod the switch named in an error, in the
	// order of the errors: OVS checks each flow_mod as it is added, so one
	// bundle names all the malformed ones, not only the first.
	Rejected []RejectedMod
}

// RejectedMod is a flow_mod of a bundle the switch answered with an error.
type RejectedMod struct {
	Index int
	Err   *Error
}

func (e *BundleError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("openflow: bundle rejected: %v", e.Err)
	}
	return fmt.Sprintf("openflow: bundle rejected at flow_mod %d (%s%s): %v", e.Index, e.Cmd, e.Flow, e.Err)
}

// Options configure a Conn.
type Options struct {
	// OnReconnect runs (in its own goroutine) after every successful
	// reconnection, not after the first connection: the agent resyncs.
	OnReconnect func()
	Logger      *slog.Logger
	// MaxBackoff caps the reconnect backoff (default 1s). A failed dial of
	// the bridge's unix socket costs microseconds, and every second the
	// agent is late after an ovs-vswitchd restart is a second without flows
	// (with 5 s, up to 5 s of it).
	MaxBackoff time.Duration
	// RequestTimeout bounds every request ([ovs] of_request_timeout): the
	// wait for its reply, and each write of it the switch does not take. A
	// request that times out drops the session (what the switch did with it
	// is unknown; the reconnect, through OnReconnect, is how the agent reads
	// the bridge again) and returns ErrTimeout. 0: no bound.
	RequestTimeout time.Duration
	// InactivityProbe ([ovs] of_inactivity_probe): once the session has been
	// idle this long (no request out, nothing received) an echo request is
	// sent, and with still nothing received as long again the switch is
	// declared dead and the session reconnected, as OVS's rconn does. While a
	// request is out, RequestTimeout bounds it instead: a switch committing a
	// large bundle is silent but alive. 0: no probe.
	InactivityProbe time.Duration
}

// Conn is one OpenFlow 1.3 connection to a bridge's management socket, with
// automatic reconnection. All methods are safe for concurrent use.
type Conn struct {
	path string
	opt  Options
	log  *slog.Logger

	mu       sync.Mutex // guards everything below
	sess     *session
	closed   bool
	nextXid  uint32
	bundleID uint32
	done     chan struct{}
	connWait chan struct{} // closed when a session is up; replaced when it drops
}

type session struct {
	c       net.Conn
	timeout time.Duration // Options.RequestTimeout
	wmu     sync.Mutex
	w       *bufio.Writer
	// interrupted: a cancelled Bundle set the write deadline to now; the
	// deadlineWriter must not push it back.
	interrupted atomic.Bool
	lastActive  atomic.Int64 // unix ns of the last message received (or of a request seen out)
	mu          sync.Mutex
	calls       map[uint32]*call
	ranges      []*call
	err         error
	dead        chan struct{}
	DPID        uint64
}

// call collects the replies for a request (or for a range of xids: a bundle).
type call struct {
	lo, hi  uint32
	last    uint32 // xid whose reply or error completes the call
	replies [][]byte
	errs    []*Error
	done    chan struct{}
	fin     bool
	aborted bool // the session died before the call completed
}

// Dial connects to the unix socket at path (e.g. /var/run/openvswitch/br-int.mgmt
// or $OVS_RUNDIR/<bridge>.mgmt) and negotiates OpenFlow 1.3. While the socket
// does not exist or refuses, Dial retries until ctx ends. Later disconnects
// are repaired in the background.
func Dial(ctx context.Context, path string, opt Options) (*Conn, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.MaxBackoff == 0 {
		opt.MaxBackoff = time.Second
	}
	c := &Conn{path: path, opt: opt, log: opt.Logger.With("ofconn", path), nextXid: 1, done: make(chan struct{}), connWait: make(chan struct{})}
	backoff := 20 * time.Millisecond
	var s *session
	for {
		var err error
		s, err = c.connect(ctx)
		if err == nil {
			break
		}
		// the mgmt socket appears a moment after the bridge is created:
		// wait for it as long as ctx allows; other errors are final
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > opt.MaxBackoff {
			backoff = opt.MaxBackoff
		}
	}
	c.mu.Lock()
	c.install(s)
	c.mu.Unlock()
	return c, nil
}

// install makes s current; c.mu held.
func (c *Conn) install(s *session) {
	c.sess = s
	close(c.connWait)
	go c.watch(s)
}

func (c *Conn) connect(ctx context.Context) (*session, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil, fmt.Errorf("openflow: dial %s: %w", c.path, err)
	}
	s := &session{c: nc, timeout: c.opt.RequestTimeout, calls: map[uint32]*call{}, dead: make(chan struct{})}
	s.w = bufio.NewWriterSize(deadlineWriter{s}, sessionBufSize)
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(c.handshakeTimeout()))
	}
	if err := s.handshake(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("openflow: %s: %w", c.path, err)
	}
	_ = nc.SetDeadline(time.Time{})
	s.lastActive.Store(time.Now().UnixNano())
	go s.readLoop()
	if c.opt.InactivityProbe > 0 {
		go s.probe(c.opt.InactivityProbe)
	}
	return s, nil
}

func readMsg(r io.Reader, buf []byte) ([]byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n < 8 {
		return nil, fmt.Errorf("openflow: bad message length %d", n)
	}
	msg := append(buf[:0], h[:]...)
	msg = append(msg, make([]byte, n-8)...)
	if _, err := io.ReadFull(r, msg[8:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// handshake: hello both ways (version 1.3 or fail), then features for the DPID.
func (s *session) handshake() error {
	if _, err := s.c.Write(AppendHello(nil, 0)); err != nil {
		return err
	}
	msg, err := readMsg(s.c, nil)
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if msg[1] != TypeHello {
		return fmt.Errorf("expected hello, got type %d", msg[1])
	}
	if msg[0] < Version13 && !helloOffers13(msg) {
		return fmt.Errorf("switch does not speak OpenFlow 1.3 (hello version %d)", msg[0])
	}
	if _, err := s.c.Write(AppendSimple(nil, TypeFeaturesRequest, 1, nil)); err != nil {
		return err
	}
	for {
		msg, err = readMsg(s.c, nil)
		if err != nil {
			return fmt.Errorf("features: %w", err)
		}
		switch msg[1] {
		case TypeFeaturesReply:
			if len(msg) >= 16 {
				s.DPID = binary.BigEndian.Uint64(msg[8:])
			}
			return nil
		case TypeError:
			e, _ := DecodeError(msg)
			return fmt.Errorf("features: %v", e)
		case TypeEchoRequest:
			if _, err := s.c.Write(AppendSimple(nil, TypeEchoReply, binary.BigEndian.Uint32(msg[4:]), msg[8:])); err != nil {
				return err
			}
		}
	}
}

func helloOffers13(msg []byte) bool {
	p := msg[8:]
	for len(p) >= 4 {
		t, n := binary.BigEndian.Uint16(p), int(binary.BigEndian.Uint16(p[2:]))
		if n < 4 || n > len(p) {
			return false
		}
		if t == 1 && n >= 8 && binary.BigEndian.Uint32(p[4:])&(1<<Version13) != 0 {
			return true
		}
		adv := (n + 7) / 8 * 8
		if adv > len(p) {
			return false
		}
		p = p[adv:]
	}
	return false
}

// sessionBufSize is each session's read and write buffer. Larger buffers
// only save system calls on multi-megabyte bundles and dumps, and each
// bridge's session holds both for the agent's lifetime. At 16 KiB a bundle
// of 56k flow_mods (~6 MB) takes ~370 writes instead of ~90 at 64 KiB, a
// negligible cost next to ovs-vswitchd's work on it; a message larger
// than the buffer (a 64 KiB flow-stats reply) is read straight into its own
// slice and written straight from it, bypassing the buffer.
const sessionBufSize = 16 << 10

func (s *session) readLoop() {
	r := bufio.NewReaderSize(s.c, sessionBufSize)
	var err error
	for {
		var msg []byte
		msg, err = readMsg(r, nil)
		if err != nil {
			break
		}
		s.lastActive.Store(time.Now().UnixNano())
		xid := binary.BigEndian.Uint32(msg[4:])
		switch msg[1] {
		case TypeEchoRequest:
			// never block the reader behind a long bundle write
			go func(reply []byte) {
				s.wmu.Lock()
				_, _ = s.w.Write(reply)
				_ = s.w.Flush()
				s.wmu.Unlock()
			}(AppendSimple(nil, TypeEchoReply, xid, msg[8:]))
			continue
		case TypeHello, TypeEchoReply:
			continue
		}
		s.dispatch(xid, msg)
	}
	s.fail(err)
}

func (s *session) dispatch(xid uint32, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.calls[xid]
	if cl == nil {
		for _, r := range s.ranges {
			if xid >= r.lo && xid <= r.hi {
				cl = r
				break
			}
		}
	}
	if cl == nil || cl.fin {
		return
	}
	if msg[1] == TypeError {
		if e, err := DecodeError(msg); err == nil {
			cl.errs = append(cl.errs, e)
		}
	} else {
		cl.replies = append(cl.replies, msg)
	}
	if xid != cl.last {
		return
	}
	// multipart replies complete only on the last part
	if msg[1] == TypeMultipartReply && len(msg) >= 12 && binary.BigEndian.Uint16(msg[10:])&mpReplyMore != 0 {
		return
	}
	s.finish(cl)
}

// finish completes a call; s.mu held.
func (s *session) finish(cl *call) {
	cl.fin = true
	delete(s.calls, cl.last)
	for i, r := range s.ranges {
		if r == cl {
			s.ranges = append(s.ranges[:i], s.ranges[i+1:]...)
			break
		}
	}
	close(cl.done)
}

func (s *session) fail(err error) {
	if err == nil {
		err = io.EOF
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		for _, cl := range s.calls {
			if !cl.fin {
				cl.fin, cl.aborted = true, true
				close(cl.done)
			}
		}
		for _, cl := range s.ranges {
			if !cl.fin {
				cl.fin, cl.aborted = true, true
				close(cl.done)
			}
		}
		s.calls = map[uint32]*call{}
		s.ranges = nil
		close(s.dead)
	}
	s.mu.Unlock()
	s.c.Close()
}

// watch waits for the session to die and reconnects with backoff.
func (c *Conn) watch(s *session) {
	select {
	case <-s.dead:
	case <-c.done:
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.sess = nil
	c.connWait = make(chan struct{})
	c.mu.Unlock()
	c.log.Warn("openflow connection lost, reconnecting", "err", s.err)
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-c.done:
			return
		case <-time.After(backoff):
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.handshakeTimeout())
		ns, err := c.connect(ctx)
		cancel()
		if err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				ns.c.Close()
				return
			}
			c.install(ns)
			c.mu.Unlock()
			c.log.Info("openflow connection restored")
			if c.opt.OnReconnect != nil {
				go c.opt.OnReconnect()
			}
			return
		}
		c.log.Debug("openflow reconnect failed", "err", err)
		backoff *= 2
		if backoff > c.opt.MaxBackoff {
			backoff = c.opt.MaxBackoff
		}
	}
}

// Close stops the connection and its reconnection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	s := c.sess
	c.mu.Unlock()
	if s != nil {
		s.fail(errors.New("closed"))
	}
	return nil
}

// WaitConnected blocks until a session is up (or ctx ends).
func (c *Conn) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	w := c.connWait
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrNotConnected
	}
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Connected reports whether a session is up right now (for readiness and
// the metrics: it neither waits nor dials).
func (c *Conn) Connected() bool {
	c.mu.Lock()
	s, closed := c.sess, c.closed
	c.mu.Unlock()
	if s == nil || closed {
		return false
	}
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// DPID is the datapath id learnt at the last handshake.
func (c *Conn) DPID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return 0
	}
	return c.sess.DPID
}

// begin reserves n consecutive xids on the current session.
func (c *Conn) begin(n uint32) (*session, uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || c.closed {
		return nil, 0, ErrNotConnected
	}
	if c.nextXid+n < c.nextXid || c.nextXid == 0 {
		c.nextXid = 1
	}
	x := c.nextXid
	c.nextXid += n
	return c.sess, x, nil
}

// register a call covering xids [lo, hi] completed by last.
func (s *session) register(lo, hi, last uint32) (*call, error) {
	cl := &call{lo: lo, hi: hi, last: last, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, ErrNotConnected
	}
	if lo == hi {
		s.calls[lo] = cl
	} else {
		s.ranges = append(s.ranges, cl)
	}
	return cl, nil
}

func (s *session) unregister(cl *call) {
	s.mu.Lock()
	if !cl.fin {
		s.finish(cl)
	}
	s.mu.Unlock()
}

// send writes msg and flushes.
func (s *session) send(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.w.Write(msg); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *session) wait(ctx context.Context, cl *call) error {
	var expired <-chan time.Time
	if s.timeout > 0 {
		t := time.NewTimer(s.timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		s.unregister(cl)
		return ctx.Err()
	case <-expired:
		err := fmt.Errorf("%w: no reply in %s (of_request_timeout)", ErrTimeout, s.timeout)
		s.fail(err)
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	s.mu.Lock()
	err, aborted := s.err, cl.aborted
	s.mu.Unlock()
	if aborted {
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return nil
}

// Barrier sends a barrier request and waits for its reply.
func (c *Conn) Barrier(ctx context.Context) error {
	s, xid, err := c.begin(1)
	if err != nil {
		return err
	}
	cl, err := s.register(xid, xid, xid)
	if err != nil {
		return err
	}
	if err := s.send(AppendSimple(nil, TypeBarrierRequest, xid, nil)); err != nil {
		s.fail(err)
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	if err := s.wait(ctx, cl); err != nil {
		return err
	}
	if len(cl.errs) > 0 {
		return cl.errs[0]
	}
	return nil
}

// DumpFlows returns the flows of table (TableAll for every table) whose
// cookie matches cookie under cookieMask (0 mask: every flow).
func (c *Conn) DumpFlows(ctx context.Context, table uint8, cookie, cookieMask uint64) ([]Flow, error) {
	s, xid, err := c.begin(1)
	if err != nil {
		return nil, err
	}
	cl, err := s.register(xid, xid, xid)
	if err != nil {
		return nil, err
	}
	if err := s.send(AppendFlowStatsRequest(nil, xid, table, cookie, cookieMask)); err != nil {
		s.fail(err)
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	if err := s.wait(ctx, cl); err != nil {
		return nil, err
	}
	if len(cl.errs) > 0 {
		return nil, fmt.Errorf("openflow: dump flows: %w", cl.errs[0])
	}
	var flows []Flow
	for _, r := range cl.replies {
		fs, _, err := DecodeFlowStatsReply(r)
		if err != nil {
			return nil, fmt.Errorf("openflow: dump flows: %w", err)
		}
		flows = append(flows, fs...)
	}
	return flows, nil
}

// Bundle applies mods as one atomic, ordered ONF bundle: either all of them
// take effect or none does. An empty list is a no-op.
//
// OVS rejects a malformed flow_mod when it is added to the bundle but would
// still commit the others, so the adds are followed by a barrier: if any add
// failed the bundle is discarded, else committed (where the remaining
// checks, e.g. groups, happen atomically).
func (c *Conn) Bundle(ctx context.Context, mods []FlowMod) error {
	if len(mods) == 0 {
		return nil
	}
	n := uint32(len(mods)) + 3 // open, adds, barrier, commit/discard
	s, lo, err := c.begin(n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.bundleID++
	bid := c.bundleID
	c.mu.Unlock()
	barrier, hi := lo+n-2, lo+n-1
	stage1, err := s.register(lo, barrier, barrier)
	if err != nil {
		return err
	}
	const flags = bundleFlagAtomic | bundleFlagOrdered
	var encErr error
	s.wmu.Lock()
	// Tens of thousands of flow_mods are megabytes that ovs-vswitchd reads
	// at its own pace (seconds when it is busy restoring every bridge). A
	// cancelled ctx (the agent stopping) interrupts the writes; the session
	// then dies with its half-sent bundle, which the switch discards.
	stopInterrupt := context.AfterFunc(ctx, func() {
		s.interrupted.Store(true)
		_ = s.c.SetWriteDeadline(time.Now())
	})
	buf := make([]byte, 0, 512)
	buf = AppendBundleControl(buf, lo, bid, bundleOpenReq, flags)
	_, werr := s.w.Write(buf)
	for i := range mods {
		if werr != nil {
			break
		}
		buf, err = AppendBundleAddFlowMod(buf[:0], lo+1+uint32(i), bid, flags, &mods[i])
		if err != nil {
			encErr = fmt.Errorf("openflow: encode flow_mod %d (%s%s): %w", i, mods[i].Command, mods[i].Flow.String(), err)
			break
		}
		_, werr = s.w.Write(buf)
	}
	if werr == nil {
		_, werr = s.w.Write(AppendSimple(buf[:0], TypeBarrierRequest, barrier, nil))
	}
	if werr == nil {
		werr = s.w.Flush()
	}
	if !stopInterrupt() && werr == nil {
		// cancelled right after the last write: the deadline is set, the
		// session must not keep it
		werr = ctx.Err()
	}
	s.wmu.Unlock()
	if werr != nil {
		s.fail(werr)
		return fmt.Errorf("%w: %w", ErrNotConnected, werr)
	}
	if err := s.wait(ctx, stage1); err != nil {
		// best effort: do not leave the bundle open on the switch
		_ = s.send(AppendBundleControl(nil, hi, bid, bundleDiscardReq, flags))
		return err
	}
	stage2, err := s.register(lo, hi, hi)
	if err != nil {
		return err
	}
	ctl := uint16(bundleCommitReq)
	if encErr != nil || len(stage1.errs) > 0 {
		ctl = bundleDiscardReq
	}
	if err := s.send(AppendBundleControl(nil, hi, bid, ctl, flags)); err != nil {
		s.fail(err)
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	if err := s.wait(ctx, stage2); err != nil {
		return err
	}
	if encErr != nil {
		return encErr
	}
	errs := append(stage1.errs, stage2.errs...)
	if len(errs) == 0 {
		for _, r := range stage2.replies {
			if binary.BigEndian.Uint32(r[4:]) == hi {
				return nil
			}
		}
		return fmt.Errorf("openflow: bundle commit: no reply")
	}
	// report the first error that names a flow_mod; else the commit error
	be := &BundleError{Index: -1, Err: errs[0]}
	for _, e := range errs {
		if e.Xid > lo && e.Xid < barrier {
			i := int(e.Xid - lo - 1)
			if be.Index < 0 {
				be.Index, be.Cmd, be.Flow, be.Err = i, mods[i].Command, mods[i].Flow.String(), e
			}
			be.Rejected = append(be.Rejected, RejectedMod{Index: i, Err: e})
		}
	}
	return be
}
