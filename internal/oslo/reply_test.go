package oslo

import (
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"
)

func replyBody(t *testing.T, inner string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]string{"oslo.version": "2.0", "oslo.message": inner})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandleReplyOldStyle: heartbeats are ignored, a result sent before the ending
// message is kept (very old servers), duplicates and replies nobody waits for are dropped.
func TestHandleReplyOldStyle(t *testing.T) {
	tr := &Transport{cfg: Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}.withDefaults(),
		waiters: map[string]*waiter{}, stats: Stats{Dropped: map[string]uint64{}}}
	tr.log, tr.obs = tr.cfg.Logger, tr.cfg.Observer
	w := &waiter{ch: make(chan *reply, 1)}
	tr.waiters["m1"] = w
	tr.handleReply(replyBody(t, `{"result": null, "failure": null, "ending": false, "_msg_id": "m1", "_unique_id": "u1"}`))
	tr.handleReply(replyBody(t, `{"result": [1, 2], "failure": null, "ending": false, "_msg_id": "m1", "_unique_id": "u2"}`))
	if len(w.ch) != 0 {
		t.Fatal("a partial reply completed the call")
	}
	tr.handleReply(replyBody(t, `{"result": [1, 2], "failure": null, "ending": false, "_msg_id": "m1", "_unique_id": "u2"}`))
	tr.handleReply(replyBody(t, `{"result": null, "failure": null, "ending": true, "_msg_id": "m1", "_unique_id": "u3"}`))
	r := <-w.ch
	if string(r.Result) != "[1, 2]" {
		t.Fatalf("result %s", r.Result)
	}
	tr.handleReply(replyBody(t, `{"result": 1, "failure": null, "ending": true, "_msg_id": "gone", "_unique_id": "u4"}`))
	tr.handleReply([]byte(`{"oslo.version": "2.0", "oslo.message": "{\"result\": 1}"}`))
	st := tr.Stats()
	if st.Dropped[ReasonDuplicate] != 1 || st.Dropped[ReasonUnknownMsgID] != 1 || st.Dropped[ReasonBadField] != 1 {
		t.Fatalf("dropped %v", st.Dropped)
	}
}

func TestCapTimeouts(t *testing.T) {
	tr := &Transport{cfg: Config{}.withDefaults(), timeouts: map[string]time.Duration{"slow": 240 * time.Second, "quick": 5 * time.Second}}
	tgt := Target{Topic: "q-plugin"}
	tr.CapTimeouts(10 * time.Second)
	for m, want := range map[string]time.Duration{"slow": 10 * time.Second, "quick": 5 * time.Second, "other": 10 * time.Second} {
		if got := tr.MethodTimeout(tgt, m); got != want {
			t.Errorf("%s: %s, want %s", m, got, want)
		}
	}
	if tr.cfg.ResponseMaxTimeout != 10*time.Second {
		t.Errorf("max %s", tr.cfg.ResponseMaxTimeout)
	}
	tr.CapTimeouts(time.Hour) // never raises
	if tr.MethodTimeout(tgt, "other") != 10*time.Second {
		t.Error("cap raised")
	}
}
