package oslo

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// DefaultPort is the AMQP port used when a transport_url host has none.
const DefaultPort = 5672

// TransportURL is a parsed oslo.messaging transport_url for the rabbit driver.
type TransportURL struct {
	Hosts []Host
	// VHost is the virtual host, already unescaped; "/" when the URL has no path.
	VHost string
	Query url.Values
}

// Host is one broker of a (possibly clustered) transport_url.
type Host struct {
	Host     string
	Port     int
	User     string
	Password string
}

// ParseTransportURL parses rabbit://user:pass@h1:5672,user:pass@h2:5672/vhost?opts.
//
// net/url cannot parse the comma-separated host list, so the authority is split by
// hand. Errors name the problem but never echo the password.
func ParseTransportURL(s string) (TransportURL, error) {
	var u TransportURL
	s = strings.TrimSpace(s)
	if s == "" {
		return u, errors.New("transport_url: empty")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return u, errors.New("transport_url: missing scheme (expected rabbit://)")
	}
	switch strings.ToLower(scheme) {
	case "rabbit", "kombu", "amqp":
	default:
		return u, fmt.Errorf("transport_url: unsupported scheme %q (expected rabbit://)", scheme)
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	var rawQuery string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, rawQuery = rest[:i], rest[i+1:]
	}
	authority, path, _ := strings.Cut(rest, "/")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return u, fmt.Errorf("transport_url: bad query: %w", err)
	}
	u.Query = q
	vhost, err := url.PathUnescape(path)
	if err != nil {
		return u, fmt.Errorf("transport_url: bad virtual host %q: %w", path, err)
	}
	if vhost == "" {
		vhost = "/"
	}
	u.VHost = vhost
	if authority == "" {
		return u, errors.New("transport_url: no host")
	}
	for i, part := range strings.Split(authority, ",") {
		h, err := parseHost(part)
		if err != nil {
			return TransportURL{}, fmt.Errorf("transport_url: host %d: %w", i+1, err)
		}
		u.Hosts = append(u.Hosts, h)
	}
	return u, nil
}

func parseHost(part string) (Host, error) {
	var h Host
	if part == "" {
		return h, errors.New("empty host entry")
	}
	hostport := part
	if i := strings.LastIndexByte(part, '@'); i >= 0 {
		userinfo := part[:i]
		hostport = part[i+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if h.User, err = url.PathUnescape(user); err != nil {
			return h, errors.New("bad percent-encoding in user name")
		}
		if hasPass {
			if h.Password, err = url.PathUnescape(pass); err != nil {
				return h, errors.New("bad percent-encoding in password")
			}
		}
	}
	if hostport == "" {
		return h, errors.New("missing host name")
	}
	name, portStr := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return h, fmt.Errorf("unterminated IPv6 literal in %q", hostport)
		}
		name = hostport[1:end]
		after := hostport[end+1:]
		if after != "" {
			if !strings.HasPrefix(after, ":") {
				return h, fmt.Errorf("unexpected %q after IPv6 literal", after)
			}
			portStr = after[1:]
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		name, portStr = hostport[:i], hostport[i+1:]
	}
	if name == "" {
		return h, errors.New("missing host name")
	}
	h.Host = name
	h.Port = DefaultPort
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 1 || p > 65535 {
			return h, fmt.Errorf("bad port %q on %s", portStr, name)
		}
		h.Port = p
	}
	return h, nil
}

// Addr is host:port, bracketing IPv6 literals.
func (h Host) Addr() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// String renders the URL with every password masked.
func (u TransportURL) String() string {
	var b strings.Builder
	b.WriteString("rabbit://")
	for i, h := range u.Hosts {
		if i > 0 {
			b.WriteByte(',')
		}
		if h.User != "" || h.Password != "" {
			b.WriteString(url.PathEscape(h.User))
			if h.Password != "" {
				b.WriteString(":***")
			}
			b.WriteByte('@')
		}
		b.WriteString(h.Addr())
	}
	b.WriteByte('/')
	if u.VHost != "/" {
		b.WriteString(url.PathEscape(u.VHost))
	}
	if len(u.Query) > 0 {
		b.WriteByte('?')
		b.WriteString(u.Query.Encode())
	}
	return b.String()
}
