"""Actions: jobs, backends, templates and sweeps, promotions, the state store and its migrations."""
