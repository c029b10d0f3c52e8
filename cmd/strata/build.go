package main

import (
	"context"
	"fmt"
	"os"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/strata-gitops/strata/reconciler/build"
)

func buildCommand() *cobra.Command {
	var path, file string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Render manifests the way the controller applies them",
	}
	ks := &cobra.Command{
		Use:   "ks NAME --path DIR [--kustomization-file FILE]",
		Short: "Print one Kustomization's rendered objects",
		Long: "Renders the Kustomization with the controller's own build code: Flux's generator, kustomize\n" +
			"and postBuild.substitute. --path is the source root (a checkout of the repository);\n" +
			"spec.path is read from --kustomization-file when given, else it is the root itself.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := loadKustomization(args[0], file)
			if err != nil {
				return err
			}
			rendered, err := build.Render(context.Background(), path, obj, nil)
			if err != nil {
				return err
			}
			out, err := ssautils.ObjectsToYAML(rendered.Objects)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	ks.Flags().StringVar(&path, "path", ".", "source root directory")
	ks.Flags().StringVar(&file, "kustomization-file", "", "YAML file holding the Flux Kustomization object")
	cmd.AddCommand(ks)
	return cmd
}

func loadKustomization(name, file string) (*kustomizev1.Kustomization, error) {
	obj := &kustomizev1.Kustomization{}
	obj.Name = name
	obj.Spec.Path = "./"
	if file == "" {
		return obj, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(obj); err != nil {
		return nil, fmt.Errorf("reading Kustomization from %s: %w", file, err)
	}
	if obj.Name != name {
		return nil, fmt.Errorf("%s holds Kustomization %q, not %q", file, obj.Name, name)
	}
	return obj, nil
}
