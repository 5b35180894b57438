// Package oslo is an oslo.messaging-compatible RabbitMQ driver: the 2.0 envelope,
// call/cast/fanout to neutron-server, an RPC server with oslo's dispatch rules, one reply
// queue per process, and reconnection that keeps every queue name.
package oslo

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Config holds the [DEFAULT]/[oslo_messaging_rabbit] settings the driver uses. Zero
// values take the reference defaults (see withDefaults).
type Config struct {
	URL TransportURL
	// TLS enables amqps when non-nil. Its ServerName is ignored: each
	// connection names the broker it dials.
	TLS *tls.Config
	// Host is CONF.host: the server queue of every topic is <topic>.<Host>.
	Host string
	// ControlExchange is the topic exchange, "neutron" for Neutron.
	ControlExchange string

	// HeartbeatTimeout is negotiated as the AMQP heartbeat (heartbeat_timeout_threshold,
	// 60s). amqp091 then beats every HeartbeatTimeout/2, which is what the reference's
	// HeartbeatRate 2 gives ([oslo_messaging_rabbit] heartbeat_rate has no effect: see the
	// option table).
	HeartbeatTimeout time.Duration

	// Reconnect delays: RetryInterval, then +RetryBackoff per failed attempt, capped at
	// RetryMax (rabbit_retry_interval/rabbit_retry_backoff/rabbit_interval_max).
	RetryInterval, RetryBackoff, RetryMax time.Duration

	TransientQueuesTTL time.Duration // rabbit_transient_queues_ttl, 1800s (x-expires)
	ResponseTimeout    time.Duration // rpc_response_timeout, 60s
	ResponseMaxTimeout time.Duration // rpc_response_max_timeout, 600s

	Logger *slog.Logger

	// Observer receives counters (nil: none). It must not block.
	Observer Observer
	// MaxMessageBytes bounds received requests (0: DefaultMaxMessageBytes).
	MaxMessageBytes int
	// MaxReplyBytes bounds received replies, which can be large bulk_pull results
	// (0: DefaultMaxReplyBytes).
	MaxReplyBytes int
	// BackoffSleep replaces the sleep after a call timeout (neutron-lib's random wait);
	// nil sleeps for real, honouring ctx.
	BackoffSleep func(ctx context.Context, d time.Duration)
	// DisableBackoff turns the per-method timeout doubling and sleep off for every call.
	DisableBackoff bool
	// PrefetchCount is the AMQP basic.qos prefetch of every consumer
	// (rabbit_qos_prefetch_count). oslo's 0 means unlimited: the broker then pushes a
	// whole queue into the client, which buffers it in memory. Here 0 means
	// DefaultPrefetchCount, so a flooded queue costs at most that many bodies held.
	PrefetchCount int
	// MaxReplySenders bounds the replies being sent (or retried, see
	// MissingReplyQueueTimeout) at once (0: DefaultMaxReplySenders). The agent serves no
	// call neutron-server makes, so a reply beyond it is dropped and counted.
	MaxReplySenders int
	// MissingReplyQueueTimeout is how long a reply to a queue that does not exist is
	// retried (kombu_missing_consumer_retry_timeout, 60s).
	MissingReplyQueueTimeout time.Duration
	// keepHostOrder dials the brokers in the URL's order instead of oslo's shuffled
	// one (tests that need to know which broker comes first).
	keepHostOrder bool
	// Queues shapes the declarations (queue types, durability, names) as oslo's options.
	Queues Queues
}

// Observer lets internal/metrics count without this package importing Prometheus.
type Observer interface {
	CallDone(method string, d time.Duration, err error)
	Dropped(topic, reason string)
	Reconnected()
}

type nopObserver struct{}

func (nopObserver) CallDone(string, time.Duration, error) {}
func (nopObserver) Dropped(string, string)                {}
func (nopObserver) Reconnected()                          {}

