"""Stand-ins for what cannot run here (the Kubernetes API with the real CRD schemas, Slack, a server that
never answers) and the clients that drive the bot through them."""
