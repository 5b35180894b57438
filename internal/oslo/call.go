package oslo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Target addresses a message: exchange <ControlExchange> with key <Topic> or
// <Topic>.<Server>, or, for a Fanout cast, the <Topic>_fanout exchange.
type Target struct {
	Topic     string
	Server    string
	Version   string
	Namespace string
	Fanout    bool
}

// CallOption adjusts one Call.
type CallOption func(*callOptions)

type callOptions struct {
	timeout time.Duration
	context []ContextField
}

// WithTimeout sets this call's timeout and bypasses the per-method backoff, like a
// neutron-lib client prepared with an explicit timeout (report_state).
func WithTimeout(d time.Duration) CallOption { return func(o *callOptions) { o.timeout = d } }

// WithContext replaces the admin request context sent with the message.
func WithContext(fields []ContextField) CallOption {
	return func(o *callOptions) { o.context = fields }
}

type waiter struct {
	ch     chan *reply
	result json.RawMessage // last non-null result of a multi-part reply
}

// MethodTimeout is the timeout the next Call of method (without WithTimeout) will use.
func (t *Transport) MethodTimeout(tgt Target, method string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.timeouts[scopedMethod(tgt, method)]; ok {
		return d
	}
	return t.cfg.ResponseTimeout
}

// CapTimeouts lowers every method's timeout, and the default and maximum, to d
// (neutron-lib's set_max_timeout; the agent calls it with quitting_rpc_timeout on
// SIGTERM). Calls with WithTimeout are not affected.
func (t *Transport) CapTimeouts(d time.Duration) {
	if d <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if d >= t.cfg.ResponseMaxTimeout {
		return
	}
	t.cfg.ResponseMaxTimeout = d
	t.cfg.ResponseTimeout = min(t.cfg.ResponseTimeout, d)
	for k, v := range t.timeouts {
		t.timeouts[k] = min(v, d)
	}
}

func scopedMethod(tgt Target, method string) string {
	if tgt.Namespace == "" {
		return method
	}
	return tgt.Namespace + "." + method
}

// Call sends method to tgt and waits for its result. Failures raised by the server come
// back as *RemoteError; no reply in time gives an error wrapping ErrTimeout, after which
// (unless WithTimeout was given) the method's timeout doubles up to ResponseMaxTimeout and
// the caller sleeps random(0, min(timeout, ResponseTimeout)) as neutron-lib's
// BackingOffClient does.
func (t *Transport) Call(ctx context.Context, tgt Target, method string, args any, opts ...CallOption) (json.RawMessage, error) {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	if tgt.Topic == "" {
		return nil, errors.New("oslo: call: empty topic")
	}
	if tgt.Fanout {
		return nil, errors.New("oslo: call: a fanout target cannot be called")
	}
	explicit := o.timeout > 0
	timeout := o.timeout
	if !explicit {
		timeout = t.MethodTimeout(tgt, method)
	}
	start := time.Now()
	res, err := t.call(ctx, tgt, method, args, timeout, o.context)
	t.mu.Lock()
	t.stats.Calls++
	if err != nil {
		t.stats.CallErrors++
	}
	t.mu.Unlock()
	t.obs.CallDone(method, time.Since(start), err)
	if errors.Is(err, ErrTimeout) && !explicit && !t.cfg.DisableBackoff {
		t.backoff(ctx, tgt, method, timeout)
	}
	return res, err
}

func (t *Transport) backoff(ctx context.Context, tgt Target, method string, timeout time.Duration) {
	key := scopedMethod(tgt, method)
	t.mu.Lock()
	next := min(2*timeout, t.cfg.ResponseMaxTimeout)
	respTimeout := t.cfg.ResponseTimeout
	cur, ok := t.timeouts[key]
	if !ok {
		cur = t.cfg.ResponseTimeout
	}
	if next > cur {
		t.timeouts[key] = next
		t.log.Warn("oslo: increasing RPC timeout", "method", key, "timeout", next)
	}
	t.mu.Unlock()
	wait := time.Duration(rand.Int64N(int64(min(timeout, respTimeout)) + 1))
	t.log.Error("oslo: RPC timeout, waiting before next attempt", "method", key, "wait", wait.Round(time.Millisecond))
	if t.cfg.BackoffSleep != nil {
		t.cfg.BackoffSleep(ctx, wait)
		return
	}
	sleepCtx(ctx, wait)
}

