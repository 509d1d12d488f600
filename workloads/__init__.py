"""Code that runs inside the Ray cluster: step-phase instrumentation for the training loop."""
