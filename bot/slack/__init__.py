"""The Slack app: Bolt wiring, listeners, the posters that keep one thread per job, alert group and request,
and who may do what."""
