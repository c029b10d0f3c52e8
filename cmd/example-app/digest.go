package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// digest prints the SHA-256 of the first n bytes of a path and serves
// it: a pod shows what a populated claim holds (the image tests).
func digest(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("digest PATH N")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return fmt.Errorf("the byte count %q: %w", args[1], err)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(h, io.LimitReader(f, n))
	f.Close()
	if err != nil {
		return err
	}
	line := "sha256:" + hex.EncodeToString(h.Sum(nil))
	fmt.Println(line)
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, line+"\n") })
	server := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	return server.ListenAndServe()
}
