package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/rules"
)

// kind describes one Buildbarn kind: what it is called, what it tells
// the other components, its configuration and its owned objects.
type kind struct {
	kindName  string
	component string
	// image is the image name under the controller's repository.
	image     string
	newObject func() Object
	newList   func() client.ObjectList
	// single: the installation has at most one (clients need to know
	// which); describe writes what the others learn from it.
	single   bool
	describe func(Object, *config.Installation)
	files    func(*scope) (config.Files, error)
	managers func(*scope) []manager
	// finalize, when set, runs before a deleted object goes.
	finalize func(ctx context.Context, r *Reconciler, obj Object) error
}

func (k *kind) owner(obj Object) objects.Owner {
	return objects.Owner{Name: obj.GetName(), Namespace: obj.GetNamespace(), Component: k.component,
		Ref: *metav1.NewControllerRef(obj, bbv1.GroupVersion.WithKind(k.kindName))}
}

func (k *kind) items(list client.ObjectList) []Object {
	objs, _ := apimeta.ExtractList(list)
	out := make([]Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(Object))
	}
	return out
}

func args(file string) []string { return []string{objects.ConfigDir + "/" + file} }

var (
	schedulerPorts = []corev1.ContainerPort{
		objects.Port("client", config.SchedulerClientPort),
		objects.Port("worker", config.SchedulerWorkerPort),
		objects.Port("http", config.SchedulerAdminPort),
	}
	storagePorts  = []corev1.ContainerPort{objects.Port("grpc", config.StoragePort)}
	frontendPorts = []corev1.ContainerPort{objects.Port("grpc", config.FrontendPort)}
	browserPorts  = []corev1.ContainerPort{objects.Port("http", config.BrowserPort)}
)

var scheduler = &kind{
	kindName: "BuildbarnScheduler", component: "scheduler", image: objects.SchedulerImage, single: true,
	newObject: func() Object { return &bbv1.BuildbarnScheduler{} },
	newList:   func() client.ObjectList { return &bbv1.BuildbarnSchedulerList{} },
	describe:  func(o Object, in *config.Installation) { in.Scheduler = o.GetName() },
	files:     func(s *scope) (config.Files, error) { return config.SchedulerFiles(s.install.Installation) },
	managers: func(*scope) []manager {
		return []manager{configMapManager{}, deploymentManager{args: args(config.SchedulerFile), ports: schedulerPorts},
			serviceManager{ports: schedulerPorts, defaultType: corev1.ServiceTypeClusterIP},
			ingressManager{host: func(s *scope) string { return s.obj.(*bbv1.BuildbarnScheduler).Spec.IngressHost }, port: "http"}}
	},
}

var storage = &kind{
	kindName: "BuildbarnStorage", component: "storage", image: objects.StorageImage, single: true,
	newObject: func() Object { return &bbv1.BuildbarnStorage{} },
	newList:   func() client.ObjectList { return &bbv1.BuildbarnStorageList{} },
	describe: func(o Object, in *config.Installation) {
		in.Storage, in.StorageShards = o.GetName(), 1
		if r := o.GetComponent().Replicas; r != nil {
			in.StorageShards = *r
		}
	},
	files: func(s *scope) (config.Files, error) {
		return config.StorageFiles(rules.BuildbarnStoreSizes(&s.obj.(*bbv1.BuildbarnStorage).Spec.StorageExtras))
	},
	managers: func(*scope) []manager {
		return []manager{configMapManager{}, serviceManager{ports: storagePorts, headless: true}, statefulSetManager{}}
	},
	finalize: finalizeStorage,
}

var frontend = &kind{
	kindName: "BuildbarnFrontend", component: "frontend", image: objects.StorageImage,
	newObject: func() Object { return &bbv1.BuildbarnFrontend{} },
	newList:   func() client.ObjectList { return &bbv1.BuildbarnFrontendList{} },
	describe:  func(Object, *config.Installation) {},
	files:     func(s *scope) (config.Files, error) { return config.FrontendFiles(s.install.Installation) },
	managers: func(*scope) []manager {
		return []manager{configMapManager{}, deploymentManager{args: args(config.FrontendFile), ports: frontendPorts},
			serviceManager{ports: frontendPorts, defaultType: corev1.ServiceTypeLoadBalancer}}
	},
}

var browser = &kind{
	kindName: "BuildbarnBrowser", component: "browser", image: objects.BrowserImage, single: true,
	newObject: func() Object { return &bbv1.BuildbarnBrowser{} },
	newList:   func() client.ObjectList { return &bbv1.BuildbarnBrowserList{} },
	describe: func(o Object, in *config.Installation) {
		in.BrowserURL = fmt.Sprintf("http://%s.%s:%d", o.GetName(), o.GetNamespace(), config.BrowserPort)
		if host := o.(*bbv1.BuildbarnBrowser).Spec.IngressHost; host != "" {
			in.BrowserURL = "http://" + host
		}
	},
	files: func(s *scope) (config.Files, error) { return config.BrowserFiles(s.install.Installation) },
	managers: func(*scope) []manager {
		return []manager{configMapManager{}, deploymentManager{args: args(config.BrowserFile), ports: browserPorts},
			serviceManager{ports: browserPorts, defaultType: corev1.ServiceTypeClusterIP},
			ingressManager{host: func(s *scope) string { return s.obj.(*bbv1.BuildbarnBrowser).Spec.IngressHost }, port: "http"}}
	},
}

var worker = &kind{
	kindName: "BuildbarnWorker", component: "worker", image: objects.WorkerImage,
	newObject: func() Object { return &bbv1.BuildbarnWorker{} },
	newList:   func() client.ObjectList { return &bbv1.BuildbarnWorkerList{} },
	describe:  func(Object, *config.Installation) {},
	files: func(s *scope) (config.Files, error) {
		w := s.obj.(*bbv1.BuildbarnWorker).Spec.WorkerExtras
		return config.WorkerFiles(s.install.Installation, config.WorkerParams{Instance: w.Instance, Concurrency: max(w.Concurrency, 1), RunnerImage: w.RunnerImage})
	},
	managers: func(*scope) []manager {
		return []manager{configMapManager{}, deploymentManager{args: args(config.WorkerJsonnet), extend: addRunner}}
	},
}

// kinds are the five, in the order an installation is best brought up.
var kinds = []*kind{storage, scheduler, frontend, browser, worker}
