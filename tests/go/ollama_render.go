// Renders Modelfile TEMPLATEs with Go's own text/template and the data types Ollama hands them
// (ollama/ollama template/template.go: templateMessage, templateTool, api.ToolProperty), so a test can
// compare grpokit.gotemplate's Python rendering with Go's. Reads [{"template", "values"}] on stdin,
// writes [rendered text] on stdout. Used by tests/test_export_tools.py when `go` is installed.
package main

import (
	"bytes"
	"encoding/json"
	"os"
	"text/template"
)

type PropertyType []string

func (pt PropertyType) MarshalJSON() ([]byte, error) {
	if len(pt) == 1 {
		return json.Marshal(pt[0])
	}
	return json.Marshal([]string(pt))
}

type ToolProperty struct {
	Type        PropertyType `json:"type,omitempty"`
	Items       any          `json:"items,omitempty"`
	Description string       `json:"description,omitempty"`
	Enum        []any        `json:"enum,omitempty"`
}

type templateTool struct {
	Type     string
	Items    any
	Function struct {
		Name        string
		Description string
		Parameters  struct {
			Type       string
			Required   []string
			Properties map[string]ToolProperty
		}
	}
}

type templateMessage struct {
	Role      string
	Content   string
	Thinking  string
	ToolName  string
	ToolCalls []struct {
		ID       string
		Function struct {
			Index     int
			Name      string
			Arguments map[string]any
		}
	}
}

type values struct {
	System   string
	Messages []*templateMessage
	Tools    []templateTool
	Prompt   string
	Response string
}

func main() {
	var cases []struct {
		Template string
		Values   values
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	funcs := template.FuncMap{"json": func(v any) string { b, _ := json.Marshal(v); return string(b) }}
	var out []string
	for _, c := range cases {
		tmpl := template.Must(template.New("").Option("missingkey=zero").Funcs(funcs).Parse(c.Template))
		data := map[string]any{"System": c.Values.System, "Messages": c.Values.Messages, "Prompt": c.Values.Prompt,
			"Response": c.Values.Response}
		if c.Values.Tools != nil { // Ollama passes nil when the request has no tools
			data["Tools"] = c.Values.Tools
		} else {
			data["Tools"] = []templateTool(nil)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			panic(err)
		}
		out = append(out, b.String())
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
