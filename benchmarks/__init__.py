"""Speed, memory and quality of tinytorch against PyTorch on the CPU: `python -m benchmarks.run`."""
