package main

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"sort"
	"strings"
)

// NodeBinaryBound is the most the node binary (cmd/strata-node, stripped,
// amd64) may weigh: every node pulls it. TestTheNodeBinaryIsLean holds it.
const NodeBinaryBound = 60 << 20

// cloudKeyServices are the modules of cloud key services SOPS can use
// and strata does not serve; no program of strata links them.
var cloudKeyServices = []string{"cloud.google.com/go/kms", "github.com/aws/aws-sdk-go-v2/service/kms",
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault", "github.com/hashicorp/vault/api", "github.com/huaweicloud"}

// moduleSize is how many bytes of a program's code one module holds.
type moduleSize struct {
	module string
	bytes  int64
}

// moduleSizes is a Go program's code by module, largest first: each
// function's extent from the function table (which a stripped binary
// keeps), by its package's module in the build info; "std" is Go's own.
func moduleSizes(binary []byte) ([]moduleSize, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return nil, err
	}
	pclntab, text := f.Section(".gopclntab"), f.Section(".text")
	if pclntab == nil || text == nil {
		return nil, fmt.Errorf("no function table (.gopclntab) or code (.text)")
	}
	data, err := pclntab.Data()
	if err != nil {
		return nil, err
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, err
	}
	modules := []string{info.Main.Path}
	for _, d := range info.Deps {
		modules = append(modules, d.Path)
	}
	// The longest module path a package starts with is its module.
	sort.Slice(modules, func(i, j int) bool { return len(modules[i]) > len(modules[j]) })
	byModule := map[string]int64{}
	for _, fn := range table.Funcs {
		byModule[moduleOf(fn.PackageName(), modules)] += int64(fn.End - fn.Entry)
	}
	var out []moduleSize
	for m, n := range byModule {
		out = append(out, moduleSize{m, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bytes > out[j].bytes })
	return out, nil
}

func moduleOf(pkg string, modules []string) string {
	for _, m := range modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	return "std"
}

// linkedKeyServices are the cloud key services' modules a program links.
func linkedKeyServices(binary []byte) ([]string, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range info.Deps {
		for _, k := range cloudKeyServices {
			if strings.HasPrefix(d.Path, k) {
				out = append(out, d.Path)
			}
		}
	}
	return out, nil
}

// sizesSection is the notes' table of each Go program's size and its
// largest modules, for amd64.
func sizesSection(built []builtComponent) string {
	var b strings.Builder
	b.WriteString("## Binaries\n\nEach program strata writes, for amd64, stripped; its code by module, largest first.\n\n")
	b.WriteString("| program | size | largest modules (code) |\n|---|---|---|\n")
	for _, c := range built {
		if c.amd64 == nil || c.chartValue != "" {
			continue
		}
		sizes, err := moduleSizes(c.amd64)
		if err != nil {
			fmt.Fprintf(&b, "| `%s` | %.1f MiB | (%v) |\n", c.binary, mib(int64(len(c.amd64))), err)
			continue
		}
		var top []string
		for _, s := range sizes[:min(5, len(sizes))] {
			top = append(top, fmt.Sprintf("%s %.1f MiB", s.module, mib(s.bytes)))
		}
		fmt.Fprintf(&b, "| `%s` | %.1f MiB | %s |\n", c.binary, mib(int64(len(c.amd64))), strings.Join(top, ", "))
	}
	fmt.Fprintf(&b, "\nThe node binary's bound is %d MiB (hack/release/sizes.go); it links no cloud key service.\n\n", NodeBinaryBound>>20)
	return b.String()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
