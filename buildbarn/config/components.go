package config

// Config file names; each program is started with its file's path.
const (
	StorageFile   = "storage.json"
	SchedulerFile = "scheduler.json"
	FrontendFile  = "frontend.json"
	BrowserFile   = "browser.json"
	WorkerFile    = "worker.json"
	// WorkerJsonnet wraps worker.json to add the pod's and node's names
	// to the worker's ID, from the environment.
	WorkerJsonnet = "worker.jsonnet"
	RunnerFile    = "runner.json"
)

// StoreSizes are a shard's stores, each its blocks and key-location
// map, in bytes.
type StoreSizes struct {
	CAS, AC, FSAC StoreSize
}

// StoreSize is one store's blocks and index.
type StoreSize struct {
	Blocks, KeyLocationMap int64
}

// ClaimBytes is the claim a store needs: its files, the persistent
// state and the filesystem's own metadata (half a percent and 16 MiB),
// rounded up to a whole GiB. For upstream's CAS of 32 GiB of blocks and
// a 400 MiB map that is 33 GiB, as bb-deployments sizes it.
func (s StoreSize) ClaimBytes() int64 {
	const gib = int64(1) << 30
	raw := s.Blocks + s.KeyLocationMap + s.Blocks/200 + 16<<20
	return (raw + gib - 1) / gib * gib
}

// local is a shard's local store in dir: upstream's block counts, and
// the state kept across restarts.
func local(dir string, size StoreSize, newBlocks int32) BlobAccess {
	return BlobAccess{Local: &Local{
		KeyLocationMapOnBlockDevice:      BlockDevice{File: FileDevice{Path: dir + "/key_location_map", SizeBytes: size.KeyLocationMap}},
		KeyLocationMapMaximumGetAttempts: 16,
		KeyLocationMapMaximumPutAttempts: 64,
		OldBlocks:                        8,
		CurrentBlocks:                    24,
		NewBlocks:                        newBlocks,
		BlocksOnBlockDevice:              Blocks{Source: BlockDevice{File: FileDevice{Path: dir + "/blocks", SizeBytes: size.Blocks}}, SpareBlocks: 3},
		Persistent:                       Persistent{StateDirectoryPath: dir + "/persistent_state", MinimumEpochInterval: "300s"},
	}}
}

// StorageFiles are the configuration every shard of the storage runs:
// its CAS, AC and FSAC in local blocks on its three claims.
func StorageFiles(sizes StoreSizes) (Files, error) {
	fsac := store(local(FSACPath, sizes.FSAC, 1), false)
	return marshal(StorageFile, Storage{
		GRPCServers:               []Server{listen(StoragePort)},
		MaximumMessageSizeBytes:   maximumMessageSize,
		Global:                    global(),
		ContentAddressableStorage: store(local(CASPath, sizes.CAS, 3), true),
		ActionCache:               store(local(ACPath, sizes.AC, 1), false),
		FileSystemAccessCache:     &fsac,
	})
}

// FrontendFiles: the frontend forwards storage calls to the shards and actions to the
// scheduler.
func FrontendFiles(in Installation) (Files, error) {
	if err := in.Check(true); err != nil {
		return nil, err
	}
	fsac := store(in.sharded(), false)
	execute := allowAll
	return marshal(FrontendFile, Storage{
		GRPCServers:               []Server{listen(FrontendPort)},
		Schedulers:                map[string]Schedule{"": {Endpoint: Endpoint{Address: in.SchedulerAddress(SchedulerClientPort)}}},
		MaximumMessageSizeBytes:   maximumMessageSize,
		Global:                    global(),
		ContentAddressableStorage: store(in.sharded(), true),
		ActionCache:               store(in.completeActionCache(), false),
		FileSystemAccessCache:     &fsac,
		ExecuteAuthorizer:         &execute,
	})
}

