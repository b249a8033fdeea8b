package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Command is a command of the command line as a completion script knows
// it: its name, its flags (without dashes) and its subcommands.
type Command struct {
	Name  string
	Flags []string
	Subs  []Command
}

const completionHelp = `agentreach completion bash|zsh: print a shell completion script (commands, subcommands, flags)

  source <(agentreach completion bash)      # bash, this shell; add the line to ~/.bashrc to keep it
  source <(agentreach completion zsh)       # zsh, after compinit; add the line to ~/.zshrc to keep it

Or save it where the shell looks for completions, e.g.
  agentreach completion bash > /etc/bash_completion.d/agentreach
`

// flagLine is a flag's line in a flag set's help (PrintDefaults).
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9._-]*)`)

// FlagsOf reads the names of the flags a command's help lists, in order,
// each once.
func FlagsOf(help string) []string {
	var names []string
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// Completion runs `agentreach completion bash|zsh`: it prints the
// completion script of the commands cmds answers to Stdout.
func Completion(env Env, args []string, cmds func() []Command) error {
	if len(args) == 1 && IsHelp(args[0]) {
		fmt.Fprint(env.Stdout, completionHelp)
		return nil
	}
	if len(args) != 1 || args[0] != "bash" && args[0] != "zsh" {
		fmt.Fprint(env.Stderr, completionHelp)
		if len(args) == 0 {
			return fmt.Errorf("%w: agentreach completion bash|zsh: name the shell", ErrUsage)
		}
		return fmt.Errorf("%w: agentreach completion bash|zsh, not %q", ErrUsage, strings.Join(args, " "))
	}
	return WriteCompletion(env.Stdout, args[0], cmds())
}

// WriteCompletion writes the completion script of cmds for shell (bash or
// zsh; zsh runs the bash script through its bashcompinit).
func WriteCompletion(w io.Writer, shell string, cmds []Command) error {
	var b strings.Builder
	switch shell {
	case "bash":
		b.WriteString("# bash completion for agentreach: source <(agentreach completion bash)\n")
	case "zsh":
		b.WriteString("#compdef agentreach\n# zsh completion for agentreach: source <(agentreach completion zsh), after compinit\n")
		b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
	default:
		return fmt.Errorf("%w: no completion for the shell %q: bash or zsh", ErrUsage, shell)
	}
	b.WriteString(`_agentreach() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" sub="" words="" i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        case "$w" in -*) continue ;; esac
        if [[ -z "$cmd" ]]; then cmd="$w"; elif [[ -z "$sub" ]]; then sub="$w"; break; fi
    done
    case "$cmd" in
`)
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	fmt.Fprintf(&b, "    \"\") words=%s ;;\n", shellWords(names, nil))
	for _, c := range cmds {
		if len(c.Subs) == 0 {
			fmt.Fprintf(&b, "    %s) words=%s ;;\n", c.Name, shellWords(nil, c.Flags))
			continue
		}
		fmt.Fprintf(&b, "    %s)\n        case \"$sub\" in\n", c.Name)
		var subs []string
		for _, s := range c.Subs {
			subs = append(subs, s.Name)
			fmt.Fprintf(&b, "        %s) words=%s ;;\n", s.Name, shellWords(nil, s.Flags))
		}
		fmt.Fprintf(&b, "        \"\") words=%s ;;\n", shellWords(subs, c.Flags))
		fmt.Fprintf(&b, "        *) words=%s ;;\n        esac ;;\n", shellWords(nil, c.Flags))
	}
	b.WriteString(`    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _agentreach agentreach
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// shellWords is names and --flags as one quoted word of the script.
func shellWords(names, flags []string) string {
	words := slices.Clone(names)
	for _, f := range flags {
		words = append(words, "--"+f)
	}
	return `"` + strings.Join(words, " ") + `"`
}
