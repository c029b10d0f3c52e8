package provision_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// An image URL is a tenant's: an endpoint the admin did not list is
// refused before any request, so neither a request from the host
// network nor the agent's signed credentials go there.
func TestAnImageFromAnEndpointOffTheListIsNeverRequested(t *testing.T) {
	listener := testenv.CountDials(t)
	url := "http://127.0.0.1:" + strconv.Itoa(listener.Port) + "/images/disk.qcow2"
	ctx := context.Background()
	for _, allowed := range [][]string{nil, {"http://127.0.0.1:1"}, {"https://127.0.0.1:" + strconv.Itoa(listener.Port)}} {
		b := provision.BucketImages{AccessKey: "agent-key", SecretKey: "agent-secret", Endpoints: allowed}
		_, derr := b.Digest(ctx, url, "")
		_, serr := b.Size(ctx, url)
		cerr := b.Copy(ctx, url, &bytes.Buffer{})
		for _, err := range []error{derr, serr, cerr} {
			if err == nil || !strings.Contains(err.Error(), "is not one this node may fetch images from") {
				t.Errorf("with endpoints %v: %v; want the endpoint refused", allowed, err)
			}
		}
	}
	if n := listener.Dials(); n != 0 {
		t.Fatalf("the refused endpoint was dialled %d times", n)
	}
}