func (t *Transport) call(parent context.Context, tgt Target, method string, args any, timeout time.Duration, cctx []ContextField) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	if err := t.ensureReply(ctx); err != nil {
		return nil, t.callErr(parent, ctx, err, tgt, method, "", timeout)
	}
	msgID := newID()
	if cctx == nil {
		cctx = AdminContext(time.Now())
	}
	body, err := encodeRequest(&outgoing{Method: method, Args: args, Version: tgt.Version, Namespace: tgt.Namespace,
		MsgID: msgID, ReplyQ: t.replyQ, UniqueID: newID(), Context: cctx})
	if err != nil {
		return nil, err
	}
	w := &waiter{ch: make(chan *reply, 1)}
	t.mu.Lock()
	t.waiters[msgID] = w
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waiters, msgID)
		t.mu.Unlock()
	}()
	msg := basePublishing(body)
	msg.Expiration = strconv.FormatInt(timeout.Milliseconds(), 10)
	if err := t.publishCall(ctx, routingKey(tgt), msg); err != nil {
		return nil, t.callErr(parent, ctx, err, tgt, method, msgID, timeout)
	}
	select {
	case r := <-w.ch:
		if r.Failure != nil {
			return nil, r.Failure
		}
		return r.Result, nil
	case <-ctx.Done():
		return nil, t.callErr(parent, ctx, ctx.Err(), tgt, method, msgID, timeout)
	case <-t.ctx.Done():
		return nil, ErrClosed
	}
}

// publishCall publishes a call with mandatory set. When no queue is bound for its key —
// no server consumes the topic, e.g. neutron-server still reconnecting after a broker
// restart — the broker returns it and it is published again every 500 ms within the
// call's deadline, instead of vanishing and costing the caller a whole timeout.
func (t *Transport) publishCall(ctx context.Context, key string, msg amqp.Publishing) error {
	ex := t.controlExchange()
	for attempt := 0; ; attempt++ {
		sess, err := t.session(ctx)
		if err != nil {
			return err
		}
		err = sess.publishMandatory(ctx, ex, key, msg)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errNoRoute) {
			// The usual path declares the exchange and retries on a new connection.
			return t.publish(ctx, ex, key, msg)
		}
		if attempt == 0 {
			t.log.Info("oslo: no server consumes the topic yet; publishing again until the call's deadline", "key", key)
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// callErr turns our own deadline into a TimeoutError; the caller's cancellation or
// deadline stays a ctx error (and does not feed the backoff).
func (t *Transport) callErr(parent, ctx context.Context, err error, tgt Target, method, msgID string, timeout time.Duration) error {
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("oslo: call %s on %s: %w", method, routingKey(tgt), perr)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Method: method, Topic: routingKey(tgt), MsgID: msgID, Timeout: timeout.String()}
	}
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("oslo: call %s on %s: %w", method, routingKey(tgt), err)
}

func routingKey(tgt Target) string {
	if tgt.Server != "" {
		return tgt.Topic + "." + tgt.Server
	}
	return tgt.Topic
}

// Cast sends method to tgt without waiting: to <ControlExchange> with key <Topic> or
// <Topic>.<Server>, or to <Topic>_fanout (key "") when tgt.Fanout.
func (t *Transport) Cast(ctx context.Context, tgt Target, method string, args any) error {
	if tgt.Topic == "" {
		return errors.New("oslo: cast: empty topic")
	}
	body, err := encodeRequest(&outgoing{Method: method, Args: args, Version: tgt.Version, Namespace: tgt.Namespace,
		UniqueID: newID(), Context: AdminContext(time.Now())})
	if err != nil {
		return err
	}
	if tgt.Fanout {
		return t.publish(ctx, t.fanoutExchange(tgt.Topic), "", basePublishing(body))
	}
	return t.publish(ctx, t.controlExchange(), routingKey(tgt), basePublishing(body))
}

