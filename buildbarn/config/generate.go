// Package config generates a Buildbarn installation's configuration files
// from its components: the shapes of bb-storage's and
// bb-remote-execution's configuration messages, and one function per
// program that fills them in. It knows nothing of Kubernetes objects; the
// addresses it writes are the Services the objects package makes.
package config

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Ports the generated configuration listens on.
const (
	StoragePort         = 8981
	FrontendPort        = 8980
	SchedulerClientPort = 8982
	SchedulerWorkerPort = 8983
	SchedulerAdminPort  = 7982
	BrowserPort         = 7984
	DiagnosticsPort     = 9980
)

// Mount paths of a storage shard's claims, and the worker's directories.
const (
	CASPath    = "/storage-cas"
	ACPath     = "/storage-ac"
	FSACPath   = "/storage-fsac"
	WorkerPath = "/worker"
	// RunnerSocket is the runner's gRPC socket, in the directory the
	// worker and runner containers share.
	RunnerSocket = WorkerPath + "/runner"
)

// maximumMessageSize is gRPC's message limit, as bb-deployments sets it.
const maximumMessageSize = 2 << 20

// Installation is what one component's configuration needs to know of
// the others in its namespace.
type Installation struct {
	Namespace string
	// Storage is the BuildbarnStorage's name (its headless Service and
	// StatefulSet) and its number of shards.
	Storage       string
	StorageShards int32
	// Scheduler is the BuildbarnScheduler's name (its Service).
	Scheduler string
	// BrowserURL is where actions link to; empty without a browser.
	BrowserURL string
}

// ShardNames are the storage's shards, by pod name. The names, not the
// positions, key the sharding map, so adding shard N moves only the blobs
// that now hash to it, about 1/(N+1) of them.
func (in Installation) ShardNames() []string {
	names := make([]string, in.StorageShards)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", in.Storage, i)
	}
	return names
}

// ShardAddress is a shard's gRPC address through the headless Service.
func (in Installation) ShardAddress(shard string) string {
	return fmt.Sprintf("%s.%s.%s:%d", shard, in.Storage, in.Namespace, StoragePort)
}

// SchedulerAddress is the scheduler Service's address on port.
func (in Installation) SchedulerAddress(port int) string {
	return fmt.Sprintf("%s.%s:%d", in.Scheduler, in.Namespace, port)
}

// Check says what is missing for clients of the storage and scheduler.
func (in Installation) Check(needScheduler bool) error {
	if in.Storage == "" || in.StorageShards == 0 {
		return fmt.Errorf("namespace %s has no BuildbarnStorage with shards: create one (the frontends, workers, scheduler and browser use it)", in.Namespace)
	}
	if needScheduler && in.Scheduler == "" {
		return fmt.Errorf("namespace %s has no BuildbarnScheduler: create one", in.Namespace)
	}
	return nil
}

func (in Installation) sharded() BlobAccess {
	shards := map[string]Shard{}
	for _, name := range in.ShardNames() {
		shards[name] = Shard{Backend: BlobAccess{GRPC: &GRPC{Client: Endpoint{Address: in.ShardAddress(name)}}}, Weight: 1}
	}
	return BlobAccess{Sharding: &Sharding{Shards: shards}}
}

// completeActionCache returns only action results whose outputs are all
// in the CAS, so Bazel never gets a result it cannot download.
func (in Installation) completeActionCache() BlobAccess {
	return BlobAccess{CompletenessChecking: &CompletenessChecking{Backend: in.sharded(), MaximumTotalTreeSizeBytes: 64 << 20}}
}

func (in Installation) blobstore() Blobstore {
	return Blobstore{ContentAddressableStorage: in.sharded(), ActionCache: in.completeActionCache()}
}

func global() Global {
	return Global{DiagnosticsHTTPServer: &Diagnostics{
		HTTPServers:      []Server{listen(DiagnosticsPort)},
		EnablePrometheus: true, EnablePprof: true, EnableActiveSpans: true,
	}}
}

func listen(port int) Server {
	return Server{ListenAddresses: []string{fmt.Sprintf(":%d", port)}, AuthenticationPolicy: allowAll}
}

func store(backend BlobAccess, findMissing bool) Store {
	s := Store{Backend: backend, GetAuthorizer: allowAll, PutAuthorizer: allowAll}
	if findMissing {
		p := allowAll
		s.FindMissingAuthorizer = &p
	}
	return s
}

// Files are one component's configuration files, by name.
type Files map[string]string

func marshal(name string, v any) (Files, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return Files{name: string(data) + "\n"}, nil
}

// Keys returns the file names in order.
func (f Files) Keys() []string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
