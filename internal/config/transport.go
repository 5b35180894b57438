package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

const rabbitSection = "oslo_messaging_rabbit"

// MaskTransportURL renders a raw transport_url for messages and logs without
// any part of a password. In a URL that does not parse, a password cut by an
// unescaped '/', '?', '#' or ',' (or missing its "@host") can be anywhere
// after the scheme: all of it is masked, the error's reason says what is
// wrong and where (host N).
func MaskTransportURL(raw string) string {
	if t, err := oslo.ParseTransportURL(raw); err == nil {
		return t.String()
	}
	scheme, _, found := strings.Cut(strings.TrimSpace(raw), "://")
	if !found {
		return "***" // not a URL: nothing tells the password from the rest
	}
	return scheme + "://***"
}

// applyTransportQuery makes the transport_url query override
// [oslo_messaging_rabbit], as oslo.messaging's rabbit driver does (its
// ConfigOptsProxy): rabbit://...?ssl=1 is ssl = True, and goes through the
// same parsing and option table as the file's value. A parameter that names
// no option of that group is refused (oslo fails on it too). A URL that
// does not parse is left to Validate, which reports it masked.
func (r *Raw) applyTransportQuery() error {
	v, ok := r.Lookup("DEFAULT", "transport_url")
	if !ok {
		return nil
	}
	t, err := oslo.ParseTransportURL(v)
	if err != nil || len(t.Query) == 0 {
		return nil
	}
	known := map[string]bool{}
	for _, o := range optionTable {
		if o.Section == rabbitSection {
			known[o.Name] = true
		}
	}
	names := make([]string, 0, len(t.Query))
	for name := range t.Query {
		names = append(names, name)
	}
	sort.Strings(names)
	q := map[string]string{}
	for _, name := range names {
		if !known[name] {
			return &Error{Option: "DEFAULT.transport_url", Value: t.String(),
				Reason: fmt.Sprintf("query parameter %q is not an option of [%s]", name, rabbitSection)}
		}
		q[name] = strings.Join(t.Query[name], ",") // parse_qs's list, as oslo joins it
	}
	r.rabbitQuery = q
	return nil
}

// origin names an option in messages, saying when its value came from the
// transport_url query rather than a file.
func (r *Raw) origin(section, key string) string {
	if _, ok := r.rabbitQuery[key]; ok && normSection(section) == rabbitSection {
		return optName(section, key) + " (transport_url query)"
	}
	return optName(section, key)
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
