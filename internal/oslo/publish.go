package oslo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func newID() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }

// exchangeSpec is an exchange as the reference declares it (see declare.go).
type exchangeSpec struct {
	name       string
	kind       string
	durable    bool
	autoDelete bool
}

// declareExchange declares ex on a channel. The broker closes the channel on a mismatch,
// so the retry needs a fresh one: when an operator made the exchange durable we accept
// it as it is, as oslo does the other way round.
func declareExchange(open func() (*amqp.Channel, error), ch *amqp.Channel, ex exchangeSpec) (*amqp.Channel, error) {
	err := ch.ExchangeDeclare(ex.name, ex.kind, ex.durable, ex.autoDelete, false, false, nil)
	if err == nil || !isInequivalentDurable(err) {
		return ch, err
	}
	ch, oerr := open()
	if oerr != nil {
		return nil, oerr
	}
	if err := ch.ExchangeDeclare(ex.name, ex.kind, !ex.durable, ex.autoDelete, false, false, nil); err == nil {
		return ch, nil
	}
	if ch, oerr = open(); oerr != nil {
		return nil, oerr
	}
	return ch, ch.ExchangeDeclarePassive(ex.name, ex.kind, ex.durable, ex.autoDelete, false, false, nil)
}

func basePublishing(body []byte) amqp.Publishing {
	return amqp.Publishing{
		ContentType:     "application/json",
		ContentEncoding: "utf-8",
		DeliveryMode:    amqp.Persistent,
		Headers:         amqp.Table{},
		Body:            body,
	}
}

// publish sends body to exchange ex with key, declaring ex once per channel. It retries
// once on a new connection when the connection dropped under it.
func (t *Transport) publish(ctx context.Context, ex exchangeSpec, key string, msg amqp.Publishing) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		sess, err := t.session(ctx)
		if err != nil {
			if lastErr != nil {
				return fmt.Errorf("%w (after %v)", err, lastErr)
			}
			return err
		}
		err = sess.publish(ctx, ex, key, msg)
		if err == nil {
			return nil
		}
		lastErr = err
		if !sess.conn.IsClosed() && !errors.Is(err, amqp.ErrClosed) {
			var ae *amqp.Error
			if !errors.As(err, &ae) || !ae.Recover {
				return fmt.Errorf("oslo: publish to %s/%s: %w", ex.name, key, err)
			}
		}
		t.log.Debug("oslo: publish failed, retrying on next connection", "exchange", ex.name, "key", key, "err", err)
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("oslo: publish to %s/%s: %w", ex.name, key, lastErr)
}

func (s *session) publish(ctx context.Context, ex exchangeSpec, key string, msg amqp.Publishing) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if s.pubCh == nil || s.pubCh.IsClosed() {
		ch, err := s.conn.Channel()
		if err != nil {
			return err
		}
		s.pubCh = ch
		s.declared = make(map[string]bool)
	}
	if ex.name != "" && !s.declared[ex.name] {
		ch, err := declareExchange(s.conn.Channel, s.pubCh, ex)
		if ch != nil {
			s.pubCh = ch
		}
		if err != nil {
			return fmt.Errorf("declare exchange %s: %w", ex.name, err)
		}
		s.declared[ex.name] = true
	}
	return s.pubCh.PublishWithContext(ctx, ex.name, key, false, false, msg)
}

var errNoRoute = errors.New("oslo: no queue bound for the message")

// publishReply sends a reply to the default exchange with mandatory set, so a reply to a
// queue that is gone comes back (basic.return) instead of vanishing.
func (s *session) publishReply(ctx context.Context, queue string, body []byte) error {
	return s.publishMandatory(ctx, exchangeSpec{}, queue, basePublishing(body))
}

// publishMandatory publishes with mandatory set on the confirm channel and waits for the
// broker's ack: errNoRoute when no queue is bound for key (basic.return).
func (s *session) publishMandatory(ctx context.Context, ex exchangeSpec, key string, msg amqp.Publishing) error {
	s.repMu.Lock()
	defer s.repMu.Unlock()
	if s.repCh == nil || s.repCh.IsClosed() {
		ch, err := s.conn.Channel()
		if err != nil {
			return err
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		s.returns = ch.NotifyReturn(make(chan amqp.Return, 16))
		s.repCh = ch
		s.repDeclared = make(map[string]bool)
	}
	if ex.name != "" && !s.repDeclared[ex.name] {
		// Passive: whoever publishes the usual way declares it with the right flags. A
		// missing exchange closes this channel; the next call opens a new one.
		if err := s.repCh.ExchangeDeclarePassive(ex.name, ex.kind, ex.durable, ex.autoDelete, false, false, nil); err != nil {
			return fmt.Errorf("exchange %s: %w", ex.name, err)
		}
		s.repDeclared[ex.name] = true
	}
	for drained := false; !drained; {
		select {
		case <-s.returns:
		default:
			drained = true
		}
	}
	dc, err := s.repCh.PublishWithDeferredConfirmWithContext(ctx, ex.name, key, true, false, msg)
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	// The broker sends basic.return before the ack and amqp091 hands it over first.
	select {
	case r := <-s.returns:
		if r.Exchange == ex.name && r.RoutingKey == key {
			return errNoRoute
		}
	default:
	}
	if !ok {
		return errors.New("oslo: message nacked by broker")
	}
	return nil
}

// sendReply publishes a reply, retrying every 250 ms while the caller's queue is missing
// or the connection is down, for up to MissingReplyQueueTimeout (oslo's
// kombu_missing_consumer_retry_timeout), then drops it; a queue found missing is
// remembered, and later replies to it are dropped at once (as oslo does).
func (t *Transport) sendReply(queue string, body []byte) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.MissingReplyQueueTimeout)
	defer cancel()
	missing := false // the queue was found missing (not only the connection down)
	for {
		sess, err := t.session(ctx)
		if err == nil {
			err = sess.publishReply(ctx, queue, body)
			if err == nil {
				return
			}
			missing = missing || errors.Is(err, errNoRoute)
		}
		if ctx.Err() != nil || t.ctx.Err() != nil || !sleepCtx(ctx, 250*time.Millisecond) {
			if t.ctx.Err() == nil && missing {
				t.markObsolete(queue)
			}
			if ok, suppressed := t.dropLog.allow(t.clock()); ok {
				t.log.Warn("oslo: reply dropped", "reply_queue", queue, "err", err, "suppressed", suppressed)
			}
			return
		}
		t.log.Debug("oslo: reply not delivered yet, retrying", "reply_queue", queue, "err", err)
	}
}
