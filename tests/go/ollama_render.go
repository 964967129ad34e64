// Renders Modelfile TEMPLATEs with Go's own text/template and the data types Ollama hands them
// (ollama/ollama template/template.go: templateMessage, templateTool, api.ToolProperty), so a test can
// compare grpokit.gotemplate's Python rendering with Go's. Reads [{"template", "values"}] on stdin,
// writes [rendered text] on stdout. With the argument "tag" it instead reads one template and prints the
// tool-call tag Ollama's parser would look for (the first non-blank text inside the first `if` on .ToolCalls,
// stopping at a nested if/range/with, cut before "{"), as ollama/ollama tools/template.go describes it.
// Used by tests/test_export_tools.py when `go` is installed.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"
	"text/template/parse"
)

func mentionsToolCalls(n *parse.IfNode) bool {
	for _, cmd := range n.Pipe.Cmds {
		for _, arg := range cmd.Args {
			if f, ok := arg.(*parse.FieldNode); ok {
				for _, id := range f.Ident {
					if id == "ToolCalls" {
						return true
					}
				}
			}
		}
	}
	return false
}

// firstToolCallsIf: depth-first, the first IfNode whose condition names .ToolCalls.
func firstToolCallsIf(nodes []parse.Node) *parse.IfNode {
	for _, node := range nodes {
		var lists []*parse.ListNode
		switch n := node.(type) {
		case *parse.IfNode:
			if mentionsToolCalls(n) {
				return n
			}
			lists = []*parse.ListNode{n.List, n.ElseList}
		case *parse.RangeNode:
			lists = []*parse.ListNode{n.List, n.ElseList}
		case *parse.WithNode:
			lists = []*parse.ListNode{n.List, n.ElseList}
		case *parse.ListNode:
			lists = []*parse.ListNode{n}
		}
		for _, l := range lists {
			if l != nil {
				if found := firstToolCallsIf(l.Nodes); found != nil {
					return found
				}
			}
		}
	}
	return nil
}

// firstText: the first non-blank text node; a nested control structure ends the search after its body.
func firstText(nodes []parse.Node) *parse.TextNode {
	for _, node := range nodes {
		var lists []*parse.ListNode
		switch n := node.(type) {
		case *parse.TextNode:
			if len(bytes.TrimSpace(n.Text)) > 0 {
				return n
			}
			continue
		case *parse.ListNode:
			if t := firstText(n.Nodes); t != nil {
				return t
			}
			continue
		case *parse.IfNode:
			lists = []*parse.ListNode{n.List, n.ElseList}
		case *parse.RangeNode:
			lists = []*parse.ListNode{n.List, n.ElseList}
		case *parse.WithNode:
			lists = []*parse.ListNode{n.List, n.ElseList}
		default:
			continue
		}
		for _, l := range lists {
			if l != nil {
				if t := firstText(l.Nodes); t != nil {
					return t
				}
			}
		}
		return nil
	}
	return nil
}

func toolTag(text string) string {
	funcs := template.FuncMap{"json": func(v any) string { return "" }}
	tmpl := template.Must(template.New("").Funcs(funcs).Parse(text))
	ifNode := firstToolCallsIf(tmpl.Tree.Root.Nodes)
	if ifNode == nil {
		return "{"
	}
	t := firstText(ifNode.List.Nodes)
	if t == nil {
		return "{"
	}
	tag, _, _ := strings.Cut(string(t.Text), "{")
	if tag = strings.TrimSpace(tag); tag == "" {
		return "{"
	}
	return tag
}

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
	if len(os.Args) > 1 && os.Args[1] == "tag" {
		text, _ := io.ReadAll(os.Stdin)
		fmt.Print(toolTag(string(text)))
		return
	}
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
