package nodecmd

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-gitops/strata/internal/app/imagefill"
	"github.com/strata-gitops/strata/internal/app/imagejobs"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// agentFlags say which agent's volume API to call, as which tenant.
type agentFlags struct {
	url, tokenFile, caFile string
}

func (f *agentFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "agent", "", "the agent's volume API, e.g. https://storage-1.lan:8420")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the tenant's token; $STRATA_AGENT_TOKEN when empty")
	cmd.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA the agent's certificate chains to (the chart's <release>-agent-ca-public); the system's roots when empty")
}

// client is the agent's client as the tenant, with its CA.
func (f *agentFlags) client() (*volumeapi.Client, error) {
	if f.url == "" {
		return nil, fmt.Errorf("--agent is empty: give the agent's volume API URL")
	}
	token := os.Getenv("STRATA_AGENT_TOKEN")
	if f.tokenFile != "" {
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		return nil, fmt.Errorf("no tenant token: set --token-file or $STRATA_AGENT_TOKEN")
	}
	c := &volumeapi.Client{URL: f.url, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		if c.HTTP, err = volumeapi.TrustingCA(pem, 30*time.Second); err != nil {
			return nil, fmt.Errorf("--ca-file %s: %w", f.caFile, err)
		}
	}
	return c, nil
}

// Image calls an agent's image jobs as a tenant.
func Image() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Fill volumes from VM images through an agent's image jobs (docs/images.md)"}
	cmd.AddCommand(imageProvisionCommand(), imageStatusCommand(), imageCancelCommand(), imageJobsCommand(), imageFillCommand())
	return cmd
}

func imageProvisionCommand() *cobra.Command {
	var req provision.Request
	var wait bool
	cmd := agentSubcommand("provision", "Start an image job and, unless --wait=false, show its progress until it ends", cobra.NoArgs,
		func(cmd *cobra.Command, c *volumeapi.Client, _ []string) error {
			id, err := c.Provision(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s\n", id)
			if !wait {
				return nil
			}
			j, err := imagejobs.Watch(cmd.Context(), c, id, cmd.OutOrStdout(), time.Second)
			if err == nil && j.Status != provision.Completed {
				err = fmt.Errorf("job %s %s: %s", id, j.Status, j.Error)
			}
			return err
		})
	cmd.Flags().StringVar(&req.ImageURL, "image-url", "", "the image: http(s)://<endpoint>/<bucket>/<object>")
	cmd.Flags().StringVar(&req.VolumeName, "volume", "", "the volume to fill")
	cmd.Flags().Int64Var(&req.VolumeSizeGB, "size-gb", 0, "the volume's size in GiB, at least the image's disk")
	cmd.Flags().StringVar(&req.ImageType, "type", "qcow2", "the image's format: qcow2 or raw")
	cmd.Flags().StringVar(&req.SHA256, "sha256", "", "the image's digest; the object <image>.sha256 beside it when empty")
	cmd.Flags().BoolVar(&req.Overwrite, "overwrite", false, "fill the volume even when it exists already")
	cmd.Flags().StringVar(&req.IdempotencyKey, "idempotency-key", "", "a key that makes a repeated request return the first one's job")
	cmd.Flags().BoolVar(&wait, "wait", true, "show the job's progress until it ends; exit 1 unless it completed")
	return cmd
}

func imageFillCommand() *cobra.Command {
	o := imagefill.Options{CacheDir: "/var/lib/strata/images/cache", AccessKey: os.Getenv("STRATA_IMAGE_ACCESS_KEY"),
		SecretKey: os.Getenv("STRATA_IMAGE_SECRET_KEY")}
	o.Image.Format = qemuimg.QCOW2
	cmd := &cobra.Command{
		Use:   "fill --image-url URL --target PATH",
		Short: "Fill a file, a block device or a directory (as disk.raw) from an image, verified and cached on this node, with no agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Image.URL == "" || o.Target == "" {
				return fmt.Errorf("give --image-url and --target")
			}
			return imagefill.Fill(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Image.URL, "image-url", "", "the image: http(s)://<endpoint>/<bucket>/<object>; credentials from $STRATA_IMAGE_ACCESS_KEY and $STRATA_IMAGE_SECRET_KEY")
	f.StringVar(&o.Image.Format, "type", o.Image.Format, "the image's format: qcow2 or raw")
	f.StringVar(&o.Image.SHA256, "sha256", "", "the image's digest; the object <image>.sha256 beside it when empty")
	f.StringVar(&o.Target, "target", "", "an existing file or block device at least the image's disk, or a directory, which gets disk.raw")
	f.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "the node's image cache")
	f.Int64Var(&o.CacheBytes, "cache-bytes", 0, "bound of the cache in bytes; least recently used images not in use go first; 0 is none")
	f.StringSliceVar(&o.Endpoints, "endpoints", []string{provision.AnyEndpoint}, "the S3 endpoints (scheme://host[:port]) the image may come from; * allows any")
	return cmd
}

// agentSubcommand is a subcommand that calls the agent as the tenant.
func agentSubcommand(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, c *volumeapi.Client, args []string) error) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return run(cmd, c, args)
		},
	}
	f.add(cmd)
	return cmd
}

func imageStatusCommand() *cobra.Command {
	return agentSubcommand("status JOB", "Show an image job's progress", cobra.ExactArgs(1),
		func(cmd *cobra.Command, c *volumeapi.Client, args []string) error {
			j, err := c.ImageJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), imagejobs.Line(j))
			return nil
		})
}

func imageCancelCommand() *cobra.Command {
	return agentSubcommand("cancel JOB", "Cancel an image job: it stops within a second, and the volume it made goes", cobra.ExactArgs(1),
		func(cmd *cobra.Command, c *volumeapi.Client, args []string) error {
			return c.CancelImageJob(cmd.Context(), args[0])
		})
}

func imageJobsCommand() *cobra.Command {
	return agentSubcommand("jobs", "List the tenant's image jobs, the newest first", cobra.NoArgs,
		func(cmd *cobra.Command, c *volumeapi.Client, _ []string) error {
			jobs, err := c.ImageJobs(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tVOLUME\tSTATUS\tSTAGE\tPERCENT\tCREATED")
			for _, j := range jobs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d%%\t%s\n", j.ID, j.Request.VolumeName, j.Status, j.Progress.Stage, j.Progress.Percent,
					j.CreatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		})
}
