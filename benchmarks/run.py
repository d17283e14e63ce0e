"""`make bench`: every benchmark, side by side with PyTorch in the same run."""

import op_overhead

if __name__ == "__main__":
    print(op_overhead.report(op_overhead.run()))
