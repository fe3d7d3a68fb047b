// Command oracle prints the objects `kubectl apply -f` would send for manifest files,
// decoded by kubectl's own code: k8s.io/cli-runtime's resource.Builder in local mode,
// built the way `kubectl apply` builds it (Unstructured, ContinueOnError, FilenameParam,
// Flatten). It is a test oracle for kubectl-nvcf-worker and never part of the tool.
//
// Usage: oracle FILE...   or   oracle -dir DIR   (every regular file in DIR, by name)
//
// Output: one JSON line per object, {"file":F,"n":N,"object":{...}} in kubectl's order
// (N counts the objects of the file), and one line {"file":F,"error":"..."} when kubectl
// reports an error for the file. Each file is decoded by its own builder, so one file's
// error never hides another's objects, and many inputs share one process.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
)

type line struct {
	File   string                 `json:"file"`
	N      int                    `json:"n"`
	Object map[string]interface{} `json:"object,omitempty"`
	Error  string                 `json:"error,omitempty"`
}

func main() {
	dir := flag.String("dir", "", "decode every regular file in this directory")
	flag.Parse()
	files := flag.Args()
	if *dir != "" {
		entries, err := os.ReadDir(*dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(*dir, e.Name()))
			}
		}
		sort.Strings(files)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, f := range files {
		for _, l := range decode(f) {
			if err := out.Encode(l); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
}

// decode runs the builder chain of `kubectl apply -f FILE` (apply.go GetObjects),
// in local mode: no REST mapping, no schema validation, no server.
func decode(file string) []line {
	r := resource.NewLocalBuilder().
		Unstructured().
		ContinueOnError().
		FilenameParam(false, &resource.FilenameOptions{Filenames: []string{file}}).
		Flatten().
		Do()
	var out []line
	// What Result.Infos collects: kubectl apply applies the objects that decoded and
	// then reports the errors of the others.
	err := r.Visit(func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("unexpected object type %T", info.Object)
		}
		out = append(out, line{File: file, N: len(out), Object: u.Object})
		return nil
	})
	if err != nil {
		out = append(out, line{File: file, N: len(out), Error: err.Error()})
	}
	return out
}
