// Command example-app is the local cluster's example workload, built
// static into the image strata.local/example-app.
//
//	example-app serve DIR...  writes DIR/hello (once, with the pod's name
//	                          and the time) in each DIR, reads it back,
//	                          and serves what it read on :8080, and at
//	                          /size/DIR the size in bytes of the
//	                          filesystem DIR is on, as the pod sees it
//	example-app get URL       fetches URL, retrying for up to a minute,
//	                          and prints the answer
//	example-app digest PATH N print the SHA-256 of PATH's first N bytes
//	                          (a block device or a file), and serve it on
//	                          :8080
//	example-app count DIR [MIB]
//	                          appends "SEQ POD UNIXNANO" to DIR/sequence
//	                          every 50 ms, each line synced, SEQ one past
//	                          the file's last; serves the file on :8080;
//	                          first writes MIB MiB of random DIR/ballast
//	                          if it is missing; exits on a failed write
//
// It also stands in for Buildbarn's programs (buildbarn.go).
//
// A pod restart that serves the first pod's name shows the volume kept
// its data. Counters on two nodes show whether two writers ever overlap
// (the failover tests).
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if role := buildbarnRole(os.Args); role != nil {
		if err := role(); err != nil {
			fmt.Fprintln(os.Stderr, "example-app:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: example-app serve DIR... | example-app get URL | example-app count DIR [MIB] | example-app digest PATH N")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "get":
		err = get(os.Args[2])
	case "count":
		err = count(os.Args[2:])
	case "digest":
		err = digest(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: use serve or get", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example-app:", err)
		os.Exit(1)
	}
}

// serve keeps a file in each directory and serves their contents.
func serve(dirs []string) error {
	var lines []string
	for _, dir := range dirs {
		content, err := keep(filepath.Join(dir, "hello"))
		if err != nil {
			return err
		}
		lines = append(lines, dir+": "+content)
		fmt.Println(dir+":", content)
	}
	body := strings.Join(lines, "\n") + "\n"
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
	http.HandleFunc("/size/", serveSize)
	server := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	return server.ListenAndServe()
}

// keep writes path once, durably, and returns what it holds.
func keep(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	host, _ := os.Hostname()
	content := fmt.Sprintf("written by %s at %s", host, time.Now().UTC().Format(time.RFC3339))
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return content, os.Rename(path+".tmp", path)
}

// get fetches a URL until it answers, for a minute at most.
func get(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		body, err := fetch(ctx, url)
		if err == nil {
			fmt.Print(body)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", url, err)
		case <-time.After(time.Second):
		}
	}
}

func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	if err == nil && rsp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", rsp.Status)
	}
	return string(body), err
}

// serveSize answers /size/DIR with the size in bytes of the filesystem
// DIR is on, as the pod sees it.
func serveSize(w http.ResponseWriter, r *http.Request) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(strings.TrimPrefix(r.URL.Path, "/size"), &fs); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	fmt.Fprintln(w, int64(fs.Blocks)*fs.Bsize)
}
