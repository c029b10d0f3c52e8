package rules

import (
	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/buildbarn/config"
)

// BuildbarnStorageClass is a Buildbarn storage's shards' class unless
// the spec names one: strata's thin LVM class, which grows claims online.
const BuildbarnStorageClass = "strata-fast"

// Upstream's sizes (bb-deployments): a 32 GiB CAS with a 400 MiB index,
// and small action and file-system access caches.
var (
	defaultCAS   = config.StoreSize{Blocks: 32 << 30, KeyLocationMap: 400 << 20}
	defaultCache = config.StoreSize{Blocks: 20 << 20, KeyLocationMap: 1 << 20}
)

// BuildbarnStoreSizes are a Buildbarn storage's three stores, defaults
// filled in.
func BuildbarnStoreSizes(e *bbv1.StorageExtras) config.StoreSizes {
	return config.StoreSizes{CAS: storeSize(e.CAS, defaultCAS), AC: storeSize(e.AC, defaultCache), FSAC: storeSize(e.FSAC, defaultCache)}
}

func storeSize(s bbv1.Store, def config.StoreSize) config.StoreSize {
	if s.BlocksSize != nil {
		def.Blocks = s.BlocksSize.Value()
	}
	if s.KeyLocationMapSize != nil {
		def.KeyLocationMap = s.KeyLocationMapSize.Value()
	}
	return def
}