// SchedulerFiles: the scheduler queues actions per platform; it reads actions from the CAS.
func SchedulerFiles(in Installation) (Files, error) {
	if err := in.Check(false); err != nil {
		return nil, err
	}
	return marshal(SchedulerFile, Scheduler{
		AdminHTTPServers:          []Server{listen(SchedulerAdminPort)},
		ClientGRPCServers:         []Server{listen(SchedulerClientPort)},
		WorkerGRPCServers:         []Server{listen(SchedulerWorkerPort)},
		BrowserURL:                in.BrowserURL,
		ContentAddressableStorage: in.sharded(),
		MaximumMessageSizeBytes:   maximumMessageSize,
		Global:                    global(),
		ExecuteAuthorizer:         allowAll,
		ModifyDrainsAuthorizer:    allowAll,
		KillOperationsAuthorizer:  allowAll,
		ActionRouter: ActionRouter{Simple: SimpleRouter{
			PlatformKeyExtractor:     Extractor{ActionAndCommand: &Empty{}},
			InvocationKeyExtractors:  []Extractor{{CorrelatedInvocationsID: &Empty{}}, {ToolInvocationID: &Empty{}}},
			InitialSizeClassAnalyzer: SizeClassTimeout{DefaultExecutionTimeout: "1800s", MaximumExecutionTimeout: "7200s"},
		}},
		PlatformQueueWithNoWorkersTimeout: "900s",
	})
}

// BrowserFiles: the browser shows the installation's storage.
func BrowserFiles(in Installation) (Files, error) {
	if err := in.Check(false); err != nil {
		return nil, err
	}
	return marshal(BrowserFile, Browser{
		Blobstore:               in.blobstore(),
		MaximumMessageSizeBytes: maximumMessageSize,
		HTTPServers:             []Server{listen(BrowserPort)},
		Global:                  global(),
		Authorizer:              allowAll,
	})
}

// WorkerParams are one BuildbarnWorker's own settings.
type WorkerParams struct {
	Instance    string
	Concurrency int32
	RunnerImage string
}

// workerJsonnet adds the pod's and node's names, which only the pod
// knows, to each runner's worker ID.
const workerJsonnet = `local c = import 'worker.json';
c {
  buildDirectories: [
    d { runners: [r { workerId+: { pod: std.extVar('POD_NAME'), node: std.extVar('NODE_NAME') } } for r in d.runners] }
    for d in c.buildDirectories
  ],
}
`

// WorkerFiles are a worker's and its runner's configuration.
func WorkerFiles(in Installation, p WorkerParams) (Files, error) {
	if err := in.Check(true); err != nil {
		return nil, err
	}
	g := global()
	g.SetUmask = &Umask{Umask: 0}
	files, err := marshal(WorkerFile, Worker{
		Blobstore:               in.blobstore(),
		BrowserURL:              in.BrowserURL,
		MaximumMessageSizeBytes: maximumMessageSize,
		Scheduler:               Endpoint{Address: in.SchedulerAddress(SchedulerWorkerPort)},
		Global:                  g,
		BuildDirectories: []BuildDirectory{{
			Native: NativeDirectory{BuildDirectoryPath: WorkerPath + "/build", CacheDirectoryPath: WorkerPath + "/cache",
				MaximumCacheFileCount: 10000, MaximumCacheSizeBytes: 1 << 30, CacheReplacementPolicy: "LEAST_RECENTLY_USED"},
			Runners: []Runner{{
				Endpoint:           Endpoint{Address: "unix://" + RunnerSocket},
				Concurrency:        uint64(p.Concurrency),
				InstanceNamePrefix: p.Instance,
				Platform: Platform{Properties: []Property{
					{Name: "OSFamily", Value: "linux"},
					{Name: "container-image", Value: "docker://" + p.RunnerImage},
				}},
				WorkerID: map[string]string{},
			}},
		}},
		InputDownloadConcurrency: 10,
		OutputUploadConcurrency:  11,
		DirectoryCache:           Cache{MaximumCount: 1000, MaximumSizeBytes: 1000 << 10, CacheReplacementPolicy: "LEAST_RECENTLY_USED"},
	})
	if err != nil {
		return nil, err
	}
	runner, err := marshal(RunnerFile, RunnerConfig{
		BuildDirectoryPath: WorkerPath + "/build",
		GRPCServers:        []Server{{ListenPaths: []string{RunnerSocket}, AuthenticationPolicy: allowAll}},
	})
	if err != nil {
		return nil, err
	}
	files[RunnerFile] = runner[RunnerFile]
	files[WorkerJsonnet] = workerJsonnet
	return files, nil
}

// ReshardFraction is the share of blobs that move when the storage goes
// from `from` shards to `to`: with rendezvous hashing over named shards,
// only the blobs of added or removed shards move.
func ReshardFraction(from, to int32) float64 {
	switch {
	case from == to || from <= 0 && to <= 0:
		return 0
	case to > from:
		return float64(to-from) / float64(to)
	default:
		return float64(from-to) / float64(from)
	}
}
