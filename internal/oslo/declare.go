package oslo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// This file decides how every queue and exchange is declared, as oslo.messaging's
// rabbit driver (impl_rabbit.py, 14.0 to 18.x) declares it for the same settings: a
// broker shared with neutron-server and reference agents refuses a redeclare whose
// durable, auto_delete or arguments differ (406 PRECONDITION_FAILED), so every flag and
// argument here must equal oslo's.

// Queues holds the [oslo_messaging_rabbit] options that shape declarations.
type Queues struct {
	Durable    bool // amqp_durable_queues: topic queues and the control exchange
	AutoDelete bool // amqp_auto_delete: topic queues and the control exchange
	HA         bool // rabbit_ha_queues: x-ha-policy all

	Quorum          bool // rabbit_quorum_queue: topic queues (durable then)
	TransientQuorum bool // rabbit_transient_quorum_queue: reply and fanout queues
	// QuorumDeliveryLimit, QuorumMaxMemoryLength and QuorumMaxMemoryBytes are
	// x-delivery-limit, x-max-in-memory-length and -bytes of every quorum queue (0: unset).
	QuorumDeliveryLimit   int
	QuorumMaxMemoryLength int
	QuorumMaxMemoryBytes  int
	// StreamFanout makes one stream queue <topic>_fanout shared by every consumer, read
	// from an offset (rabbit_stream_fanout; needs TransientQuorum and Prefetch > 0).
	StreamFanout bool
	// CancelOnFailover asks for x-cancel-on-ha-failover (enable_cancel_on_failover).
	CancelOnFailover bool

	// Prefetch is the consumers' basic.qos prefetch count (rabbit_qos_prefetch_count; 0:
	// unlimited).
	Prefetch int

	// UseQueueManager names reply and fanout queues <Hostname>:<ProcessName>:<n> instead
	// of a random uuid, so a restarted agent finds its queues again (use_queue_manager,
	// hostname, processname).
	UseQueueManager bool
	Hostname        string
	ProcessName     string
}

// Validate refuses what oslo refuses at start (its RuntimeErrors).
func (q Queues) Validate() error {
	if q.Quorum && q.HA {
		return errors.New("rabbit_quorum_queue and rabbit_ha_queues are both enabled: a queue is quorum or HA (mirrored), not both")
	}
	if q.StreamFanout && q.Prefetch <= 0 {
		return errors.New("rabbit_stream_fanout needs rabbit_qos_prefetch_count > 0")
	}
	if q.StreamFanout && !q.TransientQuorum {
		return errors.New("rabbit_stream_fanout needs rabbit_transient_quorum_queue = true")
	}
	return nil
}

// durable is oslo's Connection.durable: quorum queues are always durable.
func (q Queues) durable() bool { return q.Durable || q.Quorum }

// amqpInt encodes an integer as py-amqp does: a signed 32-bit value when it fits.
func amqpInt(v int64) any {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		return int32(v)
	}
	return v
}

// queueArgs is oslo's _get_queue_arguments.
func (q Queues) queueArgs(ttl time.Duration, quorum, stream bool) amqp.Table {
	args := amqp.Table{}
	if q.HA {
		args["x-ha-policy"] = "all"
	}
	if quorum {
		args["x-queue-type"] = "quorum"
		if q.QuorumDeliveryLimit != 0 {
			args["x-delivery-limit"] = amqpInt(int64(q.QuorumDeliveryLimit))
		}
		if q.QuorumMaxMemoryLength != 0 {
			args["x-max-in-memory-length"] = amqpInt(int64(q.QuorumMaxMemoryLength))
		}
		if q.QuorumMaxMemoryBytes != 0 {
			args["x-max-in-memory-bytes"] = amqpInt(int64(q.QuorumMaxMemoryBytes))
		}
	}
	secs := int64(ttl / time.Second)
	if secs > 0 {
		args["x-expires"] = amqpInt(secs * 1000)
	}
	if stream {
		args = amqp.Table{"x-queue-type": "stream"}
		if secs > 0 {
			args["x-max-age"] = strconv.FormatInt(secs, 10) + "s"
		}
	}
	return args
}

// queueSpec is one queue as oslo's Consumer declares it, with its binding.
type queueSpec struct {
	name       string
	durable    bool
	autoDelete bool
	args       amqp.Table
	exchange   string // "" for the default exchange (no binding)
	key        string
	stream     bool
}

