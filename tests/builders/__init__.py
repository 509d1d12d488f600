"""What the tests build or read: bundles and scenarios, job records, RayJobs, registered models, deploy/."""
