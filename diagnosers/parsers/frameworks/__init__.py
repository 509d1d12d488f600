"""The line patterns of the tools a training job runs on: its launchers and distributed runtimes (PyTorch
distributed, Horovod, JAX, MPI launchers), Ray, and the MLflow client it logs to."""