func (c Config) withDefaults() Config {
	if c.ControlExchange == "" {
		c.ControlExchange = "neutron"
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, 60*time.Second)
	def(&c.RetryInterval, time.Second)
	def(&c.RetryBackoff, 2*time.Second)
	def(&c.RetryMax, 30*time.Second)
	def(&c.TransientQueuesTTL, 1800*time.Second)
	def(&c.ResponseTimeout, 60*time.Second)
	def(&c.ResponseMaxTimeout, 600*time.Second)
	def(&c.MissingReplyQueueTimeout, 60*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Queues.UseQueueManager {
		if c.Queues.Hostname == "" {
			c.Queues.Hostname, _ = os.Hostname()
		}
		if c.Queues.ProcessName == "" {
			c.Queues.ProcessName = filepath.Base(os.Args[0])
		}
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxReplyBytes <= 0 {
		c.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if c.MaxReplySenders <= 0 {
		c.MaxReplySenders = DefaultMaxReplySenders
	}
	if c.PrefetchCount <= 0 {
		c.PrefetchCount = c.Queues.Prefetch // the same option, given to the declarations
	}
	if c.PrefetchCount <= 0 {
		c.PrefetchCount = DefaultPrefetchCount
	}
	return c
}

// DefaultPrefetchCount is each consumer's prefetch when none is configured. Messages
// are acked on receipt and handled one at a time per queue, so a window of 2 keeps the
// next message on its way while one is handled: no throughput is lost, and a flood of a
// queue holds at most 2 bodies in this process besides the one being handled.
const DefaultPrefetchCount = 2

// DefaultMaxReplySenders: each reply to a missing queue is retried for up to a minute,
// so without a bound every forged call would hold a goroutine for that long.
const DefaultMaxReplySenders = 8

// obsoleteReplyQueues is how many reply queues found missing are remembered (oslo's
// ObsoleteReplyQueuesCache holds 200): a reply to one of them is dropped at once.
const obsoleteReplyQueues = 200

// Stats is a snapshot of the transport's counters.
type Stats struct {
	Connected  bool
	Reconnects uint64
	Calls      uint64
	CallErrors uint64
	// Dropped counts dropped received messages by reason (Reason* constants).
	Dropped map[string]uint64
	// DeclareFailures counts declares, binds and consumes the broker refused.
	DeclareFailures uint64
}

// Transport is one process's connection to the broker: publishers, the reply queue and
// every RPC server registered with Serve.
type Transport struct {
	cfg  Config
	log  *slog.Logger
	obs  Observer
	id   string // distinguishes this process's connection in the broker's list
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	replyQ string
	qm     *queueManager // nil without use_queue_manager

	mu          sync.Mutex
	sess        *session
	up          chan struct{} // closed while connected
	gen         uint64
	servers     []*server
	wantReply   bool
	waiters     map[string]*waiter
	onReconnect []func()
	timeouts    map[string]time.Duration
	stats       Stats
	closed      bool
	declErr     *DeclareError // the last declaration failure, until declareAll succeeds

	replyDedup dedup

	now     func() time.Time
	dropLog logLimiter // the log lines of dropped messages (the counters see every one)

	replySlots chan struct{}       // one per reply being sent
	obsolete   map[string]struct{} // reply queues a reply was dropped for, under mu
	obsoleteQ  []string            // … oldest first
}

// session is one AMQP connection and the channels opened on it.
type session struct {
	conn *amqp.Connection
	gen  uint64

	pubMu    sync.Mutex
	pubCh    *amqp.Channel
	declared map[string]bool

	repMu       sync.Mutex
	repCh       *amqp.Channel
	returns     chan amqp.Return
	repDeclared map[string]bool

	replyMu       sync.Mutex
	replyConsumer bool
}

// Dial starts the transport. It returns at once when the broker is unreachable; the
// connection is retried in the background and every operation waits for it.
func Dial(ctx context.Context, cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	if len(cfg.URL.Hosts) == 0 {
		return nil, fmt.Errorf("oslo: dial: transport_url has no host")
	}
	if err := cfg.Queues.Validate(); err != nil {
		return nil, fmt.Errorf("oslo: dial: %w", err)
	}
	if !cfg.keepHostOrder {
		cfg.URL.Hosts = shuffledHosts(cfg.URL.Hosts, rand.Shuffle)
	}
	t := &Transport{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "oslo"),
		obs:      cfg.Observer,
		id:       newID()[:8],
		up:       make(chan struct{}),
		waiters:  make(map[string]*waiter),
		timeouts: make(map[string]time.Duration),
		stats:    Stats{Dropped: make(map[string]uint64)},
	}
	t.initBounds()
	if cfg.Queues.UseQueueManager {
		t.qm = &queueManager{host: cfg.Queues.Hostname, proc: cfg.Queues.ProcessName}
	}
	// oslo's RabbitDriver names the reply queue reply_<queue manager name> or reply_<uuid>.
	t.replyQ = "reply_" + t.unique()
	t.ctx, t.stop = context.WithCancel(context.WithoutCancel(ctx))
	first := make(chan error, 1)
	t.wg.Add(1)
	go t.run(first)
	// Give a reachable broker the chance to be up before Dial returns, so callers
	// usually start connected; a down broker is not an error.
	select {
	case err := <-first:
		if err != nil {
			t.log.Warn("oslo: broker not reachable yet, retrying in background", "url", cfg.URL.String(), "err", err)
		}
	case <-ctx.Done():
	}
	return t, nil
}

// ReplyQueue is this process's reply queue name (reply_<uuid hex>).
func (t *Transport) ReplyQueue() string { return t.replyQ }

// OnReconnect registers f to run (in its own goroutine) after every successful
// re-connection, once every consumer has been declared again.
func (t *Transport) OnReconnect(f func()) {
	t.mu.Lock()
	t.onReconnect = append(t.onReconnect, f)
	t.mu.Unlock()
}

// Connected reports whether a broker connection is currently up.
func (t *Transport) Connected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess != nil
}

// Stats returns a copy of the counters.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Connected = t.sess != nil
	s.Dropped = make(map[string]uint64, len(t.stats.Dropped))
	for k, v := range t.stats.Dropped {
		s.Dropped[k] = v
	}
	return s
}

