package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/report"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// exitCodeError carries a process exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func planCommand() *cobra.Command {
	var o plan.Options
	var source, format, failOn, kubeconfig, substituteFrom string
	var protectsData, sourceDirs []string
	var engine, keyFile string
	var limit int
	cmd := &cobra.Command{
		Use:   "plan --repo DIR --base REF --head REF",
		Short: "Show what a change to the cluster repository will do, offline or against a cluster",
		Long: "Renders every Kustomization reachable from --path at both revisions, with the engine's own\n" +
			"build, and lists in apply order what is created, changed, deleted or orphaned, classing\n" +
			"each change by risk: destroys-data, recreate, disruptive, blocked (by the data-loss guard),\n" +
			"safe. --head WORKTREE plans the working tree, uncommitted changes included. --kubeconfig\n" +
			"also dry-runs the head revision against a cluster and reports drift. See docs/plan.md.\n\n" +
			"Exit codes: 0 no change; 1 changes (--fail-on changes, the default); 2 destructive changes,\n" +
			"blocked deletions included (--fail-on destructive, where other changes exit 0); 3 error,\n" +
			"usage errors included. --fail-on never exits 0 unless there is an error.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitCodeError{plan.ExitError, fmt.Errorf("strata plan takes no arguments (have %q): name revisions with --base and --head", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Base == "" {
				return &exitCodeError{plan.ExitError, fmt.Errorf("--base is required: the revision the change is planned against, e.g. origin/main")}
			}
			key, err := parseKey(source)
			if err != nil {
				return &exitCodeError{plan.ExitError, err}
			}
			o.Source = key
			if !validChoice(format, "text", "markdown", "json") || !validChoice(failOn, "never", "changes", "destructive") {
				return &exitCodeError{plan.ExitError, fmt.Errorf("--format must be text, markdown or json and --fail-on never, changes or destructive (have %q, %q)", format, failOn)}
			}
			if substituteFrom != "" {
				if o.SubstituteFrom, err = readObjects(substituteFrom); err != nil {
					return &exitCodeError{plan.ExitError, err}
				}
			}
			if !validChoice(engine, "", string(risk.Flux), string(risk.Strata)) {
				return &exitCodeError{plan.ExitError, fmt.Errorf("--engine must be flux or strata (have %q)", engine)}
			}
			o.Engine = risk.Engine(engine)
			if o.SourceDirs, err = parseSourceDirs(sourceDirs); err != nil {
				return &exitCodeError{plan.ExitError, err}
			}
			if keyFile != "" {
				if o.Decrypter, err = decrypt.FromFile(keyFile); err != nil {
					return &exitCodeError{plan.ExitError, fmt.Errorf("--decryption-key-file: %w", err)}
				}
			}
			if o.Protectors, err = plan.Protectors(o.RepoDir, protectsData); err != nil {
				return &exitCodeError{plan.ExitError, err}
			}
			if kubeconfig != "" {
				if o.Live, err = liveClient(kubeconfig); err != nil {
					return &exitCodeError{plan.ExitError, err}
				}
			}
			p, err := plan.Run(context.Background(), o)
			if err != nil {
				return &exitCodeError{plan.ExitError, err}
			}
			if err := writePlan(cmd.OutOrStdout(), p, format, limit); err != nil {
				return &exitCodeError{plan.ExitError, err}
			}
			return &exitCodeError{code: p.ExitCode(failOn)}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.RepoDir, "repo", ".", "clone of the cluster repository")
	f.StringVar(&o.Base, "base", "", "base revision (branch, tag or commit), e.g. origin/main")
	f.StringVar(&o.Head, "head", "HEAD", "head revision, or WORKTREE for the working tree")
	f.StringVar(&o.Path, "path", ".", "where discovery starts: the path of the bootstrap Kustomization, relative to the source root")
	f.StringVar(&o.SourceRoot, "source-root", ".", "directory of the repository that the GitRepository serves as its root")
	f.StringVar(&source, "source", "flux-system/flux-system", "NAMESPACE/NAME of the GitRepository that stands for this repository")
	f.StringVar(&format, "format", "text", "text, markdown or json")
	f.StringVar(&failOn, "fail-on", "changes", "never, changes or destructive: what gives a non-zero exit code")
	f.BoolVar(&o.ChangedOnly, "changed-only", false, "render only Kustomizations whose inputs changed (same changes; unchanged Kustomizations are not counted)")
	f.IntVar(&limit, "markdown-limit", report.DefaultMarkdownLimit, "largest markdown output in characters; further Kustomizations are folded into a count")
	f.StringVar(&substituteFrom, "substitute-from", "", "YAML file of ConfigMaps and Secrets that postBuild.substituteFrom reads but the repository does not define (made at bootstrap, say)")
	f.StringVar(&o.Charts.Cache, "chart-cache", "", "where HelmReleases' charts are cached by digest (default ~/.cache/strata/charts)")
	f.BoolVar(&o.Charts.Offline, "offline", false, "render HelmReleases only from charts in the cache; name those missing")
	f.StringSliceVar(&o.Charts.Hosts, "chart-hosts", nil, "chart source hosts (host[:port]) charts may be fetched from besides those the base revision's HelmRepositories and OCIRepositories name")
	f.BoolVar(&o.Charts.Off, "no-charts", false, "diff HelmReleases as objects only; render no chart")
	f.StringArrayVar(&sourceDirs, "source-dir", nil, "KIND/NAMESPACE/NAME=DIR: render the Kustomizations built from that OCIRepository, Bucket or ExternalArtifact from a local directory holding its artifact's files (the same on both sides); repeatable")
	f.StringVar(&keyFile, "decryption-key-file", "", "age identities (age-keygen's key file) or an armored PGP private key, to decrypt the SOPS files of Kustomizations with spec.decryption: the plan then says which keys of an encrypted Secret change, never their values")
	f.StringVar(&engine, "engine", "", "flux or strata: what applies the repository on the cluster, which decides what a deletion does (Flux keeps nothing it prunes; strata's guard keeps data); default: what the repository shows, else flux")
	f.StringArrayVar(&protectsData, "protects-data", nil, "GROUP/KIND[=what it does] of a kind whose objects protect data (backups, snapshots): removing or pausing one is disruptive; repeatable, beside the built-in table and "+plan.ConfigFile)
	f.StringVar(&kubeconfig, "kubeconfig", "", "also compare the head revision with this cluster (server-side dry-run, live inventory) and report drift")
	// A usage error is an error (exit 3), not "changes" (exit 1): a CI gate
	// must not read a mistyped flag as a plan.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitCodeError{plan.ExitError, err} })
	return cmd
}

