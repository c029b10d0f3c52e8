package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Buildbarn's images cannot be pulled on the local cluster, so the
// end-to-end test runs this program in their place, as each of the roles
// strata's Buildbarn pods give their containers:
//
//	example-app /config/X.json(net)  a Buildbarn program: it listens on
//	                                 every address and socket its
//	                                 configuration names, and serves there
//	                                 what the pod gave it: its config, its
//	                                 pod and node names, and /size/DIR
//	example-app (no arguments)       bb-runner-installer: copies itself to
//	                                 /bb/tini and /bb/bb_runner
//	sh -c 'mkdir -pm M D && chmod M D'
//	                                 the volume-init container's shell, for
//	                                 the two commands it runs
//
// buildbarnRole returns the role os.Args asks for, or nil.
func buildbarnRole(args []string) func() error {
	switch {
	case filepath.Base(args[0]) == "sh":
		return func() error { return shell(args[1:]) }
	case len(args) == 1:
		return installRunner
	}
	for _, a := range args[1:] {
		if strings.HasSuffix(a, ".json") || strings.HasSuffix(a, ".jsonnet") {
			return func() error { return standIn(a) }
		}
	}
	return nil
}

// installRunner puts this program where the runner container starts
// tini and bb_runner from.
func installRunner() error {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	for _, name := range []string{"/bb/tini", "/bb/bb_runner"} {
		if err := os.WriteFile(name, self, 0o755); err != nil {
			return err
		}
	}
	fmt.Println("installed /bb/tini and /bb/bb_runner")
	return nil
}

var shellStep = regexp.MustCompile(`^(mkdir -pm|chmod) ([0-7]+) (\S+)$`)

// shell runs the volume-init container's script: steps joined by &&,
// each `mkdir -pm MODE DIR` or `chmod MODE DIR`.
func shell(args []string) error {
	if len(args) != 2 || args[0] != "-c" {
		return fmt.Errorf("sh stand-in: want -c SCRIPT, got %q", args)
	}
	for _, step := range strings.Split(args[1], "&&") {
		m := shellStep.FindStringSubmatch(strings.TrimSpace(step))
		if m == nil {
			return fmt.Errorf("sh stand-in: cannot run %q", step)
		}
		mode, _ := strconv.ParseUint(m[2], 8, 32)
		if m[1] == "mkdir -pm" {
			if err := os.MkdirAll(m[3], os.FileMode(mode)); err != nil {
				return err
			}
		}
		// Both set the mode regardless of the umask, as mkdir -m does.
		if err := os.Chmod(m[3], os.FileMode(mode)); err != nil {
			return err
		}
	}
	return nil
}

// standIn serves on every address and socket of the configuration.
func standIn(path string) error {
	data, err := readConfig(path)
	if err != nil {
		return err
	}
	var cfg any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tcp, unix := listens(cfg, nil, nil)
	if len(tcp)+len(unix) == 0 {
		return fmt.Errorf("%s names nothing to listen on", path)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "config %s\nNODE_NAME=%s\nPOD_NAME=%s\n", path, os.Getenv("NODE_NAME"), os.Getenv("POD_NAME"))
	})
	mux.HandleFunc("/size/", serveSize)
	errs := make(chan error, len(tcp)+len(unix))
	serve := func(network, addr string) {
		l, err := net.Listen(network, addr)
		if err != nil {
			errs <- err
			return
		}
		fmt.Println("listening on", network, addr)
		server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		errs <- server.Serve(l)
	}
	for _, a := range tcp {
		go serve("tcp", a)
	}
	for _, p := range unix {
		_ = os.Remove(p)
		go serve("unix", p)
	}
	return <-errs
}

// readConfig reads a configuration; a .jsonnet that imports a .json
// (the worker's) is read as the file it imports.
func readConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".jsonnet") {
		return data, err
	}
	m := regexp.MustCompile(`import '([^']+)'`).FindSubmatch(data)
	if m == nil {
		return nil, fmt.Errorf("%s imports no configuration", path)
	}
	f, err := os.Open(filepath.Join(filepath.Dir(path), string(m[1])))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// listens collects every listenAddresses and listenPaths entry.
func listens(v any, tcp, unix []string) ([]string, []string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if list, ok := x.([]any); ok && (k == "listenAddresses" || k == "listenPaths") {
				for _, s := range list {
					if k == "listenAddresses" {
						tcp = append(tcp, fmt.Sprint(s))
					} else {
						unix = append(unix, fmt.Sprint(s))
					}
				}
				continue
			}
			tcp, unix = listens(x, tcp, unix)
		}
	case []any:
		for _, x := range v {
			tcp, unix = listens(x, tcp, unix)
		}
	}
	return tcp, unix
}