// Close stops every consumer and closes the connection. Pending calls fail with ErrClosed.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	sess := t.sess
	t.mu.Unlock()
	t.stop()
	var err error
	if sess != nil {
		err = sess.conn.Close()
	}
	t.wg.Wait()
	if err != nil && err != amqp.ErrClosed {
		return fmt.Errorf("oslo: close: %w", err)
	}
	return nil
}

func (t *Transport) run(first chan<- error) {
	defer t.wg.Done()
	failed := 0        // consecutive failed connection attempts
	prev := -1         // index in URL.Hosts of the previous attempt's broker
	setupFailures := 0 // consecutive connections whose consumers could not be declared
	hadSession := false
	for t.ctx.Err() == nil {
		idx, wait := nextDial(len(t.cfg.URL.Hosts), prev, failed, t.retryDelay)
		if !sleepCtx(t.ctx, wait) {
			return
		}
		prev = idx
		dialStart := time.Now()
		sess, err := t.connect(idx)
		if err != nil && first != nil {
			first <- err
			first = nil
		}
		if err != nil {
			failed++
			_, d := nextDial(len(t.cfg.URL.Hosts), prev, failed, t.retryDelay)
			t.log.Warn("oslo: connect failed", "url", t.cfg.URL.String(), "host", t.cfg.URL.Hosts[idx].Addr(),
				"attempt", failed, "retry_in", d, "err", err)
			continue
		}
		failed = 0
		closed := sess.conn.NotifyClose(make(chan *amqp.Error, 1))
		blocked := sess.conn.NotifyBlocked(make(chan amqp.Blocking, 4))
		go func() { // ends when the connection closes the channel
			for b := range blocked {
				if b.Active {
					t.log.Warn("oslo: broker blocked publishing on this connection (resource alarm)", "reason", b.Reason)
				} else {
					t.log.Info("oslo: broker unblocked publishing")
				}
			}
		}()
		servers, wantReply, callbacks := t.activate(sess)
		if err := t.declareAll(sess, servers, wantReply); err != nil {
			setupFailures++
			t.declareFailed(sess, err)
			_ = sess.conn.Close()
		} else {
			setupFailures = 0
			t.mu.Lock()
			t.declErr = nil
			t.mu.Unlock()
			// setup: from the dial to every consumer declared (on a cluster, quorum
			// queues whose leader died answer once a new leader is elected)
			t.log.Info("oslo: connected", "url", t.cfg.URL.String(), "host", t.cfg.URL.Hosts[idx].Addr(),
				"reply_queue", t.replyQ, "reconnect", hadSession, "setup", time.Since(dialStart).Round(time.Millisecond))
			if hadSession {
				t.mu.Lock()
				t.stats.Reconnects++
				t.mu.Unlock()
				t.obs.Reconnected()
				for _, f := range callbacks {
					go f()
				}
			}
			hadSession = true
		}
		if first != nil {
			first <- nil
			first = nil
		}
		select {
		case e := <-closed:
			t.deactivate(sess)
			if t.ctx.Err() != nil {
				return
			}
			if e == nil {
				t.log.Warn("oslo: connection closed, reconnecting")
			} else {
				t.log.Warn("oslo: connection lost", "err", e)
			}
		case <-t.ctx.Done():
			t.deactivate(sess)
			_ = sess.conn.Close()
			return
		}
		// After a lost connection, the retry interval before the next broker, as
		// oslo ("Trying again in 1 seconds"): when a cluster node dies, the others
		// delete its classic (non-quorum) queues a few hundred ms after noticing;
		// a reply or fanout queue re-declared before that is the dead node's and
		// is deleted under its consumer, without a cancel (seen: replies lost for
		// good, every call timing out).
		if !sleepCtx(t.ctx, t.retryDelay(setupFailures)) {
			return
		}
	}
}

