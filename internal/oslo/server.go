package oslo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Request is a received call or cast.
type Request struct {
	Method    string
	Version   string // "1.0" when the sender gave none
	Namespace string // "" for None
	Args      json.RawMessage

	inner []byte // the whole inner message, for DecodeContext
}

// Handler serves one method. The result is JSON-encoded into the reply of a call; an
// error becomes the reply's failure (a *RemoteError is sent as is).
type Handler func(ctx context.Context, req *Request) (any, error)

// Endpoint is an oslo RPC endpoint: a target namespace and version and its methods.
type Endpoint struct {
	Namespace string
	Version   string // "1.0" when empty
	Methods   map[string]Handler
}

type server struct {
	t         *Transport
	topic     string
	fanoutQ   string
	endpoints []Endpoint
	dedup     dedup

	mu  sync.Mutex
	gen uint64 // session generation the consumers were declared on

	streamNext atomic.Int64 // next stream offset to read; -1: "last"
}

// Serve starts an RPC server for topic the way oslo does: queues <topic> and
// <topic>.<Host> bound to the control exchange, and <topic>_fanout_<uuid hex> (x-expires)
// bound to the <topic>_fanout exchange. Messages are acked on receipt, then dispatched
// in order per queue. The queues are redeclared, with the same names, on every reconnect.
// When the broker is down, or refuses a declaration (logged as an ERROR, counted, shown
// by DeclareCheck), Serve returns nil and the consumers start once it is back or fixed.
// Queue types, durability and names follow Config.Queues (declare.go).
func (t *Transport) Serve(topic string, eps ...Endpoint) error {
	if topic == "" {
		return errors.New("oslo: serve: empty topic")
	}
	if len(eps) == 0 {
		return fmt.Errorf("oslo: serve %s: no endpoints", topic)
	}
	for i := range eps {
		if eps[i].Version == "" {
			eps[i].Version = "1.0"
		}
		if _, err := parseVersion(eps[i].Version); err != nil {
			return fmt.Errorf("oslo: serve %s: endpoint version: %w", topic, err)
		}
	}
	s := &server{t: t, topic: topic, fanoutQ: t.fanoutQueueName(topic), endpoints: eps}
	s.streamNext.Store(-1)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	for _, o := range t.servers {
		if o.topic == topic {
			t.mu.Unlock()
			return fmt.Errorf("oslo: serve %s: topic already served", topic)
		}
	}
	t.servers = append(t.servers, s)
	sess := t.sess
	t.mu.Unlock()
	if sess == nil {
		return nil
	}
	if err := s.declare(sess); err != nil && !sess.conn.IsClosed() {
		// A queue or exchange the broker refuses (e.g. declared by someone else with
		// other arguments): logged, counted, and retried by the run loop on a new
		// connection until it is fixed, as oslo's ensure() keeps retrying.
		t.declareFailed(sess, err)
		_ = sess.conn.Close()
	}
	return nil
}

// FanoutQueue is the server's fanout queue name (for tests and diagnostics).
func (t *Transport) FanoutQueue(topic string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.servers {
		if s.topic == topic {
			return s.fanoutQ
		}
	}
	return ""
}

func (s *server) declare(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == sess.gen {
		return nil
	}
	t := s.t
	ch, err := t.consumerChannel(sess)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok && ch != nil {
			_ = ch.Close() // stops any consumer already started on it
		}
	}()
	queues := []queueSpec{
		t.topicQueue(s.topic),
		t.topicQueue(s.topic + "." + t.cfg.Host),
		t.fanoutQueue(s.topic, s.fanoutQ),
	}
	open := func() (*amqp.Channel, error) { return t.consumerChannel(sess) }
	for _, ex := range []exchangeSpec{t.controlExchange(), t.fanoutExchange(s.topic)} {
		if ch, err = declareExchange(open, ch, ex); err != nil {
			q := queues[0].name
			if ex.kind == amqp.ExchangeFanout {
				q = s.fanoutQ
			}
			return &DeclareError{Queue: q, Exchange: ex.name, Op: "declare exchange", Err: err}
		}
	}
	// Per consumer (global=false), as oslo applies rabbit_qos_prefetch_count.
	if err := ch.Qos(t.cfg.PrefetchCount, 0, false); err != nil {
		return fmt.Errorf("basic.qos prefetch %d: %w", t.cfg.PrefetchCount, err)
	}
	for _, q := range queues {
		if err := t.declareQueue(sess, &ch, q); err != nil {
			return err
		}
	}
	for _, q := range queues {
		var offset any
		if q.stream {
			offset = s.streamOffset()
		}
		dels, err := ch.Consume(q.name, "", false, false, false, false, t.consumerArgs(q, offset))
		if err != nil {
			return &DeclareError{Queue: q.name, Op: "consume", Err: err}
		}
		q := q
		if !t.spawn(func() { s.consume(sess, q, dels) }) {
			return ErrClosed
		}
	}
	s.gen = sess.gen
	ok = true
	return nil
}

// streamOffset is where the stream fanout consumer starts: "last" at first, then after
// the last message received (oslo's next_stream_offset), so a reconnect neither loses
// nor repeats fanout messages.
func (s *server) streamOffset() any {
	if n := s.streamNext.Load(); n >= 0 {
		return n
	}
	return "last"
}

