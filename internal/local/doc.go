// Package local holds, in its subpackages, the local environment that
// `strata up` and the tests run besides strata: kube-apiserver and etcd
// (controlplane), a git server (gitserver) and loop-file disks
// (localdisk). No production package imports them.
package local
