package git

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@example.com/repo.git":   "https://***@example.com/repo.git",
		"https://ghp_0123456789@example.com/r.git": "https://***@example.com/r.git",
		"https://example.com/repo.git":             "https://example.com/repo.git",
		"ssh://git@example.com/repo.git":           "ssh://***@example.com/repo.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	raw := "https://user:hunter2hunter2@example.com/r.git"
	msg := redactIn(`fetching "https://user:hunter2hunter2@example.com/r.git": auth for hunter2hunter2 failed`, raw)
	if strings.Contains(msg, "hunter2") {
		t.Fatalf("redactIn left the password: %q", msg)
	}
}
