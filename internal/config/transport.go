package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// TransportURL is an oslo.messaging transport_url:
// rabbit://user:pass@host1:5672,user:pass@host2:5672/vhost?query.
type TransportURL struct {
	Scheme      string
	Hosts       []TransportHost
	VirtualHost string // as written, unescaped; empty means the broker default "/"
	Query       url.Values
}

// TransportHost is one broker of a transport_url.
type TransportHost struct {
	Username string
	Password string
	Host     string // without brackets for IPv6
	Port     int    // 5672 when not given
}

// Addr is host:port, bracketed for IPv6.
func (h TransportHost) Addr() string {
	host := h.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(h.Port)
}

// VHost is the AMQP virtual host to open ("/" when the URL names none).
func (t TransportURL) VHost() string {
	if t.VirtualHost == "" {
		return "/"
	}
	return t.VirtualHost
}

// Redacted renders the URL with every password replaced by "***"; use it in
// every message and log line.
func (t TransportURL) Redacted() string {
	var b strings.Builder
	b.WriteString(t.Scheme)
	b.WriteString("://")
	for i, h := range t.Hosts {
		if i > 0 {
			b.WriteByte(',')
		}
		if h.Username != "" || h.Password != "" {
			b.WriteString(url.PathEscape(h.Username))
			if h.Password != "" {
				b.WriteString(":***")
			}
			b.WriteByte('@')
		}
		b.WriteString(h.Addr())
	}
	b.WriteByte('/')
	b.WriteString(url.PathEscape(t.VirtualHost))
	if len(t.Query) > 0 {
		b.WriteByte('?')
		b.WriteString(t.Query.Encode())
	}
	return b.String()
}

// MaskTransportURL masks the passwords of a raw transport_url, also one that
// does not parse, for error messages.
func MaskTransportURL(raw string) string {
	if t, err := ParseTransportURL(raw); err == nil {
		return t.Redacted()
	}
	_, rest, found := strings.Cut(raw, "://")
	if !found {
		if strings.Contains(raw, "@") {
			return "***"
		}
		return raw
	}
	scheme := raw[:len(raw)-len(rest)-3]
	netloc, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		netloc, tail = rest[:i], rest[i:]
	}
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

// ParseTransportURL parses a rabbit:// transport_url. Its error never
// contains the password.
func ParseTransportURL(raw string) (TransportURL, error) {
	var t TransportURL
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return t, fmt.Errorf("empty")
	}
	scheme, rest, found := strings.Cut(raw, "://")
	if !found {
		return t, fmt.Errorf("not a URL (want rabbit://user:pass@host:5672/)")
	}
	if scheme != "rabbit" {
		return t, fmt.Errorf("scheme %q is not supported (want rabbit)", scheme)
	}
	t.Scheme = scheme
	if i := strings.Index(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, "?"); i >= 0 {
		q, err := url.ParseQuery(rest[i+1:])
		if err != nil {
			return t, fmt.Errorf("bad query string")
		}
		t.Query = q
		rest = rest[:i]
	}
	netloc := rest
	if i := strings.Index(rest, "/"); i >= 0 {
		netloc = rest[:i]
		vh, err := url.PathUnescape(rest[i+1:])
		if err != nil {
			return t, fmt.Errorf("bad virtual host escape")
		}
		t.VirtualHost = vh
	}
	if netloc == "" {
		return t, fmt.Errorf("no broker host")
	}
	for n, part := range strings.Split(netloc, ",") {
		h, err := parseTransportHost(part)
		if err != nil {
			return t, fmt.Errorf("broker %d: %w", n+1, err)
		}
		t.Hosts = append(t.Hosts, h)
	}
	return t, nil
}

func parseTransportHost(s string) (TransportHost, error) {
	h := TransportHost{Port: 5672}
	hostport := s
	if at := strings.LastIndex(s, "@"); at >= 0 {
		creds := s[:at]
		hostport = s[at+1:]
		user, pass, _ := strings.Cut(creds, ":")
		var err error
		if h.Username, err = url.PathUnescape(user); err != nil {
			return h, fmt.Errorf("bad escape in user name")
		}
		if h.Password, err = url.PathUnescape(pass); err != nil {
			return h, fmt.Errorf("bad escape in password")
		}
	}
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.Index(hostport, "]")
		if end < 0 {
			return h, fmt.Errorf("unclosed [ in host %q", hostport)
		}
		host = hostport[1:end]
		after := hostport[end+1:]
		if after != "" {
			if !strings.HasPrefix(after, ":") {
				return h, fmt.Errorf("bad host %q", hostport)
			}
			port = after[1:]
		}
	} else if i := strings.LastIndex(hostport, ":"); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
		if strings.Contains(host, ":") {
			return h, fmt.Errorf("IPv6 host %q must be in brackets", hostport)
		}
	}
	if host == "" {
		return h, fmt.Errorf("no host")
	}
	if strings.ContainsAny(host, " /@") {
		return h, fmt.Errorf("bad host %q", host)
	}
	h.Host = host
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return h, fmt.Errorf("bad port %q", port)
		}
		h.Port = p
	}
	return h, nil
}
