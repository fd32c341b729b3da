package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// The bash and zsh scripts ask the binary itself for the words (urfave/cli's
// --generate-bash-completion), so they never drift from the command definitions.
const bashCompletion = `# bash completion for monky-deployd
_monky_deployd() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:$COMP_CWORD}")
  local opts
  if [[ "$cur" == "-"* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _monky_deployd monky-deployd
`

const zshCompletion = `#compdef monky-deployd
# zsh completion for monky-deployd

_monky_deployd() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _monky_deployd monky-deployd
`

func completionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Examples:\n   monky-deployd completion bash | sudo tee /etc/bash_completion.d/monky-deployd\n" +
			"   monky-deployd completion zsh > \"${fpath[1]}/_monky-deployd\"\n" +
			"   monky-deployd completion fish > ~/.config/fish/completions/monky-deployd.fish",
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				_, err := fmt.Fprint(stdout, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(stdout, zshCompletion)
				return err
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return fail(1, "completion: %v", err)
				}
				_, err = fmt.Fprint(stdout, s)
				return err
			}
			return fail(1, "completion: name a shell: bash, zsh or fish (got %q)", c.Args().First())
		},
	}
}

// manPage renders the man page from the command definitions (section 8: a system daemon).
func manPage(app *cli.App) (string, error) {
	s, err := app.ToManWithSection(8)
	if err != nil {
		return "", fmt.Errorf("man page: %w", err)
	}
	// the generated page starts with a blank line; man(1) wants .TH first
	return strings.TrimLeft(s, "\n"), nil
}

func manCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff), generated from the command definitions",
		Hidden: true,
		Description: "Examples:\n   monky-deployd man > packaging/man/monky-deployd.8   # what `make man` runs\n" +
			"   monky-deployd man | man -l -",
		Action: func(c *cli.Context) error {
			s, err := manPage(c.App)
			if err != nil {
				return fail(1, "%v", err)
			}
			_, err = fmt.Fprint(stdout, s)
			return err
		},
	}
}
