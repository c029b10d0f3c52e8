package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
)

// A path given twice is written once, as its first entry.
func TestLayerHoldsEachPathOnce(t *testing.T) {
	layer, err := layerOf([]File{{Path: "/bin/a", Data: []byte("first")}, {Path: "/bin/a", Data: []byte("second")}})
	if err != nil {
		t.Fatal(err)
	}
	r := tar.NewReader(bytes.NewReader(layer))
	var files []string
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, _ := io.ReadAll(r)
			files = append(files, h.Name+"="+string(data))
		}
	}
	if len(files) != 1 || files[0] != "bin/a=first" {
		t.Fatalf("layer files %v, want only bin/a=first", files)
	}
}
