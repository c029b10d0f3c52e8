package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Source is a Flux source object: a GitRepository, OCIRepository or
// Bucket.
type Source interface {
	client.Object
	GetConditions() []metav1.Condition
	GetArtifact() *meta.Artifact
}

// WaitSource polls the source at key, read into obj, until check accepts
// it and its Ready condition.
func WaitSource[T Source](t testing.TB, c client.Client, key client.ObjectKey, obj T, check func(obj T, ready *metav1.Condition) error) T {
	t.Helper()
	Eventually(t, 30*time.Second, func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		return check(obj, apimeta.FindStatusCondition(obj.GetConditions(), meta.ReadyCondition))
	})
	return obj
}

// WaitSourceRevision waits for the source to be Ready with an artifact
// at revision.
func WaitSourceRevision[T Source](t testing.TB, c client.Client, key client.ObjectKey, obj T, revision string) T {
	t.Helper()
	return WaitSource(t, c, key, obj, func(obj T, ready *metav1.Condition) error {
		if a := obj.GetArtifact(); a == nil || a.Revision != revision || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("want ready at %s, have artifact %+v, conditions %+v", revision, a, obj.GetConditions())
		}
		return nil
	})
}

// WaitSourceFailure waits for the source to be Ready=False with reason
// and a message holding want.
func WaitSourceFailure[T Source](t testing.TB, c client.Client, key client.ObjectKey, obj T, reason, want string) T {
	t.Helper()
	return WaitSource(t, c, key, obj, func(obj T, ready *metav1.Condition) error {
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reason || !strings.Contains(ready.Message, want) {
			return fmt.Errorf("want Ready=False/%s with %q, have %+v", reason, want, obj.GetConditions())
		}
		return nil
	})
}
