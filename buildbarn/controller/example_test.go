package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/internal/testing/bbexample"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// shapes are the configuration messages each generated file must decode
// into, field for field.
var shapes = map[string]func() any{
	config.StorageFile:   func() any { return &config.Storage{} },
	config.FrontendFile:  func() any { return &config.Storage{} },
	config.SchedulerFile: func() any { return &config.Scheduler{} },
	config.BrowserFile:   func() any { return &config.Browser{} },
	config.WorkerFile:    func() any { return &config.Worker{} },
	config.RunnerFile:    func() any { return &config.RunnerConfig{} },
}

// decodeStrictly refuses a file with a field its shape does not have.
func decodeStrictly(name string, data []byte) error {
	shape, ok := shapes[name]
	if !ok {
		return fmt.Errorf("no shape for %s", name)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(shape())
}

// The decoder the golden files are checked with does refuse a field
// that is not in the shape.
func TestTheDecoderRefusesUnknownFields(t *testing.T) {
	err := decodeStrictly(config.StorageFile, []byte(`{"grpcServers": [], "contentAddresableStorage": {}}`))
	if err == nil || !strings.Contains(err.Error(), "contentAddresableStorage") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

// The homelab example becomes the configuration in testdata/golden, every
// file of which decodes into Buildbarn's shapes, and the objects that run
// it are wired to each other.
func TestTheExampleGeneratesTheGoldenConfiguration(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, c, "buildbarn")
	for _, obj := range bbexample.Objects(t, release, mirror) {
		obj.SetNamespace(ns)
		create(t, c, obj.(client.Object))
	}
	for _, name := range []string{"storage", "scheduler", "frontend", "browser", "worker-ubuntu22-04"} {
		cm := waitFor(t, c, &corev1.ConfigMap{ObjectMeta: meta(ns, name+"-config")}, func(cm *corev1.ConfigMap) error {
			// The storage has two shards: once every client knows both,
			// the installation has settled.
			if name != "storage" && !strings.Contains(cm.Data[fileOf(name)], "storage-1.storage") {
				return fmt.Errorf("%s's configuration does not name shard storage-1 yet", name)
			}
			return nil
		})
		for key, data := range cm.Data {
			compareGolden(t, filepath.Join("testdata", "golden", name, key), data)
			if strings.HasSuffix(key, ".json") {
				if err := decodeStrictly(key, []byte(data)); err != nil {
					t.Errorf("%s/%s does not decode into its shape: %v", name, key, err)
				}
			}
		}
	}
	checkStorageObjects(t, c, ns)
	checkWorkerPod(t, c, ns)
	frontend := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "frontend"}, frontend); err != nil {
		t.Fatal(err)
	}
	if frontend.Spec.Type != corev1.ServiceTypeClusterIP || frontend.Spec.Ports[0].Port != config.FrontendPort {
		t.Errorf("the frontend's Service is %s on %v, want the example's ClusterIP on %d", frontend.Spec.Type, frontend.Spec.Ports, config.FrontendPort)
	}
}

func fileOf(name string) string {
	switch name {
	case "worker-ubuntu22-04":
		return config.WorkerFile
	default:
		return name + ".json"
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from what was generated (rerun with -update and review the diff):\n%s", path, got)
	}
}

// The shards' StatefulSet: three claims on strata-fast sized from the
// stores, mounted where the configuration keeps them, and kept when the
// set is scaled down or deleted.
func checkStorageObjects(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ss := waitFor(t, c, &appsv1.StatefulSet{ObjectMeta: meta(ns, "storage")}, func(*appsv1.StatefulSet) error { return nil })
	want := map[string]string{"cas": "2Gi", "ac": "1Gi", "fsac": "1Gi"}
	for _, tmpl := range ss.Spec.VolumeClaimTemplates {
		size := tmpl.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.String() != want[tmpl.Name] || *tmpl.Spec.StorageClassName != "strata-fast" {
			t.Errorf("claim template %s asks for %s of %s, want %s of strata-fast", tmpl.Name, size.String(), *tmpl.Spec.StorageClassName, want[tmpl.Name])
		}
		delete(want, tmpl.Name)
	}
	if len(want) > 0 {
		t.Errorf("the StatefulSet has no claim templates %v", want)
	}
	if p := ss.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("the shards' claims would not be kept: %+v", p)
	}
	mounts := map[string]string{}
	for _, m := range ss.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["cas"] != config.CASPath || mounts["ac"] != config.ACPath || mounts["fsac"] != config.FSACPath || mounts["config"] != "/config" {
		t.Errorf("the shard's mounts are %v", mounts)
	}
	if img := ss.Spec.Template.Spec.Containers[0].Image; img != mirror+"/bb-storage:"+release {
		t.Errorf("the shards run %s, want the release's bb-storage", img)
	}
}

// The worker's pod: the runner beside bb_worker, the installer and the
// directory maker before them, and the pod's and node's names.
func checkWorkerPod(t *testing.T, c client.Client, ns string) {
	t.Helper()
	d := waitFor(t, c, &appsv1.Deployment{ObjectMeta: meta(ns, "worker-ubuntu22-04")}, func(*appsv1.Deployment) error { return nil })
	spec := d.Spec.Template.Spec
	var names, inits, env []string
	for _, ct := range spec.Containers {
		names = append(names, ct.Name)
	}
	for _, ct := range spec.InitContainers {
		inits = append(inits, ct.Name+"="+ct.Image)
	}
	for _, e := range spec.Containers[0].Env {
		env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
	}
	if !slices.Equal(names, []string{"worker", "runner"}) ||
		!slices.Equal(inits, []string{"runner-installer=" + mirror + "/bb-runner-installer:" + release, "volume-init=busybox:1.36.1-uclibc"}) ||
		!slices.Equal(env, []string{"NODE_NAME=spec.nodeName", "POD_NAME=metadata.name"}) {
		t.Errorf("the worker's pod has containers %v, init containers %v, env %v", names, inits, env)
	}
	if args := spec.Containers[0].Args; !slices.Equal(args, []string{"/config/" + config.WorkerJsonnet}) {
		t.Errorf("bb_worker is started with %v", args)
	}
}
