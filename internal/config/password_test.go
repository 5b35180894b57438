package config

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The letters a password is made of in these tests: none of them occurs in
// the rest of the URLs below nor in any wording of ours, so any of them in a
// message is a piece of the password.
const pwMarkers = "QXZJKW"

// pwShapes are the ways an operator writes a transport_url around a
// password, unescaped as oslo.messaging's documentation never warns about.
var pwShapes = []string{
	"rabbit://user:%s@broker.example:5672/vh",
	"rabbit://user:%s@broker.example/",
	"rabbit://user:%s@broker.example:5672,user:%s@broker2.example:5673/vh?ssl=1",
	"rabbit://user:%s@[fd00::1]:5671//?ssl=true&kombu_failover_strategy=round-robin",
	"rabbit://user:%s",
	"rabbit://user:%s@",
	"rabbit://user:%s@broker.example:5672/vh?ssl=maybe",
	"rabbit://user:%s@broker.example:5672/vh?nosuch=1",
	"amqp://user:%s@broker.example:99999/",
}

// shownTexts is every text ovs-agent can print about a transport_url: the
// one-line configuration error, or after a successful load the URL as the
// start-up line and the AMQP transport log it, and the mask of the raw value.
func shownTexts(t *testing.T, url string) []string {
	t.Helper()
	raw, err := ParseBytes([]byte("[DEFAULT]\nhost = hv1\ntransport_url = " + url + "\n"))
	if err != nil {
		return []string{err.Error()}
	}
	out := []string{MaskTransportURL(url)}
	c, err := loadRaw(raw, Options{HostAddrs: fakeAddrs})
	if err != nil {
		return append(out, err.Error())
	}
	return append(out, c.Default.Transport.String())
}

// checkPassword builds every shape around pw and fails on any marker letter
// shown. Two cases are well-formed URLs that nothing can tell from a cut
// password, and are left out: a password holding ",user:" (several brokers
// with one user:password), and a password with '/', '?', '#', '@' or ',' whose
// "@host" is missing ("user:pa@ss" is user, pa and the broker ss;
// "user:5672/vh" the broker user and the virtual host vh).
func checkPassword(t *testing.T, pw string) {
	t.Helper()
	for _, shape := range pwShapes {
		if strings.HasSuffix(shape, ":%s") && strings.ContainsAny(pw, "/?#@,") {
			continue
		}
		url := strings.ReplaceAll(shape, "%s", pw)
		for _, s := range shownTexts(t, url) {
			if i := strings.IndexAny(s, pwMarkers); i >= 0 {
				t.Fatalf("password %q of %q shown: %q", pw, url, s)
			}
		}
	}
}

// pwAlphabet: every character class a password can hold; letters and digits
// are markers, the rest are what cuts or changes a URL.
var pwAlphabet = []rune(pwMarkers + "/?#@:,%[]&=+;$ '\"\\!*()~<>^`{}|é€\t")

// Property: for random passwords of any characters, in every shape, no
// error text and no logged URL holds any letter of the password.
func TestTransportPasswordNeverShown(t *testing.T) {
	for _, pw := range []string{"QX/ZJ", "QX?ZJ", "QX#ZJ", "12?QX", "QX,ZJ", "QX@ZJ,WK", "QX@ZJ,WK:KQ", "QX%ZZ", "QX%2", "QX]", "QX[", "Q:X"} {
		checkPassword(t, strings.NewReplacer("1", "K", "2", "W").Replace(pw))
	}
	r := rand.New(rand.NewPCG(18, 9))
	for range 3000 {
		n := 1 + r.IntN(16)
		var b strings.Builder
		for range n {
			b.WriteRune(pwAlphabet[r.IntN(len(pwAlphabet))])
		}
		pw := b.String()
		if strings.IndexAny(pw, pwMarkers) < 0 {
			pw += "Q"
		}
		checkPassword(t, pw)
	}
}

// FuzzTransportPassword is the property above for any bytes: letters and
// digits become markers.
func FuzzTransportPassword(f *testing.F) {
	for _, s := range []string{"a/b", "1?2", "x#y", "a,b", "a@b,c", "a@b,c:d", "%zz", "[", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var b strings.Builder
		for _, c := range in {
			switch {
			case c == '\n' || c == '\r' || c == 0:
				return // not a value an ini line can hold
			case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
				b.WriteByte(pwMarkers[int(c)%len(pwMarkers)])
			default:
				b.WriteRune(c)
			}
		}
		pw := b.String()
		if strings.IndexAny(pw, pwMarkers) < 0 || strings.Contains(pw, ",user:") {
			return
		}
		checkPassword(t, pw)
	})
}
