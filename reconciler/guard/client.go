package guard

import (
	"context"
	"errors"
	"sync"

	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client wraps the client the apply engine deletes through, so that a
// force-recreate (delete, then apply) of an object that holds data is
// refused like any other deletion. It remembers the dry-run error that made
// the engine want to recreate, to name the immutable field.
type Client struct {
	client.Client
	Owner client.Object

	mu        sync.Mutex
	immutable map[objectKey]string
}

type objectKey struct {
	gk  schema.GroupKind
	key client.ObjectKey
}

func keyOf(o client.Object) objectKey {
	return objectKey{o.GetObjectKind().GroupVersionKind().GroupKind(), client.ObjectKeyFromObject(o)}
}

// NewClient guards deletions made through c on behalf of owner.
func NewClient(c client.Client, owner client.Object) *Client {
	return &Client{Client: c, Owner: owner, immutable: map[objectKey]string{}}
}

// Patch records immutable-field errors of dry runs.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if err != nil && ssaerrors.IsImmutableError(err) {
		c.mu.Lock()
		c.immutable[keyOf(obj)] = err.Error()
		c.mu.Unlock()
	}
	return err
}

// Delete refuses to delete an object that holds data without the opt-in.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := Check(ctx, c.Client, obj, c.Owner); err != nil {
		var blocked *Blocked
		if errors.As(err, &blocked) {
			c.mu.Lock()
			if cause, ok := c.immutable[keyOf(obj)]; ok {
				blocked.Cause = "force is set and an immutable field changed: " + cause
			}
			c.mu.Unlock()
		}
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}
