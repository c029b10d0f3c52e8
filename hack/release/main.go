// Command release builds strata's release with no container engine, from
// the Go module proxy and Debian's archive (docs/release.md):
//
//	go run ./hack/release lock                  refresh hack/release/packages.lock
//	go run ./hack/release build -version X.Y.Z  write bin/release/X.Y.Z
//	go run ./hack/release verify -version X.Y.Z check it offline with cosign.pub
//	go run ./hack/release push -version X.Y.Z -registry HOST[:PORT]
//	                                            copy it to a registry
//
// The image index holds an image per architecture (amd64, arm64): the
// locked Debian packages' files in one layer, strata's static binary in
// another, every time at the commit's, so that two builds of one commit
// give the same digests.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("give a command: lock, build -version X.Y.Z, verify -version X.Y.Z or push -version X.Y.Z -registry HOST")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	repo := fl.String("repo", ".", "the repository's root")
	lock := fl.String("lock", "hack/release/packages.lock", "the package lock")
	cache := fl.String("cache", "bin/release/cache", "apt state and downloaded packages, kept across builds")
	version := fl.String("version", "", "the release's version, X.Y.Z")
	out := fl.String("out", "", "where the release goes (default bin/release/VERSION)")
	key := fl.String("key", "bin/release/signing/cosign.key", "the signing key (PEM, PKCS#8 ECDSA P-256); made with cosign.pub beside it when missing")
	registry := fl.String("registry", "", "with push: the registry, HOST[:PORT]")
	pub := fl.String("pub", "bin/release/signing/cosign.pub", "with verify: the public key the release must be signed with")
	arch := fl.String("arch", strings.Join(Architectures, ","), "with build: the architectures to build images for, comma-separated (the local cluster's releases: the host's)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join("bin", "release", *version)
	}
	switch args[0] {
	case "lock":
		return refreshLock(ctx, *lock, *cache)
	case "verify":
		k, err := readPublicKey(*pub)
		if err != nil {
			return err
		}
		if err := Verify(*out, k); err != nil {
			return err
		}
		fmt.Printf("%s: the signatures, the SBOMs, the chart's digests and every blob hold\n", *out)
		return nil
	case "push":
		if *registry == "" {
			return fmt.Errorf("give the registry: push -version X.Y.Z -registry HOST[:PORT]")
		}
		if err := Push(ctx, *out, *registry); err != nil {
			return err
		}
		fmt.Printf("%s: pushed to %s/%s/ and %s/%s\n", *out, *registry, imagePrefix, *registry, chartRepository)
		return nil
	case "build":
		epoch, err := sourceDateEpoch(*repo)
		if err != nil {
			return err
		}
		digest, err := Build(ctx, Options{Version: *version, Repo: *repo, Lock: *lock, Cache: *cache, Out: *out, Epoch: epoch, Key: *key,
			Architectures: strings.Split(*arch, ",")})
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", filepath.Join(*out, "image"), digest)
		return nil
	}
	return fmt.Errorf("%q: the commands are lock, build, verify and push", args[0])
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or the commit's time.
func sourceDateEpoch(repo string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("the commit's time (set SOURCE_DATE_EPOCH outside a git checkout): %w", err)
		}
		s = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
