"""The ops behind `tideflow.nn.functional`, one module per family."""
