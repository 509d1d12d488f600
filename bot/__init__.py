"""trainbot's surfaces, where people and other services talk to it: the command line (cli/), Slack (slack/),
the HTTP endpoints (web/, over http/) and the console (console/), sharing one grammar of verbs (commands/) and
one way of showing things (render/).

Nothing here holds business logic: it parses, hands the work to actions/ as typed requests and renders the
result. services.py builds every service once per process; incidents.py is what happens to a failure nobody
caused on purpose.
"""
