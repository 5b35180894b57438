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
	// Query holds the query parameters as oslo.messaging reads them (parse_qs:
	// blank values dropped; a repeated name's values are joined with ","
	// by the reader). The rabbit driver takes each one as the value of the
	// [oslo_messaging_rabbit] option of that name.
	Query url.Values
}

// Host is one broker of a (possibly clustered) transport_url.
type Host struct {
	Host     string
	Port     int
	User     string
	Password string
}

// errCutPassword is returned for the shapes an unescaped '/', '?', '#' or
// ',' in a password produces: the password would be read as a port, a
// virtual host, a query or another broker, and printed as such.
var errCutPassword = errors.New("'@' after the broker list, or brokers with different (or missing) user:password: " +
	"a password containing '/', '?', '#', ',' or '%' must be percent-encoded (%2F, %3F, %23, %2C, %25)")

// ParseTransportURL parses rabbit://user:pass@h1:5672,user:pass@h2:5672/vhost?opts
// the way oslo.messaging does (urlparse, then the broker list split at ',' and
// each broker at its last '@'), and refuses what would misread a password.
//
// Errors never echo any part of the URL after the scheme: with an unescaped
// special character in a password, any part can be a piece of it.
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
	// urlparse ends the broker list at the first '/', '?' or '#'. An '@' after
	// that point is the rest of a password that contained one of them.
	authority, after := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, after = rest[:i], rest[i:]
	}
	if strings.Contains(after, "@") {
		return u, fmt.Errorf("transport_url: %w", errCutPassword)
	}
	if i := strings.IndexByte(after, '#'); i >= 0 {
		after = after[:i]
	}
	path, rawQuery, _ := strings.Cut(after, "?")
	u.Query = parseQuery(rawQuery)
	u.VHost = "/"
	if strings.HasPrefix(path, "/") && len(path) > 1 {
		u.VHost = unquote(path[1:])
	}
	if authority == "" {
		return u, errors.New("transport_url: no host")
	}
	var creds []string // "user:pass" of each broker with an '@', as written
	for i, part := range strings.Split(authority, ",") {
		h, err := parseHost(part)
		if err != nil {
			return TransportURL{}, fmt.Errorf("transport_url: host %d: %w", i+1, err)
		}
		if at := strings.LastIndexByte(part, '@'); at >= 0 {
			creds = append(creds, part[:at])
		}
		u.Hosts = append(u.Hosts, h)
	}
	// A ',' in a password splits it into brokers with different or missing
	// credentials. The brokers of one transport_url are one RabbitMQ cluster,
	// which shares its users: they must all carry the same user:password.
	if len(creds) > 0 {
		if len(creds) != len(u.Hosts) {
			return TransportURL{}, fmt.Errorf("transport_url: %w", errCutPassword)
		}
		for _, c := range creds {
			if c != creds[0] {
				return TransportURL{}, fmt.Errorf("transport_url: %w", errCutPassword)
			}
		}
	}
	return u, nil
}

func parseHost(part string) (h Host, err error) {
	if part == "" {
		return h, errors.New("empty host entry")
	}
	hostport := part
	if i := strings.LastIndexByte(part, '@'); i >= 0 {
		userinfo := part[:i]
		hostport = part[i+1:]
		user, pass, found := strings.Cut(userinfo, ":")
		h.User = unquote(user)
		if found {
			h.Password = unquote(pass)
		}
	}
	if hostport == "" {
		return h, errors.New("missing host name")
	}
	name, portStr := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return h, errors.New("unterminated IPv6 literal")
		}
		name = hostport[1:end]
		after := hostport[end+1:]
		if after != "" {
			if !strings.HasPrefix(after, ":") {
				return h, errors.New("unexpected text after an IPv6 literal")
			}
			portStr = after[1:]
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		name, portStr = hostport[:i], hostport[i+1:]
	}
	if name == "" {
		return h, errors.New("missing host name")
	}
	// Python takes any text; a broker is a DNS name or an IP address, and
	// anything else here is more likely the end of a password.
	if bracketed := strings.HasPrefix(hostport, "["); bracketed && !ipLiteral(name) || !bracketed && !hostName(name) {
		return h, errors.New("not a host name or IP address")
	}
	h.Host = name
	h.Port = DefaultPort
	if portStr != "" {
		// not echoed: "user:pass" with the "@host" missing reads as host:port
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 1 || p > 65535 {
			return h, errors.New("bad port (want 1-65535)")
		}
		h.Port = p
	}
	return h, nil
}

// ipLiteral is an IPv6 address, with a zone (fe80::1%eth0) or without.
func ipLiteral(s string) bool {
	addr, zone, hasZone := strings.Cut(s, "%")
	return net.ParseIP(addr) != nil && (!hasZone || zone != "" && hostName(zone))
}

func hostName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// unquote is Python's urllib.parse.unquote, which oslo.messaging applies to
// the user, the password and the virtual host: valid %XX sequences are
// decoded, anything else (a lone '%') is kept as written.
func unquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseQuery is Python's parse_qs with its defaults: fields split at '&',
// '+' is a space, a field without '=' or with an empty value is dropped.
func parseQuery(q string) url.Values {
	out := url.Values{}
	for _, f := range strings.Split(q, "&") {
		name, value, found := strings.Cut(f, "=")
		if !found || value == "" {
			continue
		}
		name = unquote(strings.ReplaceAll(name, "+", " "))
		out[name] = append(out[name], unquote(strings.ReplaceAll(value, "+", " ")))
	}
	return out
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
