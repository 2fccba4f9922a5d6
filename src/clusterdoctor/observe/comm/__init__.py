"""Communication: NCCL logs, nccl-tests output, PyTorch profiler (Kineto) traces, flight-recorder dumps, ncu CSV."""
