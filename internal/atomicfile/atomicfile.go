// Package atomicfile writes files so that a reader, or the next start after
// a crash at any point, sees either the old file or the complete new one.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteNamed writes into a temporary file in dir, syncs it, renames it
// to the name that write returns and syncs dir; write may pick the name
// from what it wrote (a content digest).
func WriteNamed(dir string, write func(io.Writer) (string, error)) (string, error) {
	return writeNamed(dir, write, true)
}

// WriteNamedCache is WriteNamed without waiting for the disk: after a
// power failure the file may be empty or damaged, never half-written
// before one.
func WriteNamedCache(dir string, write func(io.Writer) (string, error)) (string, error) {
	return writeNamed(dir, write, false)
}

func writeNamed(dir string, write func(io.Writer) (string, error), durable bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	name, err := write(tmp)
	if err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	if durable {
		// The rename is on disk only once its directory is.
		if err := SyncDir(dir); err != nil {
			return "", err
		}
	}
	return path, nil
}

// SyncDir waits until the entries of the directories, made, renamed or
// removed, are on disk.
func SyncDir(dirs ...string) error {
	for _, dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// Write replaces path with data, durably.
func Write(path string, data []byte) error {
	return write(path, data, true)
}

// WriteCache replaces path with data without waiting for the disk: for
// data that may be lost (after a power failure the file may be old or
// empty) but must never be read half-written.
func WriteCache(path string, data []byte) error {
	return write(path, data, false)
}

func write(path string, data []byte, durable bool) error {
	_, err := writeNamed(filepath.Dir(path), func(w io.Writer) (string, error) {
		_, err := io.Copy(w, bytes.NewReader(data))
		return filepath.Base(path), err
	}, durable)
	return err
}
