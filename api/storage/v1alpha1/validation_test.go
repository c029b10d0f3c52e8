package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var counter atomic.Int32

func cluster(classes ...storagev1alpha1.DeviceClass) *storagev1alpha1.LVMCluster {
	return &storagev1alpha1.LVMCluster{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lvmc-%d", counter.Add(1)), Namespace: "default"},
		Spec:       storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: classes}},
	}
}

func paths(p ...storagev1alpha1.DevicePath) *storagev1alpha1.DeviceSelector {
	return &storagev1alpha1.DeviceSelector{Paths: p}
}

// The API server itself refuses a bad LVMCluster, naming the rule, before
// anything reconciles it.
func TestLVMClusterValidation(t *testing.T) {
	c := testenv.Get(t).Client
	thin := func(percent, ratio int32) *storagev1alpha1.ThinPoolConfig {
		return &storagev1alpha1.ThinPoolConfig{Name: "pool", SizePercent: percent, OverprovisionRatio: ratio}
	}
	cases := []struct {
		name    string
		obj     *storagev1alpha1.LVMCluster
		message string // empty: accepted
	}{
		{"valid", cluster(storagev1alpha1.DeviceClass{Name: "fast", Default: true, DeviceSelector: paths("/dev/vdb"), ThinPoolConfig: thin(90, 10)},
			storagev1alpha1.DeviceClass{Name: "bulk", DeviceSelector: paths("/dev/disk/by-id/x")}), ""},
		{"two defaults", cluster(storagev1alpha1.DeviceClass{Name: "a", Default: true}, storagev1alpha1.DeviceClass{Name: "b", Default: true}),
			"at most one device class may be the default"},
		{"duplicate names", cluster(storagev1alpha1.DeviceClass{Name: "a"}, storagev1alpha1.DeviceClass{Name: "a"}),
			"device class names must be unique"},
		{"relative path", cluster(storagev1alpha1.DeviceClass{Name: "a", DeviceSelector: paths("vdb")}), "device paths must be absolute and under /dev"},
		{"path outside /dev", cluster(storagev1alpha1.DeviceClass{Name: "a", DeviceSelector: paths("/dev/../etc/passwd")}),
			"device paths must be absolute and under /dev"},
		{"optional path outside /dev", cluster(storagev1alpha1.DeviceClass{Name: "a",
			DeviceSelector: &storagev1alpha1.DeviceSelector{OptionalPaths: []storagev1alpha1.DevicePath{"/tmp/disk"}}}), "device paths must be absolute and under /dev"},
		{"sizePercent too small", cluster(storagev1alpha1.DeviceClass{Name: "a", ThinPoolConfig: thin(5, 10)}), "sizePercent"},
		{"sizePercent too large", cluster(storagev1alpha1.DeviceClass{Name: "a", ThinPoolConfig: thin(95, 10)}), "sizePercent"},
		{"overprovision below 1", cluster(storagev1alpha1.DeviceClass{Name: "a", ThinPoolConfig: thin(50, -1)}), "overprovisionRatio"},
		{"discovery with paths", cluster(storagev1alpha1.DeviceClass{Name: "a", DeviceSelector: &storagev1alpha1.DeviceSelector{
			Paths: []storagev1alpha1.DevicePath{"/dev/vdb"}, DiscoverBlankDisks: ptr.To(true)}}), "discoverBlankDisks takes every blank disk"},
		{"bad fstype", cluster(storagev1alpha1.DeviceClass{Name: "a", FSType: "btrfs"}), "fstype"},
		{"no classes", cluster(), "deviceClasses"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(context.Background(), tc.obj)
			switch {
			case tc.message == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Fatalf("error %v, want one saying %q", err, tc.message)
			}
		})
	}
}

// Omitted fields get the defaults the docs promise.
func TestLVMClusterDefaults(t *testing.T) {
	c := testenv.Get(t).Client
	obj := cluster(storagev1alpha1.DeviceClass{Name: "a", ThinPoolConfig: &storagev1alpha1.ThinPoolConfig{Name: "pool"},
		StorageClassOptions: &storagev1alpha1.StorageClassOptions{}})
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	dc := obj.Spec.Storage.DeviceClasses[0]
	if dc.FSType != "xfs" || dc.ThinPoolConfig.SizePercent != 90 || dc.ThinPoolConfig.OverprovisionRatio != 10 ||
		string(*dc.StorageClassOptions.VolumeBindingMode) != "WaitForFirstConsumer" || string(*dc.StorageClassOptions.ReclaimPolicy) != "Delete" {
		t.Errorf("defaults not applied: %+v %+v %+v", dc, dc.ThinPoolConfig, dc.StorageClassOptions)
	}
}

// A LogicalVolume cannot move, be renamed, change its source or shrink.
func TestLogicalVolumeImmutability(t *testing.T) {
	c := testenv.Get(t).Client
	ctx := context.Background()
	lv := &storagev1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lv-%d", counter.Add(1))},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: "pvc-1", NodeName: "node-a", DeviceClass: "fast",
			Size: resource.MustParse("1Gi")},
	}
	if err := c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mutate  func(*storagev1alpha1.LogicalVolume)
		message string
	}{
		{"grow", func(l *storagev1alpha1.LogicalVolume) { l.Spec.Size = resource.MustParse("2Gi") }, ""},
		{"shrink", func(l *storagev1alpha1.LogicalVolume) { l.Spec.Size = resource.MustParse("512Mi") }, "size cannot shrink"},
		{"move", func(l *storagev1alpha1.LogicalVolume) { l.Spec.NodeName = "node-b" }, "nodeName and deviceClass cannot change"},
		{"source", func(l *storagev1alpha1.LogicalVolume) { l.Spec.Source = "other" }, "source cannot change"},
		{"rename", func(l *storagev1alpha1.LogicalVolume) { l.Spec.Name = "pvc-2" }, "name cannot change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := &storagev1alpha1.LogicalVolume{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(lv), current); err != nil {
				t.Fatal(err)
			}
			tc.mutate(current)
			err := c.Update(ctx, current)
			switch {
			case tc.message == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Fatalf("error %v, want one saying %q", err, tc.message)
			}
		})
	}
}
