package config

// The shapes below are the parts of bb-storage's and
// bb-remote-execution's configuration messages strata writes, in their
// JSON form (protobuf field names in lowerCamelCase). Every field is one
// the upstream message has; Decode refuses any other, so a golden file
// that drifts from these shapes fails its test.

// Empty is a message with no fields, as in `allow: {}`.
type Empty struct{}

// Policy is an authentication policy or an authorizer; strata allows all
// and leaves access control to the network, as bb-deployments does.
type Policy struct {
	Allow *Empty `json:"allow,omitempty"`
}

var allowAll = Policy{Allow: &Empty{}}

// Server is a gRPC or HTTP server's listen configuration.
type Server struct {
	ListenAddresses      []string `json:"listenAddresses,omitempty"`
	ListenPaths          []string `json:"listenPaths,omitempty"`
	AuthenticationPolicy Policy   `json:"authenticationPolicy"`
}

// Global is the configuration every Buildbarn program takes.
type Global struct {
	DiagnosticsHTTPServer *Diagnostics `json:"diagnosticsHttpServer,omitempty"`
	SetUmask              *Umask       `json:"setUmask,omitempty"`
}

// Diagnostics serves /metrics for Prometheus and the profiler.
type Diagnostics struct {
	HTTPServers       []Server `json:"httpServers"`
	EnablePrometheus  bool     `json:"enablePrometheus"`
	EnablePprof       bool     `json:"enablePprof"`
	EnableActiveSpans bool     `json:"enableActiveSpans"`
}

// Umask is set before a worker creates files.
type Umask struct {
	Umask uint32 `json:"umask"`
}

// BlobAccess is a storage backend: local blocks, a gRPC client, shards of
// other backends, or a completeness check in front of an action cache.
type BlobAccess struct {
	Local                *Local                `json:"local,omitempty"`
	GRPC                 *GRPC                 `json:"grpc,omitempty"`
	Sharding             *Sharding             `json:"sharding,omitempty"`
	CompletenessChecking *CompletenessChecking `json:"completenessChecking,omitempty"`
}

// GRPC reaches another Buildbarn program's storage service.
type GRPC struct {
	Client Endpoint `json:"client"`
}

// Endpoint is a gRPC client's address.
type Endpoint struct {
	Address string `json:"address"`
}

// Sharding spreads blobs over named shards by rendezvous hashing: adding
// a shard moves only the blobs that hash to it (bb-adrs 0011).
type Sharding struct {
	Shards map[string]Shard `json:"shards"`
}

// Shard is one named shard.
type Shard struct {
	Backend BlobAccess `json:"backend"`
	Weight  uint32     `json:"weight"`
}

// CompletenessChecking returns an action result only when every blob it
// names is in the CAS.
type CompletenessChecking struct {
	Backend                   BlobAccess `json:"backend"`
	MaximumTotalTreeSizeBytes int64      `json:"maximumTotalTreeSizeBytes"`
}

// Local keeps blobs in blocks on a block device or file, indexed by a
// key-location map, and persists its state across restarts.
type Local struct {
	KeyLocationMapOnBlockDevice      BlockDevice `json:"keyLocationMapOnBlockDevice"`
	KeyLocationMapMaximumGetAttempts uint32      `json:"keyLocationMapMaximumGetAttempts"`
	KeyLocationMapMaximumPutAttempts int32       `json:"keyLocationMapMaximumPutAttempts"`
	OldBlocks                        int32       `json:"oldBlocks"`
	CurrentBlocks                    int32       `json:"currentBlocks"`
	NewBlocks                        int32       `json:"newBlocks"`
	BlocksOnBlockDevice              Blocks      `json:"blocksOnBlockDevice"`
	Persistent                       Persistent  `json:"persistent"`
}

// BlockDevice is a file used as a block device.
type BlockDevice struct {
	File FileDevice `json:"file"`
}

