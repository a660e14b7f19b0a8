// Command art runs AI agents in a bubblewrap sandbox whose home is a
// versioned copy-on-write filesystem; see README.md.
package main

import "github.com/artproject/art/cmd"

func main() { cmd.Execute() }
