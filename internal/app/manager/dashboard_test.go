package manager

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The controller serves the dashboard from its caches: the overview
// answers, and a Node made while a page is open is told to it by the
// informers, then shown.
func TestTheControllerServesTheDashboardLive(t *testing.T) {
	env := testenv.Get(t)
	o := Defaults()
	o.ArtifactDir, o.SkipNameValidation = t.TempDir(), true
	o.MetricsAddr, o.HealthProbeAddr, o.ArtifactAddr, o.ReceiverAddr, o.AlertsAddr = "0", "0", "0", "0", "0"
	addr := testenv.FreeAddr(t)
	o.Dashboard = Dashboard{Addr: addr, Auth: "none"}
	testenv.RunManagerFrom(t, func(ctx context.Context) (testenv.Manager, error) { return New(ctx, env.Config, o) })
	url := "http://" + addr
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(url + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("overview: %s", resp.Status)
		}
		return nil
	})
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Scan()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dashboard-%d", os.Getpid())}}
	if err := env.Client.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	told := make(chan struct{})
	go func() {
		for lines.Scan() {
			if lines.Text() == "event: changed" {
				close(told)
				return
			}
		}
	}()
	select {
	case <-told:
	case <-time.After(2 * time.Second):
		t.Fatal("the new Node was not told to the open page within 2 s")
	}
	page, err := http.Get(url + "/?fragment=1")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	body, _ := io.ReadAll(page.Body)
	if !strings.Contains(string(body), `data-node="`+node.Name+`"`) {
		t.Fatalf("the overview does not show the new Node:\n%s", body)
	}
	// The GitOps page reads the Kustomizations' Events from a cache that
	// keeps only theirs.
	gitops, err := http.Get(url + "/gitops")
	if err != nil {
		t.Fatal(err)
	}
	defer gitops.Body.Close()
	if gitops.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(gitops.Body)
		t.Fatalf("the GitOps page: %s %s", gitops.Status, body)
	}
}
