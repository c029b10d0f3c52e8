package testenv

import (
	"os"
	"path/filepath"
)

// ReadTree returns every regular file under dir by its slash-separated
// path relative to dir, with its content.
func ReadTree(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	return files, err
}
