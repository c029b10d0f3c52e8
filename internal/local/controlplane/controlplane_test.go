package controlplane

import (
	"errors"
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

func TestANewDataDirectoryIsMarkedBeforeEtcdWritesIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	// No binaries: the start fails after the claim, as one that crashed
	// once etcd had written its first files would.
	if _, err := Start(Options{AssetsDir: t.TempDir(), EtcdDataDir: dir}); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("starting without binaries: got %v, want ErrNoBinaries", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := claimEtcdData(dir); err != nil {
		t.Fatalf("data written after the directory was claimed is refused: %v", err)
	}
}

// A data directory that cannot be looked into is reported as such, not as
// the older etcd's data.
func TestAnUnreadableDataDirectorySaysSo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := claimEtcdData(dir)
	if err == nil || !strings.Contains(err.Error(), dir+" cannot be read") || strings.Contains(err.Error(), "3.4") {
		t.Fatalf("got %v, want the directory named as unreadable", err)
	}
}
