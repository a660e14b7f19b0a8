package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// Every --help of art's own, art's included, shows examples (art --help
// had none).
func TestHelpHasExamples(t *testing.T) {
	root := newRootCmd(&globals{})
	cmds := append(root.Commands(), root)
	for _, c := range cmds {
		switch c.Name() {
		case "help", "completion": // cobra's
			continue
		}
		var out bytes.Buffer
		c.SetOut(&out)
		if err := c.Help(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "\nExamples:\n  art ") && !strings.Contains(out.String(), "\nExamples:\n  mkdir ") {
			t.Errorf("%s --help has no examples", c.CommandPath())
		}
	}
}
