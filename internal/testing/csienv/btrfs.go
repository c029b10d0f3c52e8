package csienv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/internal/app/agent"
	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/netaddr"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	stratacsi "github.com/strata-gitops/strata/storage/csi"
	"github.com/strata-gitops/strata/storage/nfs"
)

// btrfsParts is what the btrfs path adds: the filesystem, the NFS
// server, and what csi-sanity must pass to reach the class.
type btrfsParts struct {
	mount      string
	ganesha    *nfs.GaneshaServer
	apiAddr    string
	class      string
	params     map[string]string
	token      string
	paramsFile string
	secrets    string
	// scheme is http, or https with caPEM the CA the agent's certificate
	// chains to.
	scheme string
	caPEM  []byte
}

// btrfsToken is the tenant token of the environment's one tenant.
const btrfsToken = "sanity-tenant-token-0123456789abcdef"

// StartBtrfs builds the btrfs path: a btrfs filesystem on a loop disk,
// NFS-Ganesha, the agent's volume API for one tenant, a StorageClass of
// the btrfs backend with its token Secret, and both CSI services; it
// returns once they answer. The node is the storage host, so volumes
// are staged by bind mount.
func StartBtrfs(ctx context.Context, cfg *rest.Config, o Options) (env *Env, err error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	env = &Env{Client: c, Options: o, cancel: cancel, btrfs: &btrfsParts{class: o.Class}}
	defer func() {
		if err != nil {
			_ = env.Stop()
		}
	}()
	b := env.btrfs
	if env.Disk, err = attachDisk(o); err != nil {
		return env, err
	}
	b.mount = filepath.Join(o.Dir, "btrfs")
	if err = localdisk.MountBtrfs(env.Disk, b.mount); err != nil {
		return env, err
	}
	nfsAddr, err := netaddr.Free()
	if err != nil {
		return env, err
	}
	if b.ganesha, err = nfs.StartGanesha(ctx, filepath.Join(o.Dir, "ganesha"), nfsAddr); err != nil {
		return env, err
	}
	if b.apiAddr, err = netaddr.Free(); err != nil {
		return env, err
	}
	ao := agent.Defaults()
	ao.Node, ao.LVM.Enabled = o.Node, false
	ao.Btrfs.Base, ao.Btrfs.Listen = filepath.Join(b.mount, "strata"), b.apiAddr
	ao.Btrfs.GaneshaExports, ao.Btrfs.GaneshaPID = b.ganesha.ExportsFile, b.ganesha.PIDFile
	b.scheme = "http"
	if o.BtrfsTLS {
		if ao.API.TLS.CACert, ao.API.TLS.CAKey, err = b.makeCA(o.Dir); err != nil {
			return env, err
		}
	}
	b.token = btrfsToken
	ao.API.TenantsEnv = "sanity:" + b.token
	volumes, err := agent.New(ctx, nil, ao)
	if err != nil {
		return env, err
	}
	env.run(func() error { return volumes.Start(ctx) })
	if err := b.createClass(ctx, c, o); err != nil {
		return env, err
	}
	if err := b.writeSanityFiles(o.Dir); err != nil {
		return env, err
	}
	if err := env.runStack(ctx, cfg, ao.Btrfs.Base); err != nil {
		return env, err
	}
	return env, env.waitReady(ctx)
}

