package kustomization_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestAnIncludedRepositoryIsApplied: a Kustomization reading what the
// source's spec.include puts in its artifact applies it, and applies it
// again when only the included repository moves: the source's artifact
// changes at the same revision.
func TestAnIncludedRepositoryIsApplied(t *testing.T) {
	s := newStack(t)
	shared := testenv.NewGitServer(t).NewRepo(t, "shared")
	shared.CommitAndPush("one", map[string]string{"deploy/cm.yaml": configMap("shared", "key", "one")})
	repo := func(name, url string, include ...sourcev1.GitRepositoryInclude) *sourcev1.GitRepository {
		obj := &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: s.labels()},
			Spec: sourcev1.GitRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour},
				Reference: &sourcev1.GitRepositoryRef{Branch: "main"}, Include: include},
		}
		if err := s.c.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	sharedSource := repo("shared", shared.URL)
	rev := s.push(map[string]string{"own/cm.yaml": configMap("own")})
	repo("flux-system", s.repo.URL, sourcev1.GitRepositoryInclude{
		GitRepositoryRef: meta.LocalObjectReference{Name: "shared"}, FromPath: "deploy", ToPath: "vendor/shared"})
	s.waitSource(rev)
	s.kustomization("vendor", "./vendor", nil)
	s.waitReady("vendor", rev)
	shared1 := cm("shared")
	if s.exists(shared1); shared1.Data["key"] != "one" {
		t.Fatalf("the included ConfigMap: %v", shared1.Data)
	}

	shared.CommitAndPush("two", map[string]string{"deploy/cm.yaml": configMap("shared", "key", "two")})
	s.request(sharedSource)
	testenv.Eventually(t, timeout, func() error {
		shared2 := cm("shared")
		if !s.exists(shared2) || shared2.Data["key"] != "two" {
			return fmt.Errorf("the included repository's change is not applied: %v", shared2.Data)
		}
		return nil
	})
}
