package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// [DEFAULT] use_json makes every line one JSON object with oslo's keys, and
// debug lets DEBUG lines through (they are dropped without it).
func TestUseJSONAndDebugLines(t *testing.T) {
	for _, debug := range []bool{false, true} {
		args := []string{"--use-json"}
		if debug {
			args = append(args, "--debug")
		}
		var out bytes.Buffer
		log, closeLog, err := newLogger(loadArgs(t, args...), &out, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("wired", "port", "p1")
		log.Debug("details")
		closeLog()
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := 1
		if debug {
			want = 2
		}
		if len(lines) != want {
			t.Fatalf("debug=%v: %d lines, want %d: %q", debug, len(lines), want, out.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatalf("not JSON: %q: %v", lines[0], err)
		}
		if rec["message"] != "wired" || rec["levelname"] != "INFO" {
			t.Errorf("record %v: want message wired, levelname INFO", rec)
		}
		if debug {
			if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil || rec["levelname"] != "DEBUG" {
				t.Errorf("debug line %q (%v)", lines[1], err)
			}
		}
	}
}
