// Command planbench measures strata plan on a generated cluster repository:
// N Kustomizations of M objects each, head differing from base in C of
// them. It times the strata binary (full and --changed-only, median of
// several runs) beside a loop of `kubectl kustomize` over the same paths at
// one revision, in the same run. `make bench` runs it; results go to
// docs/benchmarks.md by hand, with the command.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/plan"
)

type config struct {
	kustomizations, objects, changed, runs, helmReleases int
	strata, kubectl, layout, helm                        string
}

func main() {
	var c config
	flag.IntVar(&c.kustomizations, "kustomizations", 200, "Kustomizations in the repository")
	flag.IntVar(&c.objects, "objects", 20, "objects per Kustomization")
	flag.IntVar(&c.changed, "changed", 20, "Kustomizations whose objects differ between base and head")
	flag.IntVar(&c.runs, "runs", 5, "runs of each measurement; the median is reported")
	flag.StringVar(&c.strata, "strata", "bin/strata", "strata binary")
	flag.StringVar(&c.kubectl, "kubectl", "bin/k8s/kubectl", "kubectl binary for the reference loop")
	flag.StringVar(&c.layout, "layout", "flat", "flat: every Kustomization in clusters/bench; homelab: the app Kustomizations under one\n"+
		"parent (cluster-apps) that patches them, each app using a kustomize component and ${VAR:=default} substitution")
	flag.IntVar(&c.helmReleases, "helmreleases", 0, "instead of Kustomizations: this many HelmReleases of charts from an HTTP chart repository on loopback,\n"+
		"-changed of them bumped; strata plan with a cold and a warm chart cache beside helm template")
	flag.StringVar(&c.helm, "helm", "bin/helm", "helm binary for the HelmRelease reference loop")
	flag.Parse()
	if c.helmReleases > 0 {
		if err := runHelm(c, c.helm); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

func run(c config) error {
	dir, err := os.MkdirTemp("", "planbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := generate(dir, c); err != nil {
		return err
	}
	fmt.Printf("planbench: %s layout, %d Kustomizations x %d objects, %d changed, median of %d runs\n",
		c.layout, c.kustomizations, c.objects, c.changed, c.runs)

	args := []string{"plan", "--repo", dir, "--base", "main", "--head", "head", "--path", "./clusters/bench", "--format", "json", "--fail-on", "never"}
	full, fullPlan, err := timePlan(c, args)
	if err != nil {
		return err
	}
	changedOnly, changedPlan, err := timePlan(c, append(args, "--changed-only"))
	if err != nil {
		return err
	}
	if a, b := changeList(fullPlan), changeList(changedPlan); a != b {
		return fmt.Errorf("--changed-only gives other changes than a full plan:\n%s\nvs\n%s", a, b)
	}
	kubectl, err := timeKubectl(c, dir)
	if err != nil {
		return err
	}
	s := fullPlan.Summary
	fmt.Printf("plan: %d created, %d changed, %d deleted, %d unchanged objects\n", s.Created, s.Changed, s.Deleted, s.Unchanged)
	fmt.Printf("strata plan (both revisions):         %6.2f s\n", full.Seconds())
	fmt.Printf("strata plan --changed-only:           %6.2f s\n", changedOnly.Seconds())
	fmt.Printf("kubectl kustomize x %d (one revision): %6.2f s\n", c.kustomizations, kubectl.Seconds())
	fmt.Printf("ratio kubectl loop / strata plan: %.1fx (full), %.1fx (changed-only)\n",
		kubectl.Seconds()/full.Seconds(), kubectl.Seconds()/changedOnly.Seconds())
	return nil
}

// timePlan runs strata plan c.runs times and returns the median time and
// the plan of the last run.
func timePlan(c config, args []string) (time.Duration, *plan.Plan, error) {
	var times []time.Duration
	var p plan.Plan
	for range c.runs {
		var out bytes.Buffer
		cmd := exec.Command(c.strata, args...)
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", c.strata, strings.Join(args, " "), err)
		}
		times = append(times, time.Since(start))
		p = plan.Plan{}
		if err := json.Unmarshal(out.Bytes(), &p); err != nil {
			return 0, nil, err
		}
		if len(p.Errors) > 0 {
			return 0, nil, fmt.Errorf("plan errors: %v", p.Errors)
		}
	}
	return benchstat.Percentile(times, 50), &p, nil
}

// timeKubectl builds every Kustomization's path once with kubectl.
func timeKubectl(c config, dir string) (time.Duration, error) {
	var times []time.Duration
	for range c.runs {
		start := time.Now()
		for i := range c.kustomizations {
			cmd := exec.Command(c.kubectl, "kustomize", filepath.Join(dir, "apps", app(i)))
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return 0, fmt.Errorf("kubectl kustomize %s: %w", app(i), err)
			}
		}
		times = append(times, time.Since(start))
	}
	return benchstat.Percentile(times, 50), nil
}

