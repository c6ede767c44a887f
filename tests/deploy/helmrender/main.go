// helmrender renders a Helm chart's templates the way `helm template` does, for the deploy
// test on machines without helm (Debian does not package it). Helm's engine is Go's
// text/template with extra functions; this implements only the ones deploy/helm/kmodd
// uses: include, required, default, toYaml, nindent, indent, quote, dict, fail. The chart must stay
// within them (the test fails on any other function: text/template refuses unknown ones).
// toYaml emits JSON, which is YAML.
//
// usage: helmrender CHART_DIR NAMESPACE VALUES.json OVERRIDES.json...
// Values are values.yaml as JSON (the caller converts it) merged with each override in turn.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
)

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: helmrender CHART_DIR NAMESPACE VALUES.json OVERRIDES.json...")
		os.Exit(2)
	}
	chart, ns := os.Args[1], os.Args[2]
	values := map[string]any{}
	for _, f := range os.Args[3:] {
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			fail(fmt.Errorf("%s: %w", f, err))
		}
		merge(values, m)
	}
	root := template.New("chart").Option("missingkey=error")
	funcs := template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := root.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"required": func(msg string, v any) (any, error) {
			if v == nil || v == "" {
				return nil, fmt.Errorf("%s", msg)
			}
			return v, nil
		},
		"default": func(def, v any) any {
			if v == nil || v == "" || v == false {
				return def
			}
			return v
		},
		"toYaml": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		// dict "k1" v1 "k2" v2: a map, as sprig's.
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, errors.New("dict wants key and value pairs")
			}
			m := map[string]any{}
			for i := 0; i < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m, nil
		},
		// fail "message": the render fails with the message, as Helm's.
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
	}
	root.Funcs(funcs)
	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		if _, err := root.New(filepath.Base(f)).Parse(string(b)); err != nil {
			fail(err)
		}
	}
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": "kmodd", "Namespace": ns, "Service": "Helm"},
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, name, data); err != nil {
			fail(err)
		}
		if strings.TrimSpace(b.String()) == "" {
			continue
		}
		fmt.Printf("---\n# Source: kmodd/templates/%s\n%s\n", name, strings.TrimRight(b.String(), "\n"))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "helmrender:", err)
	os.Exit(1)
}
