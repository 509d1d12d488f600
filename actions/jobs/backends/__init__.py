"""The backends that run jobs: KubeRay (RayJob custom resources) and a Ray head on this machine."""
