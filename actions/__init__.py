"""What changes the world: launch backends, job templates, sweeps, promotions, the state store."""
