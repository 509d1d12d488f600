"""The verbs the command line and Slack share: their argument definitions (one grammar) and what each calls."""
