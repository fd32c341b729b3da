package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Shell completion never runs a command. The scripts below ask the binary for words with
//
//	monky-deployd __complete -- WORD... CURRENT
//
// and run() answers that request before the cli library sees the arguments, from the command
// definitions alone: no config is read, no state file opened, nothing dialled. The library's
// own completion flag is off (EnableBashCompletion false); a script of an older release that
// still appends --generate-bash-completion is answered by the same path (legacyCompletion).
const completeCommand = "__complete"

// legacyCompletionFlag is what urfave/cli's own scripts append to the command line.
const legacyCompletionFlag = "--generate-bash-completion"

const bashCompletion = `# bash completion for monky-deployd
# The binary answers from its command definitions: ` + "`monky-deployd __complete -- WORD... CURRENT`" + `
# never runs a command.
_monky_deployd() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)" -- "$cur"))
  return 0
}
complete -o bashdefault -o default -F _monky_deployd monky-deployd
`

const zshCompletion = `#compdef monky-deployd
# zsh completion for monky-deployd
# The binary answers from its command definitions: ` + "`monky-deployd __complete -- WORD... CURRENT`" + `
# never runs a command.

_monky-deployd() {
  local -a opts
  opts=("${(@f)$(${words[1]} __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  if [[ -n "${opts[1]}" ]]; then
    compadd -- "${opts[@]}"
  else
    _files
  fi
}

if [[ "${funcstack[1]}" == "_monky-deployd" ]]; then
  _monky-deployd "$@"
else
  compdef _monky-deployd monky-deployd
fi
`

const fishCompletion = `# fish completion for monky-deployd
# The binary answers from its command definitions: ` + "`monky-deployd __complete -- WORD... CURRENT`" + `
# never runs a command.
complete -c monky-deployd -f -a '(monky-deployd __complete -- (commandline -opc)[2..-1] (commandline -ct))'
`

// completionRequest reports whether args (os.Args) ask for completions, and the words typed
// after the program name, the last being the word under the cursor.
func completionRequest(args []string) ([]string, bool) {
	if len(args) >= 2 && args[1] == completeCommand {
		words := args[2:]
		if len(words) > 0 && words[0] == "--" {
			words = words[1:]
		}
		if len(words) == 0 {
			words = []string{""}
		}
		return words, true
	}
	if len(args) >= 2 && args[len(args)-1] == legacyCompletionFlag {
		var words []string
		for _, w := range args[1 : len(args)-1] {
			if w != "--" {
				words = append(words, w)
			}
		}
		// urfave/cli's scripts put the current word before the flag only when it is a flag
		if n := len(words); n == 0 || !strings.HasPrefix(words[n-1], "-") {
			words = append(words, "")
		}
		return words, true
	}
	return nil, false
}

// completions answers a completion request from the command definitions alone.
func completions(app *cli.App, words []string) []string {
	cur := words[len(words)-1]
	done := words[:len(words)-1]
	cmd, args, ok := typed(app, done)
	if !ok {
		return nil
	}
	var match []string
	for _, w := range candidates(app, cmd, args, cur) {
		if strings.HasPrefix(w, cur) {
			match = append(match, w)
		}
	}
	return match
}

// typed reads the words before the cursor: the command they name (nil: none yet) and its
// arguments so far. It is not ok when there is nothing to offer: an unknown command, or the
// cursor on a flag's value (the shell's own file completion answers).
func typed(app *cli.App, done []string) (cmd *cli.Command, args []string, ok bool) {
	valueFlags := flagsTakingValues(app.Flags)
	for i := 0; i < len(done); i++ {
		w := done[i]
		if strings.HasPrefix(w, "-") {
			if valueFlags[strings.TrimLeft(w, "-")] && !strings.Contains(w, "=") {
				i++ // the flag's value
			}
			continue
		}
		if cmd == nil {
			if c := visibleCommand(app, w); c != nil {
				cmd = c
				valueFlags = flagsTakingValues(c.Flags)
				continue
			}
			return nil, nil, false // an unknown command: nothing to offer
		}
		if sub := cmd.Command(w); sub != nil && len(args) == 0 { // check config|bundle
			cmd = sub
			valueFlags = flagsTakingValues(sub.Flags)
			continue
		}
		args = append(args, w)
	}
	if n := len(done); n > 0 && strings.HasPrefix(done[n-1], "-") && !strings.Contains(done[n-1], "=") &&
		valueFlags[strings.TrimLeft(done[n-1], "-")] {
		return nil, nil, false // a flag's value: the shell's own file completion
	}
	return cmd, args, true
}

// candidates are the words that may follow: cmd's flags, its subcommands or the words its
// first argument takes; the commands when none is typed yet.
func candidates(app *cli.App, cmd *cli.Command, args []string, cur string) []string {
	switch {
	case cmd == nil && strings.HasPrefix(cur, "-"):
		return flagWords(app.Flags)
	case cmd == nil:
		return append(commandNames(app), "help")
	case strings.HasPrefix(cur, "-"):
		return flagWords(cmd.Flags)
	case len(cmd.Subcommands) > 0 && len(args) == 0:
		var out []string
		for _, c := range cmd.Subcommands {
			out = append(out, c.Name)
		}
		return out
	case cmd.Name == "completion" && len(args) == 0:
		return []string{"bash", "zsh", "fish"}
	case cmd.Name == "help" && len(args) == 0:
		return commandNames(app)
	}
	return nil
}

// commandNames are the visible commands' names, in the app's order.
func commandNames(app *cli.App) []string {
	var out []string
	for _, c := range app.Commands {
		if !c.Hidden {
			out = append(out, c.Name)
		}
	}
	return out
}

func visibleCommand(app *cli.App, name string) *cli.Command {
	if name == "help" {
		return &cli.Command{Name: "help"}
	}
	for _, c := range app.Commands {
		if !c.Hidden && c.HasName(name) {
			return c
		}
	}
	return nil
}

// flagWords are the flags as typed: --name, or -n for a one-letter name; --help last.
func flagWords(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) == 1 {
				out = append(out, "-"+n)
			} else {
				out = append(out, "--"+n)
			}
		}
	}
	return append(out, "--help")
}

// flagsTakingValues are the names of the flags that take a value (all but the booleans).
func flagsTakingValues(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			continue
		}
		for _, n := range f.Names() {
			m[n] = true
		}
	}
	return m
}

func completionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "The scripts ask the binary for words (`monky-deployd __complete`), which answers from the command\n" +
			"   definitions and never runs a command.\n\n" +
			"Examples:\n   monky-deployd completion bash | sudo tee /etc/bash_completion.d/monky-deployd\n" +
			"   monky-deployd completion zsh > \"${fpath[1]}/_monky-deployd\"\n" +
			"   monky-deployd completion fish > ~/.config/fish/completions/monky-deployd.fish",
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErr(c, "unexpected argument %q", c.Args().Get(1))
			}
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}
			s, ok := scripts[c.Args().First()]
			if !ok {
				return usageErr(c, "name a shell: bash, zsh or fish (got %q)", c.Args().First())
			}
			_, err := fmt.Fprint(stdout, s)
			return err
		},
	}
}
