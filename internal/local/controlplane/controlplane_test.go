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
