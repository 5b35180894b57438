package oslo

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzUnquoteJSON: the message's unescaping gives what encoding/json gives.
func FuzzUnquoteJSON(f *testing.F) {
	for _, s := range []string{`"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800x"`, `"\ud800\u0041"`, "\"\xff\xfe\"", `"é"`, `"\udc00\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want string
		if json.Unmarshal(b, &want) != nil || len(b) == 0 || b[0] != '"' {
			return
		}
		if got := string(unquoteJSON(bytes.TrimSpace(b))); got != want {
			t.Errorf("%q: got %q, want %q", b, got, want)
		}
	})
}