// nextDial is kombu's round-robin failover, which oslo.messaging uses
// (kombu_failover_strategy): each attempt goes to the broker after the previous
// attempt's one, at once, until every broker has failed once in a row; only then
// does it wait the retry delay (delay(0), delay(1)... per full round). hosts is the
// number of brokers in transport_url, prev the index of the previous attempt's
// broker (-1 before the first), failed the consecutive failed attempts. A lost
// connection is prev with failed 0: the next broker (run has waited the retry
// interval), so a killed cluster node costs no dial to it.
func nextDial(hosts, prev, failed int, delay func(int) time.Duration) (idx int, wait time.Duration) {
	idx = (prev + 1) % hosts
	if failed > 0 && failed%hosts == 0 {
		wait = delay(failed/hosts - 1)
	}
	return idx, wait
}

// shuffledHosts is a copy of hosts in the order shuffle gives, as oslo's rabbit
// driver shuffles transport_url's brokers once per connection: the processes of a
// cloud spread over the cluster's nodes instead of all starting on the first one
// (and all failing over together when it dies). Failover then goes round-robin
// through this order (nextDial).
func shuffledHosts(hosts []Host, shuffle func(n int, swap func(i, j int))) []Host {
	out := append([]Host(nil), hosts...)
	if len(out) > 1 {
		shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// retryDelay follows kombu's ensure(): interval_start, +interval_step each time, capped.
func (t *Transport) retryDelay(attempt int) time.Duration {
	d := t.cfg.RetryInterval + time.Duration(attempt)*t.cfg.RetryBackoff
	if d > t.cfg.RetryMax {
		d = t.cfg.RetryMax
	}
	return d
}

// connect dials URL.Hosts[idx].
func (t *Transport) connect(idx int) (*session, error) {
	h := t.cfg.URL.Hosts[idx]
	scheme := "amqp"
	var tc *tls.Config
	if t.cfg.TLS != nil {
		scheme = "amqps"
		// amqp091 fills an empty ServerName in the config it is given, so a
		// shared config would check every broker against the first one's
		// name: each connection gets a copy naming its own broker.
		tc = t.cfg.TLS.Clone()
		tc.ServerName = h.Host
	}
	user, pass := h.User, h.Password
	if user == "" {
		user, pass = "guest", "guest"
	}
	// The credentials go to SASL, not into the URI amqp091 re-parses: a
	// parse error there would quote the URI with the password.
	uri := amqp.URI{Scheme: scheme, Host: h.Host, Port: h.Port, Username: "guest", Password: "guest", Vhost: t.cfg.URL.VHost}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(fmt.Sprintf("ovsagent:%s:%d:%s", t.cfg.Host, os.Getpid(), t.id))
	conn, err := amqp.DialConfig(uri.String(), amqp.Config{
		SASL:            []amqp.Authentication{&amqp.PlainAuth{Username: user, Password: pass}},
		Heartbeat:       t.cfg.HeartbeatTimeout,
		TLSClientConfig: tc,
		Properties:      props,
		Locale:          "en_US",
		Dial:            amqp.DefaultDial(10 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("oslo: dial %s: %w", h.Addr(), err)
	}
	t.mu.Lock()
	t.gen++
	gen := t.gen
	t.mu.Unlock()
	return &session{conn: conn, gen: gen, declared: make(map[string]bool)}, nil
}

func (t *Transport) activate(sess *session) ([]*server, bool, []func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sess = sess
	close(t.up)
	return append([]*server(nil), t.servers...), t.wantReply, append([]func(){}, t.onReconnect...)
}

func (t *Transport) deactivate(sess *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sess == sess {
		t.sess = nil
		t.up = make(chan struct{})
	}
}

func (t *Transport) declareAll(sess *session, servers []*server, wantReply bool) error {
	if wantReply {
		if err := t.declareReply(sess); err != nil {
			return err
		}
	}
	for _, s := range servers {
		if err := s.declare(sess); err != nil {
			return err
		}
	}
	return nil
}

// session waits until a connection is up (or ctx ends).
func (t *Transport) session(ctx context.Context) (*session, error) {
	for {
		t.mu.Lock()
		sess, up, closed := t.sess, t.up, t.closed
		t.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if sess != nil && !sess.conn.IsClosed() {
			return sess, nil
		}
		if sess != nil {
			// Closed under us; wait for run to notice and replace it.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.ctx.Done():
				return nil, ErrClosed
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// drop logs and counts one dropped message; it is the only log line for that message.
func (t *Transport) drop(topic, queue, reason string, err error, size int) {
	t.mu.Lock()
	t.stats.Dropped[reason]++
	t.mu.Unlock()
	t.obs.Dropped(topic, reason)
	ok, suppressed := t.dropLog.allow(t.clock())
	if !ok {
		return
	}
	attrs := []any{"topic", topic, "queue", queue, "reason", reason, "bytes", size, "err", err}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	t.log.Warn("oslo: dropping message", attrs...)
}

// clock is t.now, or the wall clock for a Transport built without Dial (tests).
func (t *Transport) clock() time.Time {
	if t.now == nil {
		return time.Now()
	}
	return t.now()
}

// Dropped messages are logged up to dropLogBurst lines at once, then one line per
// dropLogEvery: a flood of bad messages must not become a flood of log lines. The next
// line logged says how many were not ("suppressed").
const (
	dropLogBurst = 20
	dropLogEvery = 3 * time.Second
)

// logLimiter is a token bucket of log lines.
type logLimiter struct {
	mu         sync.Mutex
	started    bool
	tokens     float64
	last       time.Time
	suppressed uint64
}

// allow reports whether a line may be logged at now, and how many lines were
// suppressed since the last one allowed.
func (l *logLimiter) allow(now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started, l.tokens, l.last = true, dropLogBurst, now
	}
	if d := now.Sub(l.last); d > 0 {
		l.tokens = min(dropLogBurst, l.tokens+float64(d)/float64(dropLogEvery))
		l.last = now
	}
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	n := l.suppressed
	l.suppressed = 0
	return true, n
}

func (t *Transport) initBounds() {
	t.now = time.Now
	t.replySlots = make(chan struct{}, t.cfg.MaxReplySenders)
	t.obsolete = make(map[string]struct{})
}

// spawn runs f in a goroutine Close waits for; it refuses once Close has started, so no
// WaitGroup.Add can race with Close's Wait.
func (t *Transport) spawn(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// dedup remembers the last 16 _unique_id values, like oslo's _MsgIdCache.
type dedup struct {
	mu   sync.Mutex
	ids  [16]string
	next int
}

func (d *dedup) seen(id string) bool {
	if id == "" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.ids {
		if x == id {
			return true
		}
	}
	d.ids[d.next] = id
	d.next = (d.next + 1) % len(d.ids)
	return false
}
