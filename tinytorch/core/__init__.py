"""The engine: tensors, operations, layers, losses, autograd, optimizers, training."""