// readObjects reads the ConfigMaps and Secrets of a YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--substitute-from: %w", err)
	}
	defer f.Close()
	objects, err := ssautils.ReadObjects(f)
	if err != nil {
		return nil, fmt.Errorf("--substitute-from %s: %w", path, err)
	}
	for _, u := range objects {
		if k := u.GetKind(); u.GetAPIVersion() != "v1" || (k != "ConfigMap" && k != "Secret") {
			return nil, fmt.Errorf("--substitute-from %s: %s %s is not a v1 ConfigMap or Secret", path, k, u.GetName())
		}
	}
	return objects, nil
}

func liveClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: connecting to the cluster: %w", kubeconfig, err)
	}
	return c, nil
}

func writePlan(w io.Writer, p *plan.Plan, format string, limit int) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	case "markdown":
		return report.WriteMarkdown(w, p, limit)
	}
	f, ok := w.(*os.File)
	return report.WriteText(w, p, ok && term.IsTerminal(int(f.Fd())))
}

func parseKey(s string) (graph.Key, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return graph.Key{}, fmt.Errorf("--source %q must be NAMESPACE/NAME", s)
	}
	return graph.Key{Namespace: ns, Name: name}, nil
}

// parseSourceDirs reads --source-dir KIND/NAMESPACE/NAME=DIR flags; each
// directory must exist.
func parseSourceDirs(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, f := range flags {
		key, dir, ok := strings.Cut(f, "=")
		if parts := strings.Split(key, "/"); !ok || len(parts) != 3 || slices.Contains(parts, "") || dir == "" {
			return nil, fmt.Errorf("--source-dir %q must be KIND/NAMESPACE/NAME=DIR, e.g. OCIRepository/flux-system/apps=./artifact", f)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--source-dir %s: %s is not a directory", key, dir)
		}
		out[key] = dir
	}
	return out, nil
}

func validChoice(v string, choices ...string) bool {
	for _, c := range choices {
		if v == c {
			return true
		}
	}
	return false
}

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var e *exitCodeError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}
