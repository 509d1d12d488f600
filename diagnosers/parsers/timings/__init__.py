"""Where a step's time goes, as training tools print it: data-wait lines of training loops, step breakdowns of
DeepSpeed, Megatron and the PyTorch profiler, and benchmark throughput at several GPU counts."""
