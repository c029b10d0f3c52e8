package gittree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fluxcd/pkg/sourceignore/gitignore"
	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
)

// userExcludes reads the ignore file git applies to every repository of
// the user: core.excludesFile, else $XDG_CONFIG_HOME/git/ignore
// (~/.config/git/ignore), as `git add --all` reads it. A user who keeps
// editor or scratch files out of every commit that way would otherwise
// see them in a plan of the working tree.
func userExcludes(top string) ([]gitignore.Pattern, error) {
	file, err := excludesFile(top)
	if err != nil || file == "" {
		return nil, err
	}
	return readDiskPatterns(file, nil)
}

// excludesFile is the path core.excludesFile names, the last setting
// winning as in git: the system's configuration (unless
// GIT_CONFIG_NOSYSTEM is set), the user's, then the repository's. Without
// one it is git's default under the XDG configuration directory; empty
// when no home is known.
func excludesFile(top string) (string, error) {
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	var configs []string
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		configs = append(configs, "/etc/gitconfig")
	}
	if xdg != "" {
		configs = append(configs, filepath.Join(xdg, "git", "config"))
	}
	if home != "" {
		configs = append(configs, filepath.Join(home, ".gitconfig"))
	}
	configs = append(configs, filepath.Join(top, ".git", "config"))
	var file string
	for _, c := range configs {
		set, err := configuredExcludes(c)
		if err != nil {
			return "", err
		}
		if set != "" {
			file = set
		}
	}
	switch {
	case file == "" && xdg != "":
		return filepath.Join(xdg, "git", "ignore"), nil
	case strings.HasPrefix(file, "~/") && home != "":
		return filepath.Join(home, file[2:]), nil
	}
	return file, nil
}

// configuredExcludes is core.excludesFile in the git configuration file
// at p; empty when the file or the setting is absent.
func configuredExcludes(p string) (string, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err == nil {
		defer f.Close()
		cfg := gitconfig.New()
		if err = gitconfig.NewDecoder(f).Decode(cfg); err == nil {
			return cfg.Section("core").Option("excludesFile"), nil
		}
	}
	// git would stop on it too; a plan that skipped it could list files
	// the user's excludes leave out of every commit.
	return "", fmt.Errorf("reading git's configuration %s for core.excludesFile: %w; "+
		"check it with `git config --list --show-origin`", p, err)
}
