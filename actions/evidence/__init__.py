"""Evidence for a diagnosis: from a job name to a bundle, and the bundles kept for what was posted."""