func (s *server) consume(sess *session, q queueSpec, dels <-chan amqp.Delivery) {
	for d := range dels {
		if q.stream {
			if off, ok := d.Headers["x-stream-offset"].(int64); ok {
				s.streamNext.Store(off + 1)
			}
		}
		// At-most-once, as oslo's RPC server: ack first, then dispatch.
		_ = d.Ack(false)
		s.handle(q.name, d.Body)
	}
	if q.stream && s.t.ctx.Err() == nil && !sess.conn.IsClosed() {
		// Cancelled by the broker (the stream was deleted): start again from the
		// end, as oslo's reset_stream_offset.
		s.streamNext.Store(-1)
	}
	s.t.consumerGone(sess, q.name)
}

func (s *server) handle(queue string, body []byte) {
	t := s.t
	in, err := decodeRequest(body, t.cfg.MaxMessageBytes)
	if err != nil {
		t.drop(s.topic, queue, reasonOf(err), err, len(body))
		return
	}
	if s.dedup.seen(in.UniqueID) {
		t.drop(s.topic, queue, ReasonDuplicate, fmt.Errorf("duplicate _unique_id %s of %s", in.UniqueID, in.Method), len(body))
		return
	}
	result, rejected, herr := s.dispatch(in)
	switch {
	case rejected != "":
		// A message no endpoint can take (unknown method or version, arguments a
		// handler could not decode) is malformed input: counted, and this is its
		// only log line. A call still gets its failure reply below.
		t.drop(s.topic, queue, rejected, herr, len(body))
	case herr != nil && in.MsgID == "":
		t.log.Warn("oslo: cast failed", "topic", s.topic, "method", in.Method, "version", in.Version, "err", herr)
	}
	if in.MsgID == "" {
		return
	}
	r := &reply{Ending: true, MsgID: in.MsgID, UniqueID: newID()}
	if herr != nil {
		r.Failure = toRemoteError(herr)
	} else if raw, err := marshalJSON(result); err != nil {
		r.Failure = toRemoteError(fmt.Errorf("cannot serialise result of %s: %w", in.Method, err))
	} else {
		r.Result = raw
	}
	out, err := encodeReply(r)
	if err != nil {
		t.log.Error("oslo: encode reply", "method", in.Method, "err", err)
		return
	}
	if reason := t.acquireReply(in.ReplyQ); reason != "" {
		t.drop(s.topic, queue, ReasonReplyDropped, fmt.Errorf("reply to %s of %s not sent: %s", in.ReplyQ, in.Method, reason), len(body))
		return
	}
	if !t.spawn(func() { defer t.releaseReply(); t.sendReply(in.ReplyQ, out) }) {
		t.releaseReply()
	}
}

// acquireReply takes a reply slot for queue, or says why there is none.
func (t *Transport) acquireReply(queue string) string {
	t.mu.Lock()
	_, gone := t.obsolete[queue]
	t.mu.Unlock()
	if gone {
		return "the reply queue was found missing before"
	}
	select {
	case t.replySlots <- struct{}{}:
		return ""
	default:
		return fmt.Sprintf("%d replies are being sent already", cap(t.replySlots))
	}
}

func (t *Transport) releaseReply() { <-t.replySlots }

// markObsolete remembers a reply queue a reply could not be delivered to.
func (t *Transport) markObsolete(queue string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.obsolete[queue]; ok {
		return
	}
	t.obsolete[queue] = struct{}{}
	t.obsoleteQ = append(t.obsoleteQ, queue)
	if len(t.obsoleteQ) > obsoleteReplyQueues {
		delete(t.obsolete, t.obsoleteQ[0])
		t.obsoleteQ = append(t.obsoleteQ[:0:0], t.obsoleteQ[1:]...)
	}
}

// dispatch applies oslo's rules: endpoints whose namespace matches and whose version is
// compatible are tried in order; none compatible is UnsupportedVersion, compatible but
// without the method is NoSuchMethod. rejected is the drop reason when the message is
// malformed for this server: one of those two, or a handler's *DecodeError (arguments
// that do not decode).
func (s *server) dispatch(in *incoming) (result any, rejected string, err error) {
	found := false
	for _, ep := range s.endpoints {
		if ep.Namespace != in.Namespace {
			continue
		}
		if ok, _ := versionCompatible(ep.Version, in.Version); !ok {
			continue
		}
		if h, ok := ep.Methods[in.Method]; ok && h != nil {
			result, err = s.invoke(h, &in.Request)
			var de *DecodeError
			if errors.As(err, &de) {
				rejected = de.Reason
			}
			return result, rejected, err
		}
		found = true
	}
	if found {
		return nil, ReasonUnknownMethod, noSuchMethod(in.Method)
	}
	return nil, ReasonUnsupportedVersion, unsupportedVersion(in.Version, in.Method)
}

// invoke keeps a handler bug from killing the consumer.
func (s *server) invoke(h Handler, req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.t.log.Error("oslo: handler panicked", "topic", s.topic, "method", req.Method, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler for %s panicked: %v", req.Method, p)
		}
	}()
	return h(s.t.ctx, req)
}