// createClass makes the btrfs StorageClass and the Secret with its token.
func (b *btrfsParts) createClass(ctx context.Context, c client.Client, o Options) error {
	b.params = map[string]string{
		rules.AgentURLParameter: b.scheme + "://" + b.apiAddr, rules.NFSServerParameter: "127.0.0.1",
		"compression": "zstd",
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Node}}}
	if b.caPEM != nil {
		b.params[rules.AgentCASecretParameter] = o.Node + "/" + b.class + "-ca"
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: b.class + "-ca", Namespace: o.Node}, Data: map[string][]byte{"ca.crt": b.caPEM}})
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: b.class}, Provisioner: stratacsi.DriverName,
		Parameters: map[string]string{"csi.storage.k8s.io/provisioner-secret-name": b.class, "csi.storage.k8s.io/provisioner-secret-namespace": o.Node}}
	for k, v := range b.params {
		sc.Parameters[k] = v
	}
	for _, obj := range append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: b.class, Namespace: o.Node}, StringData: map[string]string{rules.TokenKey: b.token}},
		sc,
	) {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// writeSanityFiles writes csi-sanity's parameters file (the class's
// parameters, as the provisioner sidecar passes them) and its secrets
// file (the token, for every call that takes secrets).
func (b *btrfsParts) writeSanityFiles(dir string) error {
	params, err := yaml.Marshal(b.params)
	if err != nil {
		return err
	}
	b.paramsFile = filepath.Join(dir, "parameters.yaml")
	if err := os.WriteFile(b.paramsFile, params, 0o600); err != nil {
		return err
	}
	secrets := map[string]map[string]string{}
	for _, call := range []string{"CreateVolumeSecret", "DeleteVolumeSecret", "ControllerPublishVolumeSecret", "ControllerUnpublishVolumeSecret",
		"ControllerValidateVolumeCapabilitiesSecret", "NodeStageVolumeSecret", "NodePublishVolumeSecret", "CreateSnapshotSecret",
		"DeleteSnapshotSecret", "ControllerExpandVolumeSecret", "NodeExpandVolumeSecret", "ListSnapshotsSecret"} {
		secrets[call] = map[string]string{rules.TokenKey: b.token}
	}
	data, err := yaml.Marshal(secrets)
	if err != nil {
		return err
	}
	b.secrets = filepath.Join(dir, "secrets.yaml")
	return os.WriteFile(b.secrets, data, 0o600)
}

func (b *btrfsParts) sanityArgs() []string {
	return []string{"-csi.testvolumeparameters", b.paramsFile, "-csi.secrets", b.secrets}
}

// ready checks the agent's health endpoint.
func (b *btrfsParts) ready(ctx context.Context) error {
	hc, err := b.httpClient()
	if err != nil {
		return err
	}
	api := &volumeapi.Client{URL: b.scheme + "://" + b.apiAddr, Token: b.token, HTTP: hc}
	_, err = api.Stats(ctx)
	return err
}

// makeCA writes a CA for the agent's certificate into dir and returns
// its files.
func (b *btrfsParts) makeCA(dir string) (certFile, keyFile string, err error) {
	cert, key, err := volumeapi.NewCA("strata-csienv", 24*time.Hour)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return "", "", err
	}
	b.scheme, b.caPEM = "https", cert
	return certFile, keyFile, os.WriteFile(keyFile, key, 0o600)
}

// httpClient trusts the environment's CA, when it has one.
func (b *btrfsParts) httpClient() (*http.Client, error) {
	if b.caPEM == nil {
		return http.DefaultClient, nil
	}
	return volumeapi.TrustingCA(b.caPEM, 0)
}

// stop ends the NFS server and unmounts the filesystem with everything
// under it.
func (b *btrfsParts) stop(c client.Client) {
	if b.ganesha != nil {
		b.ganesha.Stop()
	}
	if b.mount != "" {
		_ = exec.Command("umount", "--recursive", b.mount).Run()
	}
	ctx := context.Background()
	_ = c.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: b.class}})
}

// BtrfsAgent returns the URL of the agent's volume API and the tenant
// token of the btrfs environment.
func (e *Env) BtrfsAgent() (url, token string) {
	return e.btrfs.scheme + "://" + e.btrfs.apiAddr, e.btrfs.token
}

// NFSAddr is host:port of the environment's NFS-Ganesha.
func (e *Env) NFSAddr() string { return e.btrfs.ganesha.Addr }

// BtrfsClass returns the parameters and secrets a provisioner passes to
// CreateVolume for the environment's btrfs class, and where the btrfs
// filesystem is mounted.
func (e *Env) BtrfsClass() (params, secrets map[string]string, mount string) {
	return e.btrfs.params, map[string]string{rules.TokenKey: e.btrfs.token}, e.btrfs.mount
}