// FileDevice is a file of a fixed size.
type FileDevice struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"sizeBytes"`
}

// Blocks are where a local store's blocks are.
type Blocks struct {
	Source      BlockDevice `json:"source"`
	SpareBlocks int32       `json:"spareBlocks"`
}

// Persistent keeps a local store's state across restarts.
type Persistent struct {
	StateDirectoryPath   string `json:"stateDirectoryPath"`
	MinimumEpochInterval string `json:"minimumEpochInterval"`
}

// Store is a storage service with its authorizers, as bb-storage and the
// frontend serve it.
type Store struct {
	Backend               BlobAccess `json:"backend"`
	GetAuthorizer         Policy     `json:"getAuthorizer"`
	PutAuthorizer         Policy     `json:"putAuthorizer"`
	FindMissingAuthorizer *Policy    `json:"findMissingAuthorizer,omitempty"`
}

// Storage is bb_storage's configuration, for a shard and for a frontend.
type Storage struct {
	GRPCServers               []Server            `json:"grpcServers"`
	Schedulers                map[string]Schedule `json:"schedulers,omitempty"`
	MaximumMessageSizeBytes   int64               `json:"maximumMessageSizeBytes"`
	Global                    Global              `json:"global"`
	ContentAddressableStorage Store               `json:"contentAddressableStorage"`
	ActionCache               Store               `json:"actionCache"`
	FileSystemAccessCache     *Store              `json:"fileSystemAccessCache,omitempty"`
	ExecuteAuthorizer         *Policy             `json:"executeAuthorizer,omitempty"`
}

// Schedule is where a frontend forwards an instance's actions.
type Schedule struct {
	Endpoint Endpoint `json:"endpoint"`
}

// Scheduler is bb_scheduler's configuration.
type Scheduler struct {
	AdminHTTPServers                  []Server     `json:"adminHttpServers"`
	ClientGRPCServers                 []Server     `json:"clientGrpcServers"`
	WorkerGRPCServers                 []Server     `json:"workerGrpcServers"`
	BrowserURL                        string       `json:"browserUrl"`
	ContentAddressableStorage         BlobAccess   `json:"contentAddressableStorage"`
	MaximumMessageSizeBytes           int64        `json:"maximumMessageSizeBytes"`
	Global                            Global       `json:"global"`
	ExecuteAuthorizer                 Policy       `json:"executeAuthorizer"`
	ModifyDrainsAuthorizer            Policy       `json:"modifyDrainsAuthorizer"`
	KillOperationsAuthorizer          Policy       `json:"killOperationsAuthorizer"`
	ActionRouter                      ActionRouter `json:"actionRouter"`
	PlatformQueueWithNoWorkersTimeout string       `json:"platformQueueWithNoWorkersTimeout"`
}

// ActionRouter routes actions to platform queues.
type ActionRouter struct {
	Simple SimpleRouter `json:"simple"`
}

// SimpleRouter keys queues by platform and invocation.
type SimpleRouter struct {
	PlatformKeyExtractor     Extractor        `json:"platformKeyExtractor"`
	InvocationKeyExtractors  []Extractor      `json:"invocationKeyExtractors"`
	InitialSizeClassAnalyzer SizeClassTimeout `json:"initialSizeClassAnalyzer"`
}

// Extractor picks a key out of an action.
type Extractor struct {
	ActionAndCommand        *Empty `json:"actionAndCommand,omitempty"`
	CorrelatedInvocationsID *Empty `json:"correlatedInvocationsId,omitempty"`
	ToolInvocationID        *Empty `json:"toolInvocationId,omitempty"`
}

// SizeClassTimeout bounds execution time.
type SizeClassTimeout struct {
	DefaultExecutionTimeout string `json:"defaultExecutionTimeout"`
	MaximumExecutionTimeout string `json:"maximumExecutionTimeout"`
}

// Blobstore is a client's view of the storage: the CAS and the AC.
type Blobstore struct {
	ContentAddressableStorage BlobAccess `json:"contentAddressableStorage"`
	ActionCache               BlobAccess `json:"actionCache"`
}

// Browser is bb_browser's configuration.
type Browser struct {
	Blobstore               Blobstore `json:"blobstore"`
	MaximumMessageSizeBytes int64     `json:"maximumMessageSizeBytes"`
	HTTPServers             []Server  `json:"httpServers"`
	Global                  Global    `json:"global"`
	Authorizer              Policy    `json:"authorizer"`
}

// Worker is bb_worker's configuration.
type Worker struct {
	Blobstore                Blobstore        `json:"blobstore"`
	BrowserURL               string           `json:"browserUrl"`
	MaximumMessageSizeBytes  int64            `json:"maximumMessageSizeBytes"`
	Scheduler                Endpoint         `json:"scheduler"`
	Global                   Global           `json:"global"`
	BuildDirectories         []BuildDirectory `json:"buildDirectories"`
	InputDownloadConcurrency int64            `json:"inputDownloadConcurrency"`
	OutputUploadConcurrency  int64            `json:"outputUploadConcurrency"`
	DirectoryCache           Cache            `json:"directoryCache"`
}

// BuildDirectory is where a worker's runners build.
type BuildDirectory struct {
	Native  NativeDirectory `json:"native"`
	Runners []Runner        `json:"runners"`
}

// NativeDirectory is a build directory on the worker's disk, with its
// file cache.
type NativeDirectory struct {
	BuildDirectoryPath     string `json:"buildDirectoryPath"`
	CacheDirectoryPath     string `json:"cacheDirectoryPath"`
	MaximumCacheFileCount  uint64 `json:"maximumCacheFileCount"`
	MaximumCacheSizeBytes  int64  `json:"maximumCacheSizeBytes"`
	CacheReplacementPolicy string `json:"cacheReplacementPolicy"`
}

// Runner is the runner sidecar a worker sends actions to.
type Runner struct {
	Endpoint           Endpoint          `json:"endpoint"`
	Concurrency        uint64            `json:"concurrency"`
	InstanceNamePrefix string            `json:"instanceNamePrefix,omitempty"`
	Platform           Platform          `json:"platform"`
	WorkerID           map[string]string `json:"workerId"`
}

// Platform is the set of properties actions ask for.
type Platform struct {
	Properties []Property `json:"properties"`
}

// Property is one platform property.
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cache bounds an in-memory cache.
type Cache struct {
	MaximumCount           int64  `json:"maximumCount"`
	MaximumSizeBytes       int64  `json:"maximumSizeBytes"`
	CacheReplacementPolicy string `json:"cacheReplacementPolicy"`
}

// RunnerConfig is bb_runner's configuration.
type RunnerConfig struct {
	BuildDirectoryPath string   `json:"buildDirectoryPath"`
	GRPCServers        []Server `json:"grpcServers"`
}