// controlExchange is the topic exchange (oslo's topic_send and declare_topic_consumer).
func (t *Transport) controlExchange() exchangeSpec {
	q := t.cfg.Queues
	return exchangeSpec{name: t.cfg.ControlExchange, kind: amqp.ExchangeTopic, durable: q.durable(), autoDelete: q.AutoDelete}
}

// fanoutExchange is <topic>_fanout: auto-delete, durable with transient quorum queues
// (streams need those too, so oslo's consumer and fanout_send agree).
func (t *Transport) fanoutExchange(topic string) exchangeSpec {
	q := t.cfg.Queues
	return exchangeSpec{name: topic + "_fanout", kind: amqp.ExchangeFanout, durable: q.TransientQuorum || q.StreamFanout, autoDelete: true}
}

// topicQueue is <topic> or <topic>.<host> on the control exchange.
func (t *Transport) topicQueue(name string) queueSpec {
	q := t.cfg.Queues
	return queueSpec{name: name, durable: q.durable(), autoDelete: q.AutoDelete,
		args: q.queueArgs(0, q.Quorum, false), exchange: t.cfg.ControlExchange, key: name}
}

// fanoutQueue is this server's queue on <topic>_fanout; never auto-delete.
func (t *Transport) fanoutQueue(topic, name string) queueSpec {
	q := t.cfg.Queues
	return queueSpec{name: name, durable: q.TransientQuorum || q.StreamFanout,
		args:     q.queueArgs(t.cfg.TransientQueuesTTL, q.TransientQuorum, q.StreamFanout),
		exchange: topic + "_fanout", key: topic, stream: q.StreamFanout}
}

// replyQueue is the reply queue (oslo's declare_direct_consumer).
func (t *Transport) replyQueue() queueSpec {
	q := t.cfg.Queues
	return queueSpec{name: t.replyQ, durable: q.TransientQuorum,
		args: q.queueArgs(t.cfg.TransientQueuesTTL, q.TransientQuorum, false)}
}

// fanoutQueueName is <topic>_fanout for streams (one queue shared by every consumer),
// else <topic>_fanout_<unique>.
func (t *Transport) fanoutQueueName(topic string) string {
	if t.cfg.Queues.StreamFanout {
		return topic + "_fanout"
	}
	return topic + "_fanout_" + t.unique()
}

// unique is the queue manager's next name, or a random uuid without it.
func (t *Transport) unique() string {
	if t.qm == nil {
		return newID()
	}
	return t.qm.get()
}

// queueManager is oslo's QManager: <hostname>:<processname>:<counter>, the counter
// starting at 1 in each process. oslo shares the counter between the processes of one
// service through /dev/shm; ovs-agent is one process, so the counter is its own, and
// the same order of declarations gives a restarted agent the same names.
type queueManager struct {
	host, proc string
	mu         sync.Mutex
	n          int
}

func (m *queueManager) get() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	return m.host + ":" + m.proc + ":" + strconv.Itoa(m.n)
}

// consumerArgs is what oslo's Consumer.declare passes to basic.consume.
func (t *Transport) consumerArgs(q queueSpec, offset any) amqp.Table {
	if q.stream {
		return amqp.Table{"x-stream-offset": offset}
	}
	if t.cfg.Queues.CancelOnFailover {
		return amqp.Table{"x-cancel-on-ha-failover": true}
	}
	return nil
}

// DeclareError is a queue or exchange the broker would not declare, bind or let us
// consume: the transport logs it as an ERROR, counts it and retries.
type DeclareError struct {
	Queue    string // the queue (or, for an exchange, the queue it was declared for)
	Exchange string // the exchange involved, if any
	Op       string // "declare exchange", "declare queue", "bind", "consume", "qos"
	Err      error
}

func (e *DeclareError) Error() string {
	var s string
	switch e.Op {
	case "declare exchange":
		s = "declare exchange " + e.Exchange + " (for queue " + e.Queue + ")"
	case "bind":
		s = "bind queue " + e.Queue + " to " + e.Exchange
	case "declare queue":
		s = "declare queue " + e.Queue
	default:
		s = e.Op + " queue " + e.Queue
	}
	return s + ": " + e.Err.Error()
}

func (e *DeclareError) Unwrap() error { return e.Err }

// Reason is a short label for metrics: the AMQP reply code's name
// (precondition_failed for a 406), or connection_closed, or error.
func (e *DeclareError) Reason() string {
	var ae *amqp.Error
	switch {
	case errors.As(e.Err, &ae):
		if n, ok := replyCodes[ae.Code]; ok {
			return n
		}
		return "amqp_" + strconv.Itoa(ae.Code)
	case errors.Is(e.Err, amqp.ErrClosed):
		return "connection_closed"
	}
	return "error"
}