func changeList(p *plan.Plan) string {
	var b strings.Builder
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			fmt.Fprintf(&b, "%s/%s %s %s %s\n", ks.Namespace, ks.Name, ch.Action, ch.Object, ch.Risk)
		}
	}
	return b.String()
}

func app(i int) string { return fmt.Sprintf("app-%03d", i) }

// generate writes the repository: clusters/bench holds the Kustomizations
// (each of the first ten a dependency of a tenth of the rest), apps/<name>
// their objects. Branch head changes one claim's size and one ConfigMap in
// each of the first c.changed apps.
func generate(dir string, c config) error {
	g, err := newGitDir(dir)
	if err != nil {
		return err
	}
	write, commit := g.write, g.commit
	layout, ok := layouts[c.layout]
	if !ok {
		return fmt.Errorf("-layout %q: want flat or homelab", c.layout)
	}
	flux, components := layout(c.kustomizations)
	writeApps := func(n int, size, level string) error {
		for i := range n {
			for name, content := range appFiles(i, c.objects, size, level, components) {
				if err := write(filepath.Join("apps", app(i), name), content); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for name, content := range flux {
		if err := write(name, content); err != nil {
			return err
		}
	}
	if err := writeApps(c.kustomizations, "10Gi", "1"); err != nil {
		return err
	}
	if err := commit("base", "checkout", "-qb", "head"); err != nil {
		return err
	}
	if err := writeApps(c.changed, "20Gi", "2"); err != nil {
		return err
	}
	return commit("head", "checkout", "-q", "main")
}

// gitDir is a git repository being written: files, then commits.
type gitDir struct{ dir string }

func newGitDir(dir string) (gitDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return gitDir{}, err
	}
	_, err := gitserver.Run(dir, "init", "-q", "-b", "main")
	return gitDir{dir}, err
}

func (g gitDir) write(name, content string) error {
	p := filepath.Join(g.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// commit commits everything, then runs the git command then.
func (g gitDir) commit(message string, then ...string) error {
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=bench", "-c", "user.email=bench@strata.dev", "commit", "-qm", message}, then} {
		if _, err := gitserver.Run(g.dir, args...); err != nil {
			return err
		}
	}
	return nil
}

func kustomization(i int) string {
	s := fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[1]s
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps/%[1]s
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`, app(i))
	if i >= 10 {
		s += fmt.Sprintf("  dependsOn:\n    - name: %s\n", app(i%10))
	}
	return s
}

// appFiles is one application: a namespace, a claim, and Deployments,
// Services and ConfigMaps up to n objects.
func appFiles(i, n int, size, level, components string) map[string]string {
	ns := app(i)
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n", ns)
	fmt.Fprintf(&b, `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: %s
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources:
    requests:
      storage: %s
`, ns, size)
	for j := 2; j < n; j++ {
		b.WriteString("---\n")
		switch j % 3 {
		case 0:
			fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[2]d
  namespace: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels: {app: web-%[2]d}
  template:
    metadata:
      labels: {app: web-%[2]d}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports: [{containerPort: 8080}]
          resources:
            requests: {cpu: 10m, memory: 32Mi}
`, ns, j)
		case 1:
			fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata:
  name: web-%[2]d
  namespace: %[1]s
spec:
  selector: {app: web-%[2]d}
  ports: [{port: 80, targetPort: 8080}]
`, ns, j)
		default:
			fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-%[2]d
  namespace: %[1]s
data:
  level: "%[3]s"
  owner: team-%[2]d
`, ns, j, level)
		}
	}
	return map[string]string{
		"objects.yaml":       b.String(),
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - objects.yaml\n" + components,
	}
}
