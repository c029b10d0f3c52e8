package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDataOfTheOlderEtcdIsRefusedWithWhatToDo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(Options{AssetsDir: t.TempDir(), EtcdDataDir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "make clean") {
		t.Fatalf("starting on an unmarked data directory: got %v, want an error naming %s and make clean", err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "member", "wal")); err != nil {
		t.Fatalf("the refused data directory was changed: %v", err)
	}
}

func TestDataThisEtcdWroteOrNoDataIsAccepted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := checkEtcdData(dir); err != nil {
		t.Fatalf("a directory not made yet: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(etcdMarker(dir), []byte(etcdGeneration+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkEtcdData(dir); err != nil {
		t.Fatalf("a directory this etcd wrote: %v", err)
	}
}