// ensureReply declares and consumes the reply queue the first time a call needs it.
func (t *Transport) ensureReply(ctx context.Context) error {
	t.mu.Lock()
	t.wantReply = true
	t.mu.Unlock()
	for {
		sess, err := t.session(ctx)
		if err != nil {
			return err
		}
		err = t.declareReply(sess)
		if err == nil {
			t.mu.Lock()
			if t.declErr != nil && t.declErr.Queue == t.replyQ {
				t.declErr = nil
			}
			t.mu.Unlock()
			return nil
		}
		if !sess.conn.IsClosed() {
			// The next call declares it again.
			t.declareFailed(sess, err)
			return fmt.Errorf("oslo: reply queue %s: %w", t.replyQ, err)
		}
	}
}

func (t *Transport) declareReply(sess *session) error {
	sess.replyMu.Lock()
	defer sess.replyMu.Unlock()
	if sess.replyConsumer {
		return nil
	}
	ch, err := sess.conn.Channel()
	if err != nil {
		return err
	}
	q := t.replyQueue()
	if err := t.declareQueue(sess, &ch, q); err != nil {
		_ = ch.Close()
		return err
	}
	if err := ch.Qos(t.cfg.PrefetchCount, 0, false); err != nil {
		_ = ch.Close()
		return fmt.Errorf("basic.qos prefetch %d: %w", t.cfg.PrefetchCount, err)
	}
	dels, err := ch.Consume(q.name, "", false, false, false, false, t.consumerArgs(q, nil))
	if err != nil {
		_ = ch.Close()
		return &DeclareError{Queue: q.name, Op: "consume", Err: err}
	}
	if !t.spawn(func() {
		for d := range dels {
			_ = d.Ack(false)
			t.handleReply(d.Body)
		}
		t.consumerGone(sess, t.replyQ)
	}) {
		_ = ch.Close()
		return ErrClosed
	}
	sess.replyConsumer = true
	return nil
}

func (t *Transport) handleReply(body []byte) {
	r, err := decodeReply(body, t.cfg.MaxReplyBytes)
	if err != nil {
		t.drop("reply", t.replyQ, reasonOf(err), err, len(body))
		return
	}
	if t.replyDedup.seen(r.UniqueID) {
		t.drop("reply", t.replyQ, ReasonDuplicate, fmt.Errorf("duplicate _unique_id %s", r.UniqueID), len(body))
		return
	}
	t.mu.Lock()
	w := t.waiters[r.MsgID]
	if w == nil {
		t.mu.Unlock()
		t.drop("reply", t.replyQ, ReasonUnknownMsgID, fmt.Errorf("no caller waits for msg_id %s", r.MsgID), len(body))
		return
	}
	if !r.Ending {
		// A partial result from a very old server, or a call-monitor heartbeat.
		if r.Result != nil {
			w.result = r.Result
		}
		if r.Failure == nil {
			t.mu.Unlock()
			return
		}
	}
	if r.Result == nil && r.Failure == nil {
		r.Result = w.result
	}
	t.mu.Unlock()
	select {
	case w.ch <- r:
	default:
	}
}

func reasonOf(err error) string {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Reason
	}
	return ReasonBadField
}

// consumerGone runs when a delivery channel closes. Unless the transport or the
// connection is going away anyway, the broker cancelled us (queue deleted, channel
// error): drop the connection so the run loop redeclares everything.
func (t *Transport) consumerGone(sess *session, queue string) {
	if t.ctx.Err() != nil || sess.conn.IsClosed() {
		return
	}
	t.log.Warn("oslo: consumer cancelled by broker, reconnecting", "queue", queue)
	_ = sess.conn.Close()
}
