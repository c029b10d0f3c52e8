package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// count keeps appending numbered lines to DIR/sequence and serves the
// file. A write that fails (a fenced, read-only volume) ends it.
func count(args []string) error {
	dir := args[0]
	if len(args) > 1 {
		mib, err := strconv.Atoi(args[1])
		if err != nil {
			return fmt.Errorf("ballast size %q is not a number of MiB", args[1])
		}
		if err := ballast(filepath.Join(dir, "ballast"), mib); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, "sequence")
	seq, err := lastSequence(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		data, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(data)
	})
	server := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	failed := make(chan error, 1)
	go func() { failed <- server.ListenAndServe() }()
	host, _ := os.Hostname()
	fmt.Printf("counting in %s from %d\n", path, seq+1)
	for tick := time.NewTicker(50 * time.Millisecond); ; {
		select {
		case err := <-failed:
			return err
		case <-tick.C:
		}
		seq++
		if _, err := fmt.Fprintf(f, "%d %s %d\n", seq, host, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("line %d: %w", seq, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("line %d: %w", seq, err)
		}
	}
}

// lastSequence is the number of the file's last whole line, 0 for none.
func lastSequence(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var last int64
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		var seq int64
		if _, err := fmt.Sscan(s.Text(), &seq); err == nil {
			last = seq
		}
	}
	return last, s.Err()
}

// ballast writes mib MiB of random bytes to path once, durably, so that
// a volume holds more than the lines: what a sync moves shows whether it
// sent the volume or only what changed.
func ballast(path string, mib int) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.Reader, int64(mib)<<20); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
