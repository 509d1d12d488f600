"""trainbot's surfaces: the command line now, the Slack app and the console as they land.

Nothing here holds business logic: it parses, hands the work to actions/ and diagnosers/,
and renders the result.
"""
