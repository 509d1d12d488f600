"""deploy/: images, manifests and alert rules, checked without a cluster."""