var replyCodes = map[int]string{
	amqp.ContentTooLarge: "content_too_large", amqp.NoRoute: "no_route", amqp.NoConsumers: "no_consumers",
	amqp.ConnectionForced: "connection_forced", amqp.InvalidPath: "invalid_path", amqp.AccessRefused: "access_refused",
	amqp.NotFound: "not_found", amqp.ResourceLocked: "resource_locked", amqp.PreconditionFailed: "precondition_failed",
	amqp.FrameError: "frame_error", amqp.SyntaxError: "syntax_error", amqp.CommandInvalid: "command_invalid",
	amqp.ChannelError: "channel_error", amqp.UnexpectedFrame: "unexpected_frame", amqp.ResourceError: "resource_error",
	amqp.NotAllowed: "not_allowed", amqp.NotImplemented: "not_implemented", amqp.InternalError: "internal_error",
}

// DeclareObserver is an optional part of Observer: DeclareFailed is called once for
// every failed declare, bind or consume (queue and Reason).
type DeclareObserver interface {
	DeclareFailed(queue, reason string)
}

// declareFailed reports a failure of declareAll, Serve or the reply queue. A failure
// because the connection went away is a reconnect, not a declaration problem.
func (t *Transport) declareFailed(sess *session, err error) {
	var de *DeclareError
	if sess.conn.IsClosed() || !errors.As(err, &de) {
		t.log.Warn("oslo: declaring consumers failed, reconnecting", "err", err)
		return
	}
	t.mu.Lock()
	t.declErr = de
	t.stats.DeclareFailures++
	t.mu.Unlock()
	if o, ok := t.obs.(DeclareObserver); ok {
		o.DeclareFailed(de.Queue, de.Reason())
	}
	t.log.Error("oslo: declare failed, retrying", "queue", de.Queue, "exchange", de.Exchange,
		"op", de.Op, "reason", de.Reason(), "err", de.Err)
}

// DeclareCheck is nil while every queue the transport consumes is declared, bound and
// consumed; else the last failure (a readiness check).
func (t *Transport) DeclareCheck() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.declErr != nil {
		return fmt.Errorf("amqp: %w", t.declErr)
	}
	return nil
}

// isInequivalentDurable recognises the broker refusing a redeclare with other durability.
func isInequivalentDurable(err error) bool {
	var e *amqp.Error
	return errors.As(err, &e) && e.Code == amqp.PreconditionFailed && strings.Contains(e.Reason, "inequivalent arg 'durable'")
}

// consumerChannel opens a channel to consume on, with the prefetch oslo sets on its
// listening connections (streams refuse a consumer without one): Config.PrefetchCount,
// rabbit_qos_prefetch_count or, when that is 0, DefaultPrefetchCount.
func (t *Transport) consumerChannel(sess *session) (*amqp.Channel, error) {
	ch, err := sess.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(t.cfg.PrefetchCount, 0, false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return ch, nil
}

// declareQueue declares q on *ch and binds it. The broker closes the channel on a
// refusal, so *ch is replaced by a fresh one when it retries; errors are *DeclareError.
func (t *Transport) declareQueue(sess *session, ch **amqp.Channel, q queueSpec) error {
	if _, err := (*ch).QueueDeclare(q.name, q.durable, q.autoDelete, false, false, q.args); err != nil {
		if !isInequivalentDurable(err) {
			return &DeclareError{Queue: q.name, Op: "declare queue", Err: err}
		}
		// Someone declared it with the other durability (oslo falls back the same
		// way): use it as it is.
		t.log.Warn("oslo: queue exists with other durability, using it as it is", "queue", q.name, "err", err)
		_ = (*ch).Close()
		if *ch, err = t.consumerChannel(sess); err != nil {
			return err
		}
		if _, err := (*ch).QueueDeclarePassive(q.name, !q.durable, q.autoDelete, false, false, q.args); err != nil {
			return &DeclareError{Queue: q.name, Op: "declare queue", Err: err}
		}
	}
	if q.exchange == "" {
		return nil
	}
	if err := (*ch).QueueBind(q.name, q.key, q.exchange, false, nil); err != nil {
		return &DeclareError{Queue: q.name, Exchange: q.exchange, Op: "bind", Err: err}
	}
	return nil
}
