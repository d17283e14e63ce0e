"""The bottom layer: dtypes, devices, Tensor, grad mode, the op registry and the dispatcher."""
