package config

import (
	"strings"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

// MaskTransportURL masks the passwords of a raw transport_url, also one that
// does not parse, for error messages.
func MaskTransportURL(raw string) string {
	if t, err := oslo.ParseTransportURL(raw); err == nil {
		return t.String()
	}
	_, rest, found := strings.Cut(raw, "://")
	if !found {
		return "***" // not a URL: nothing tells the password from the rest
	}
	scheme := raw[:len(raw)-len(rest)-3]
	netloc, tail := splitNetloc(rest)
	hosts := strings.Split(netloc, ",")
	for i, h := range hosts {
		if at := strings.LastIndex(h, "@"); at >= 0 {
			user, _, hasPass := strings.Cut(h[:at], ":")
			if hasPass {
				user += ":***"
			}
			hosts[i] = user + h[at:]
		}
	}
	return scheme + "://" + strings.Join(hosts, ",") + tail
}

// splitNetloc cuts the broker list where oslo.messaging (and Python's
// urlparse) cut it: at the first '/', '?' or '#'.
func splitNetloc(rest string) (netloc, tail string) {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, ""
}

// transportPasswords lists the passwords of a transport_url as the parser
// sees them (the text between the first ':' and the last '@' of each broker).
func transportPasswords(raw string) []string {
	_, rest, found := strings.Cut(strings.TrimSpace(raw), "://")
	if !found {
		return nil
	}
	netloc, _ := splitNetloc(rest)
	var out []string
	for _, h := range strings.Split(netloc, ",") {
		if at := strings.LastIndex(h, "@"); at >= 0 {
			if _, pass, ok := strings.Cut(h[:at], ":"); ok && pass != "" {
				out = append(out, pass)
			}
		}
	}
	return out
}

// RabbitQueues is how the agent declares its queues and exchanges
// ([oslo_messaging_rabbit], as oslo.messaging reads it).
func (c *Config) RabbitQueues() oslo.Queues {
	r := &c.Rabbit
	return oslo.Queues{
		Durable: r.DurableQueues, AutoDelete: r.AutoDelete, HA: r.HAQueues,
		Quorum: r.QuorumQueue, TransientQuorum: r.TransientQuorumQueue,
		QuorumDeliveryLimit: r.QuorumDeliveryLimit, QuorumMaxMemoryLength: r.QuorumMaxMemoryLength,
		QuorumMaxMemoryBytes: r.QuorumMaxMemoryBytes, StreamFanout: r.StreamFanout,
		CancelOnFailover: r.EnableCancelOnFailover, Prefetch: r.QOSPrefetchCount,
		UseQueueManager: r.UseQueueManager, Hostname: r.Hostname, ProcessName: r.ProcessName,
	}
}
