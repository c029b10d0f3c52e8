// Package browser runs headless Chromium, Debian's package (installed by
// hack/packages.sh), driven over the DevTools protocol with chromedp: the
// dashboard's tests, its screenshots and its benchmark load pages in it.
package browser

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Path is the Chromium binary, or why there is none.
func Path() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: hack/packages.sh installs Debian's chromium package")
}

// Open starts a headless Chromium of its own (a fresh profile, 1280×900)
// and returns a context whose chromedp actions run in its first tab; the
// cancel func stops it.
func Open(ctx context.Context) (context.Context, context.CancelFunc, error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900),
		// As root (the tests run as root) Chromium's sandbox cannot start;
		// the pages are the test's own.
		chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	if err := chromedp.Do(tab); err != nil {
		cancelTab()
		cancelAlloc()
		return nil, nil, err
	}
	return tab, func() { cancelTab(); cancelAlloc() }, nil
}

// ForTest opens a browser for t, stopped when t ends; without Chromium t
// is skipped, or fails in CI.
func ForTest(t *testing.T) context.Context {
	t.Helper()
	if _, err := Path(); err != nil {
		testenv.Unavailable(t, err.Error())
	}
	ctx, cancel, err := Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return ctx
}
