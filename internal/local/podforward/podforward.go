// Package podforward forwards a local port to a port of a ready pod, as
// `kubectl port-forward` does, and forwards again to the next ready pod
// when the pod goes: how strata up and the end-to-end tests reach the
// controller's dashboard, which listens on the pod's loopback only.
package podforward

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Target is what to forward to: a ready pod of Namespace matching
// Selector, its Port.
type Target struct {
	Namespace, Selector string
	Port                int
}

// Forward listens on 127.0.0.1:localPort (0: any free port) and forwards
// to the target until ctx ends; a forward that breaks (the pod restarted)
// is made again, to the same local port. It returns the local address
// once the first forward listens, or why none did within wait. Broken
// forwards are told on log.
func Forward(ctx context.Context, cfg *rest.Config, t Target, localPort int, wait time.Duration, log io.Writer) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	f := &forwarder{cfg: cfg, kube: kube, target: t, port: localPort, first: make(chan error, 1)}
	go func() {
		for ctx.Err() == nil {
			if err := f.once(ctx); ctx.Err() == nil && err != nil {
				fmt.Fprintf(log, "  (the forward to %s/%s port %d broke and is made again: %v)\n", t.Namespace, t.Selector, t.Port, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	select {
	case err := <-f.first:
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("127.0.0.1:%d", f.port), nil
	case <-time.After(wait):
		return "", fmt.Errorf("forwarding to port %d of a pod in %s matching %s: none ready within %s", t.Port, t.Namespace, t.Selector, wait)
	}
}

type forwarder struct {
	cfg    *rest.Config
	kube   kubernetes.Interface
	target Target
	// port is the local port: once the first forward chose it, every
	// later one takes it again.
	port  int
	first chan error
}

// once forwards to a ready pod until the forward breaks or ctx ends; the
// first listen is told on f.first.
func (f *forwarder) once(ctx context.Context) error {
	pod, err := f.readyPod(ctx)
	if err != nil {
		return err
	}
	transport, upgrader, err := spdy.RoundTripperFor(f.cfg)
	if err != nil {
		return err
	}
	url := f.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.target.Namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	ready := make(chan struct{})
	ports := []string{strconv.Itoa(f.port) + ":" + strconv.Itoa(f.target.Port)}
	pf, err := portforward.NewOnAddressesWithContext(ctx, dialer, []string{"127.0.0.1"}, ports, ready, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case err := <-done:
		return err
	case <-ready:
	}
	if got, err := pf.GetPorts(); err == nil && len(got) == 1 {
		f.port = int(got[0].Local)
	}
	select {
	case f.first <- nil:
	default:
	}
	return <-done
}

// readyPod is a ready pod of the target, waited for until ctx ends.
func (f *forwarder) readyPod(ctx context.Context) (string, error) {
	for {
		pods, err := f.kube.CoreV1().Pods(f.target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: f.target.Selector})
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(&p) {
					return p.Name, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
