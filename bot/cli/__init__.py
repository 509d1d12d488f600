"""`trainbot`: the command line, one subcommand per verb; each parses, calls one action and renders."""
